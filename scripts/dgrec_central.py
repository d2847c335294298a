"""DGREC Table 2's side-information baselines, one run per call (a research runner, not a user command).

``python -m scripts.dgrec_central METHOD --dataset flixster --out DIR`` (METHOD: lightgcn-side, lightgcn,
hypergnn, fedgnn or fedrec) and ``python -m scripts.dgrec_central summarize --out DIR``; the library code is
:mod:`fedgraphrec.reproduce.dgrec_central`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fedgraphrec.reproduce.dgrec_central import CENTRAL, FEDERATED, run, summarize


def main() -> None:
    """Command-line entry point (see module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("method", choices=(*CENTRAL, *FEDERATED, "summarize"), help="summarize: table of --out")
    ap.add_argument("--dataset", default="flixster")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=100, help="epochs (fedgnn/fedrec: rounds)")
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--reg", type=float, default=1e-4)
    ap.add_argument("--batch-size", type=int, default=2048)
    ap.add_argument("--epsilon", type=float, default=1.0, help="fedgnn/fedrec: ε of the Laplace upload")
    ap.add_argument("--clip", type=float, default=0.1, help="fedgnn/fedrec: per-coordinate clip δ")
    ap.add_argument(
        "--clients", type=int, default=100_000_000, help="fedgnn/fedrec: users per round (default all)"
    )
    ap.add_argument("--local-steps", type=int, default=1, help="fedgnn/fedrec: local steps per round")
    ap.add_argument("--negatives", type=int, default=64, help="fedgnn/fedrec: negatives per user and round")
    ap.add_argument("--out", default="results/dgrec/central")
    a = ap.parse_args()
    if a.method == "summarize":
        print(summarize(a.out), end="")
        return
    res = run(
        a.method, a.dataset, a.seed, a.epochs, dim=a.dim, n_layers=a.layers, lr=a.lr, reg=a.reg,
        batch_size=a.batch_size, epsilon=a.epsilon, clip=a.clip, clients_per_round=a.clients,
        local_steps=a.local_steps, n_negatives=a.negatives,
    )  # fmt: skip
    folder = Path(a.out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{a.dataset}_{a.method}_s{a.seed}.json").write_text(json.dumps(res, indent=1, default=str))
    print(json.dumps({k: res[k] for k in ("method", "dataset", "seed", "metrics", "seconds")}))


if __name__ == "__main__":
    main()
