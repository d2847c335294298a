"""P4GCN Table 1/2 runs, methods × seeds, one JSON per run (a research runner, not a user command).

``python -m scripts.p4gcn_table --dataset filmtrust --methods p4gcn 'p4gcn*' --seeds 0 1 2 --out DIR
[--lr 5e-3 --epochs 20 --batch 256 --sensitivity paper-local --backend ckks-packed --no-fusion …]``.
Every ``--flag value`` is a field of :class:`fedgraphrec.training.rating.RatingSettings`; one run with a
standard run folder is ``fedgraphrec train p4gcn``; the paper tables are ``fedgraphrec reproduce p4gcn-*``.
"""

from __future__ import annotations

import argparse

from fedgraphrec.reproduce.p4gcn_table import METHODS, run_table, settings_from_flags


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--dataset", required=True)
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--out", required=True)
    known, flags = p.parse_known_args(argv)
    run_table(known.dataset, known.methods, known.seeds, settings_from_flags(flags), known.out)


if __name__ == "__main__":
    main()
