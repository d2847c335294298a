r"""DGREC research runs: one JSON per run in a folder, the table of a folder, and learning-rate sweeps.

    python benchmarks/dgrec_runs.py run --dataset flixster --variant dgrec --seed 0 --epochs 5 \\
        --out results/dgrec/runs [--centres 300] [--public-ratio 1.0] [--set lr=0.6 ...] [--secure-noise]
    python benchmarks/dgrec_runs.py summarize --out results/dgrec/runs
    python benchmarks/dgrec_runs.py sweep --dataset flixster --lr 0.6 --epochs 6 --centres 300 \\
        [--variant dgrec] [--seed 0] [--set beta=2 ...]     # one JSON line, metrics every epoch
    python benchmarks/dgrec_runs.py curves --dataset flixster --out results/reproduce/dgrec-t2-flixster/runs \
        --figure results/dgrec/flixster-curves.png           # per-epoch curves + markdown table

Every run holds out ``--valid-fraction`` (default 0.1) of each user's training interactions; choose
learning rates and budgets on the ``valid`` metrics, never on ``test``.

One run with a standard run folder is ``fedgraphrec train dgrec --variant VARIANT``; the paper tables
are ``fedgraphrec reproduce dgrec-*``. ``--set KEY=VALUE`` takes any
:class:`~fedgraphrec.protocols.dgrec.settings.DGRECSettings` field (values parsed as TOML).
"""

from __future__ import annotations

import argparse
import json
import time
import tomllib
from typing import Any

import torch

from fedgraphrec.evaluation.reference import REFERENCES
from fedgraphrec.protocols.dgrec.settings import VARIANTS, DGRECSettings
from fedgraphrec.reproduce.dgrec_curves import curves_table, plot_curves
from fedgraphrec.reproduce.dgrec_runs import VALID_FRACTION, run, run_and_save, summarize
from fedgraphrec.reproduce.papers import paper


def _sets(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs, each value parsed as TOML."""
    out: dict[str, Any] = {}
    for item in items:
        key, _, raw = item.partition("=")
        out[key.strip()] = tomllib.loads(f"v = {raw.strip()}")["v"]
    return out


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (see module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("what", choices=("run", "summarize", "sweep", "curves"))
    ap.add_argument("--dataset", default="flixster")
    ap.add_argument("--variant", default="dgrec", choices=sorted((*VARIANTS, *REFERENCES)))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--centres", type=int, default=None, help="centres per epoch (default: all users)")
    ap.add_argument("--public-ratio", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--set", dest="sets", action="append", default=[], help="DGRECSettings KEY=VALUE")
    ap.add_argument("--secure-noise", action="store_true", help="LDP randomness from the OS CSPRNG")
    ap.add_argument(
        "--valid-fraction", type=float, default=VALID_FRACTION, help="training share held out for selection"
    )
    ap.add_argument("--out", default="results/dgrec/runs")
    ap.add_argument("--figure", default=None, help="curves: the PNG to write")
    a = ap.parse_args(argv)
    given = _sets(a.sets) | ({} if a.lr is None else {"lr": a.lr})
    if a.what == "summarize":
        print(summarize(a.out), end="")
    elif a.what == "curves":
        numbers = paper("dgrec-tables").section("t2").section("paper")
        names = numbers.names()
        dgrec = numbers.section(a.dataset).numbers("DGREC") if a.dataset in names else ()
        published = dict(zip(("recall@20", "ndcg@20"), (v / 100 for v in dgrec[:2]), strict=False))
        if a.figure:
            plot_curves(a.out, a.dataset, a.figure, published, title=f"DGREC variants on {a.dataset}")
        print(curves_table(a.out, a.dataset), end="")
    elif a.what == "run":
        res = run_and_save(
            a.dataset, a.variant, a.seed, a.epochs, a.out, a.centres, a.public_ratio,
            secure_noise=a.secure_noise, valid_fraction=a.valid_fraction, **given,
        )  # fmt: skip
        print(json.dumps({k: res[k] for k in ("variant", "seed", "metrics", "seconds") if k in res}))
    else:
        torch.set_num_threads(1)
        t0 = time.time()
        s = DGRECSettings.for_variant(a.variant, centres_per_epoch=a.centres, **given)
        r = run(a.dataset, s, a.seed, a.epochs, eval_every=1, valid_fraction=a.valid_fraction)
        line = {"ds": a.dataset, "lr": s.lr, "ep": a.epochs, "cen": a.centres, "extra": _sets(a.sets)}
        line |= {"seed": a.seed, "variant": a.variant, "valid": r["valid_metrics"], "m": r["metrics"]}
        line |= {"curve": r["curve"]}
        print(json.dumps({**line, "s": time.time() - t0}), flush=True)


if __name__ == "__main__":
    main()
