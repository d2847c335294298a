"""The paper's P4GCN Table 1/2 numbers (stored once, :data:`PAPER`) and a side-by-side table of runs.

``python benchmarks/p4gcn_runs.py summary results/p4gcn/table1`` prints :func:`summarize` of a folder.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np

__all__ = ["PAPER", "summarize"]

# Paper Table 1 (RMSE, MAE; "CiaoDVD" is Tang's Ciao, spec §7.1); S3Rec equals SeSoRec there.
# Table 2 rows for FilmTrust backbones.
PAPER: dict[str, dict[str, tuple[float, float]]] = {
    "filmtrust": {
        "pmf": (0.8007, 0.6106), "neumf": (0.8287, 0.6319), "gcn": (0.8765, 0.6796),
        "fesog-": (0.8029, 0.6118),
        "lightgcn": (0.7960, 0.6079), "sesorec": (0.8009, 0.6106), "p4gcn": (0.7929, 0.6059),
        "p4gcn*": (0.7905, 0.6032), "p4gcn-pmf": (0.7997, 0.6112), "p4gcn-pmf*": (0.7997, 0.6105),
        "p4gcn-gcn": (0.8569, 0.6606), "p4gcn-gcn*": (0.8506, 0.6486),
    },
    "douban": {
        "pmf": (0.8361, 0.6300), "neumf": (0.7894, 0.6222), "gcn": (0.7989, 0.6346),
        "fesog-": (0.8331, 0.6498),
        "lightgcn": (0.7892, 0.6209), "sesorec": (0.8171, 0.6316), "p4gcn": (0.7672, 0.6023),
        "p4gcn*": (0.7670, 0.6035),
    },
    "ciao": {
        "pmf": (1.2245, 0.9651), "neumf": (1.1842, 0.8839), "gcn": (1.1076, 0.8383),
        "fesog-": (1.2314, 0.9741),
        "lightgcn": (1.1186, 0.8396), "sesorec": (1.1988, 0.9635), "p4gcn": (1.0776, 0.8224),
        "p4gcn*": (1.0803, 0.8225),
    },
    "epinions": {
        "pmf": (1.2487, 0.9721), "neumf": (1.1285, 0.8020), "gcn": (1.1513, 0.8177),
        "fesog-": (1.2171, 0.953),
        "lightgcn": (1.0746, 0.8412), "sesorec": (1.2131, 0.9598), "p4gcn": (1.0744, 0.8272),
        "p4gcn*": (1.0642, 0.8186),
    },
}  # fmt: skip


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
