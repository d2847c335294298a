"""The paper's P4GCN Table 1/2 numbers (:data:`PAPER`, from a data file) and a side-by-side table of runs.

``python benchmarks/p4gcn_runs.py summary results/p4gcn/table1`` prints :func:`summarize` of a folder.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from fedgraphrec.reproduce.papers import PaperDataError, Section, paper

__all__ = ["PAPER", "summarize"]


def _pair(sec: Section, method: str) -> tuple[float, float]:
    rmse_mae = sec.numbers(method)
    if len(rmse_mae) != 2:
        raise PaperDataError(f"{sec.where}.{method}: expected [RMSE, MAE]")
    return rmse_mae[0], rmse_mae[1]


# Paper Tables 1-2 (RMSE, MAE) by dataset and method: papers/p4gcn-tables.toml.
_NUMBERS = paper("p4gcn-tables").section("t12").section("paper")
PAPER: dict[str, dict[str, tuple[float, float]]] = {
    ds: {m: _pair(_NUMBERS.section(ds), m) for m in _NUMBERS.section(ds).names()} for ds in _NUMBERS.names()
}


def summarize(folder: Path) -> str:
    """Markdown table of every ``<dataset>_<method>_s<seed>.json`` in ``folder``."""
    runs: dict[tuple[str, str], list[dict[str, float]]] = defaultdict(list)
    for f in sorted(folder.glob("*.json")):
        r = json.loads(f.read_text())
        runs[(r["dataset"], r["method"])].append(r)
    lines = [
        "| dataset | method | seeds | RMSE (ours) | MAE (ours) | RMSE (paper) | MAE (paper) "
        "| best epoch | ε spent |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (ds, m), rs in sorted(runs.items()):
        r_ = np.array([x["test_rmse"] for x in rs])
        a_ = np.array([x["test_mae"] for x in rs])
        paper = PAPER.get(ds, {}).get(m)
        ps = (f"{paper[0]:.4f}", f"{paper[1]:.4f}") if paper else ("–", "–")
        spent = float(np.max([x.get("epsilon_spent", 0.0) for x in rs]))
        eps = f"{spent:.2f}" if m.startswith("p4gcn") else "–"
        lines.append(
            f"| {ds} | {m} | {len(rs)} | {r_.mean():.4f} ± {r_.std():.4f} | {a_.mean():.4f} ± {a_.std():.4f} "
            f"| {ps[0]} | {ps[1]} | {np.mean([x['epoch'] for x in rs]):.1f} | {eps} |"
        )
    return "\n".join(lines)
