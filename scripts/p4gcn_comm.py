"""P4GCN Table 3 byte counts (a research runner; ``fedgraphrec reproduce`` runs the same table).

``python -m scripts.p4gcn_comm --datasets filmtrust ciao douban epinions [--table1 DIR] --out STEM``;
the library code is :mod:`fedgraphrec.reproduce.p4gcn_comm`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fedgraphrec.reproduce.p4gcn_comm import PAPER_TABLE3, write_table3


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--datasets", nargs="+", default=list(PAPER_TABLE3))
    p.add_argument("--table1", type=Path, default=None)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--key-bits", type=int, default=2048)
    p.add_argument("--out", type=Path, required=True, help="path stem: writes STEM.json and STEM.md")
    a = p.parse_args(argv)
    print(write_table3(a.out, a.datasets, a.table1, epochs=a.epochs, seed=a.seed, key_bits=a.key_bits))


if __name__ == "__main__":
    main()
