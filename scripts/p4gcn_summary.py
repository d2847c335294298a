"""Print the side-by-side table of a folder of P4GCN run files (a research helper, not a user command).

``python -m scripts.p4gcn_summary results/p4gcn/table1``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fedgraphrec.reproduce.p4gcn_summary import summarize

if __name__ == "__main__":
    print(summarize(Path(sys.argv[1])))
