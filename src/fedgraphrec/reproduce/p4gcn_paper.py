"""The P4GCN paper's reproduction data (``papers/p4gcn.toml``): its per-dataset DP budget ``ε``.

The library's default ``eps`` (:class:`~fedgraphrec.protocols.p4gcn.settings.P4GCNSettings`) is a
plain documented value; the paper's Table 1 budgets are data of the reproduction, passed explicitly
by ``fedgraphrec reproduce p4gcn-*`` (:func:`paper_eps`).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

__all__ = ["PAPER_FILE", "paper_eps"]

PAPER_FILE = Path(__file__).with_name("papers") / "p4gcn.toml"
"""The data file."""


def paper_eps(dataset: str) -> float:
    """The paper's ``ε`` for ``dataset`` (its ``default`` for a dataset the paper did not use)."""
    with PAPER_FILE.open("rb") as fh:
        table = tomllib.load(fh)["eps"]
    return float(table.get(dataset, table["default"]))
