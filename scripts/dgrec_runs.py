"""DGREC runs, one JSON per run, and the table of a folder (a research runner, not a user command).

``python -m scripts.dgrec_runs --dataset flixster --variant dgrec --seed 0 --epochs 5 --out DIR`` and
``python -m scripts.dgrec_runs --summarize --out DIR``; one run with a standard run folder is
``fedgraphrec train dgrec --variant VARIANT``; the paper tables are ``fedgraphrec reproduce dgrec-*``.
"""

from __future__ import annotations

import argparse
import json

from fedgraphrec.reproduce.dgrec_runs import VARIANTS, run_and_save, summarize


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--dataset", default="flixster")
    ap.add_argument("--variant", default="dgrec", choices=sorted(VARIANTS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--centres", type=int, default=None, help="centres per epoch (default: all users)")
    ap.add_argument("--public-ratio", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--out", default="results/dgrec/runs")
    ap.add_argument("--summarize", action="store_true", help="print the table of the runs in --out and exit")
    ap.add_argument("--secure-noise", action="store_true", help="LDP randomness from the OS CSPRNG")
    a = ap.parse_args(argv)
    if a.summarize:
        print(summarize(a.out), end="")
        return
    res = run_and_save(
        a.dataset, a.variant, a.seed, a.epochs, a.out, a.centres, a.public_ratio, a.lr,
        secure_noise=a.secure_noise,
    )  # fmt: skip
    print(json.dumps({k: res[k] for k in ("variant", "seed", "metrics", "noise_source", "seconds")}))


if __name__ == "__main__":
    main()
