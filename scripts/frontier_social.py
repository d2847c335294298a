"""The vertical + decentralized frontier from committed run files (a research runner, not a user command).

``python -m scripts.frontier_social --dataset flixster --p4gcn DIR --dgrec DIR [--p4gcn-audit A.json]
[--dgrec-audit B.json] --out OUT``; the library code is :mod:`fedgraphrec.reproduce.frontier_social`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fedgraphrec.reproduce.frontier_social import frontier_social


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--dataset", default="flixster")
    p.add_argument("--p4gcn", type=Path, required=True, help="folder of p4gcn_table run files")
    p.add_argument("--dgrec", type=Path, required=True, help="folder of dgrec run files")
    p.add_argument("--p4gcn-audit", type=Path, default=None)
    p.add_argument("--dgrec-audit", type=Path, default=None)
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    print(frontier_social(a.dataset, a.p4gcn, a.dgrec, a.out, a.p4gcn_audit, a.dgrec_audit), end="")


if __name__ == "__main__":
    main()
