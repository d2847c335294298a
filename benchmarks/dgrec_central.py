r"""DGREC Table 2's side-information references, one run per call, and the table of a folder.

    python benchmarks/dgrec_central.py METHOD --dataset flixster --seed 0 --out results/dgrec/central \\
        [--epochs 100] [--set dim=64 --set lr=0.001 ...]
    python benchmarks/dgrec_central.py summarize --out results/dgrec/central

METHOD: lightgcn-side, lightgcn, hypergnn (centralised; ``--epochs`` epochs) or fedgnn, fedrec
(FedPerGNN; ``--epochs`` rounds). Settings not given (``--set``) come from the ``[central]`` /
``[federated]`` tables of ``src/fedgraphrec/reproduce/papers/dgrec.toml``; the library code is
:mod:`fedgraphrec.reproduce.dgrec_central`.
"""

from __future__ import annotations

import argparse
import json
import tomllib
from pathlib import Path

from fedgraphrec.reproduce.dgrec_central import CENTRAL, FEDERATED, run, summarize


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (see module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("method", choices=(*CENTRAL, *FEDERATED, "summarize"), help="summarize: table of --out")
    ap.add_argument("--dataset", default="flixster")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=None, help="epochs (fedgnn/fedrec: rounds)")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="KEY=VALUE (TOML value)")
    ap.add_argument("--out", default="results/dgrec/central")
    a = ap.parse_args(argv)
    if a.method == "summarize":
        print(summarize(a.out), end="")
        return
    given = {}
    for item in a.sets:
        key, _, raw = item.partition("=")
        given[key.strip()] = tomllib.loads(f"v = {raw.strip()}")["v"]
    res = run(a.method, a.dataset, a.seed, a.epochs, **given)
    folder = Path(a.out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{a.dataset}_{a.method}_s{a.seed}.json").write_text(json.dumps(res, indent=1, default=str))
    print(json.dumps({k: res[k] for k in ("method", "dataset", "seed", "metrics", "seconds")}))


if __name__ == "__main__":
    main()
