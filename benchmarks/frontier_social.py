r"""The vertical (P4GCN) + decentralized (DGREC) frontier on one social dataset, from run files.

Collects the run files the P4GCN runner (``benchmarks/p4gcn_runs.py run``) and the DGREC table
(``fedgraphrec reproduce dgrec-t2-flixster``) wrote, and the two audits (``fedgraphrec audit
p4gcn|dgrec``); writes ``frontier.md`` / ``.json`` / ``.png`` into ``--out``
(:func:`fedgraphrec.reproduce.frontier_social.frontier_social`):

    python benchmarks/frontier_social.py --dataset flixster --p4gcn DIR --dgrec DIR \
        [--p4gcn-audit A.json] [--dgrec-audit B.json] --out OUT
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fedgraphrec.reproduce.frontier_social import frontier_social


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="flixster")
    p.add_argument("--p4gcn", type=Path, required=True, help="folder of P4GCN run files")
    p.add_argument("--dgrec", type=Path, required=True, help="folder of DGREC run files")
    p.add_argument("--p4gcn-audit", type=Path, default=None)
    p.add_argument("--dgrec-audit", type=Path, default=None)
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    print(frontier_social(a.dataset, a.p4gcn, a.dgrec, a.out, a.p4gcn_audit, a.dgrec_audit), end="")


if __name__ == "__main__":
    main()
