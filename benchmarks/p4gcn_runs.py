r"""P4GCN runs outside the paper tables: methods × seeds with any runner settings, and their summary.

The paper tables themselves are ``fedgraphrec reproduce p4gcn-t1-<dataset>`` / ``p4gcn-t2-filmtrust``
(their budgets, the runs in ``OUT/runs``); this research runner makes the runs no table names — a
longer budget, the shuffled-social control, another dataset (Flixster for the frontier), another HE
backend — one JSON per method and seed (``<dataset>_<method>_s<seed>.json``), the same files the
tables read with ``--reuse``:

    python benchmarks/p4gcn_runs.py run --dataset filmtrust --methods p4gcn 'p4gcn*' --seeds 0 1 2 \
        --out DIR --epochs 20 --patience 3 --lr 5e-3 --batch 256 [--social shuffled --backend ckks-packed …]
    python benchmarks/p4gcn_runs.py summary DIR      # markdown table of a folder, the paper beside

Every ``--flag value`` after the known options is a runner setting
(:func:`fedgraphrec.reproduce.p4gcn_table.settings_from_flags`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fedgraphrec.reproduce.p4gcn_summary import summarize
from fedgraphrec.reproduce.p4gcn_table import METHODS, run_table, settings_from_flags


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point: ``run`` (train and write run files) or ``summary`` (print a table)."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="train methods × seeds on one dataset, one JSON per run")
    run.add_argument("--dataset", required=True)
    run.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    run.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    run.add_argument("--out", required=True, help="folder of the run files")
    summary = sub.add_parser("summary", help="print the markdown table of a folder of run files")
    summary.add_argument("folder", type=Path)
    known, flags = p.parse_known_args(argv)
    if known.command == "summary":
        if flags:
            p.error(f"summary takes no runner flags: {flags}")
        print(summarize(known.folder))
        return
    run_table(known.dataset, known.methods, known.seeds, settings_from_flags(flags), known.out)


if __name__ == "__main__":
    main()
