"""Paper results computed without training: P4GCN's Table 3 (byte formulas) and LP-GCN's Fig. 13.

``fedgraphrec reproduce p4gcn-t3`` evaluates the communication formulas of
:mod:`~fedgraphrec.reproduce.p4gcn_comm`; ``fedgraphrec reproduce lpgcn-f13-*`` sweeps the
convolution-client share on a dataset's training graph and reports the range of k and the trends
of C and R against the paper's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fedgraphrec.reproduce.papers import paper
from fedgraphrec.reproduce.report import PaperRow, paper_cells, write_report

__all__ = ["COMM_TABLES", "FIG13", "reproduce_comm", "reproduce_fig13"]


COMM_TABLES = {
    "p4gcn-t3": "P4GCN Table 3: communication GB at E = 5, B ∈ {64, 1024, 4096}, P4GCN vs S3Rec (model)",
}


def reproduce_comm(name: str, out_dir: str | Path, *, reuse: Sequence[str | Path] = ()) -> None:
    """P4GCN Table 3 (:mod:`~fedgraphrec.reproduce.p4gcn_comm`): byte formulas, no training.

    ``reuse``: a folder of Table 1 run files for the "Prac." rows (optional).
    """
    if name not in COMM_TABLES:
        raise KeyError(f"unknown table {name!r}; available: {', '.join(COMM_TABLES)}")
    from fedgraphrec.reproduce import p4gcn_comm

    md = p4gcn_comm.write_table3(Path(out_dir) / "reproduce", table1=Path(reuse[0]) if reuse else None)
    print(md)


# LP-GCN Fig. 13 (spec lpgcn.md §9.7): no numbers in the paper beyond the range of k and the trends.

_F13 = paper("lpgcn").section("f13")  # the paper's range of k and our sweep (papers/lpgcn.toml)


def _fig13(dataset: str, graph: str) -> tuple[str, int, float, float, str]:
    numbers = _F13.section("datasets").section(dataset)
    return dataset, numbers.integer("layers"), numbers.number("k_min"), numbers.number("k_max"), graph


FIG13 = {  # table → (dataset, L, paper's smallest k %, paper's largest k %, training graph)
    "lpgcn-f13-gowalla": _fig13("gowalla", "train"),
    "lpgcn-f13-yelp2018": _fig13("yelp2018", "train"),
    # the graphs the authors' script sweeps (re-split / 90 % of train), see results/lpgcn
    "lpgcn-f13-gowalla-resplit90": _fig13("gowalla", "resplit90"),
    "lpgcn-f13-yelp2018-train90": _fig13("yelp2018", "train90"),
}
_FIG13_FRACTIONS = _F13.numbers("fractions")
_FIG13_SEEDS = _F13.integers("seeds")


def _monotone_share(values: Sequence[float], rising: bool) -> float:
    """Share of consecutive steps that move in the stated direction (1.0: monotone)."""
    steps = np.diff(np.asarray(values, dtype=np.float64))
    return float(np.mean(steps > 0 if rising else steps < 0)) if len(steps) else math.nan


def reproduce_fig13(name: str, out_dir: str | Path, *, reuse: Sequence[str | Path] = ()) -> dict[str, Any]:
    """LP-GCN Fig. 13: the range of the convolution-client share k and the trends of C and R.

    Runs :func:`~fedgraphrec.reproduce.lpgcn_fig13.fig13_sweep` on the dataset's training
    graph (α = 0, d = 64, seeds 0–2; minutes on Gowalla), or with ``reuse`` reads
    ``fig13_<dataset>.csv`` written by ``benchmarks/lpgcn_conv_clients.py``. The paper gives only
    the end points of k and the directions ("C rises and R falls as k grows"), so those are the
    cells: k's minimum and maximum (% of users), and the share of sweep steps along which C rises
    and R falls (1.0 = monotone, the paper's reading of its curves).
    """
    if name not in FIG13:
        raise KeyError(f"unknown table {name!r}; available: {', '.join(FIG13)}")
    dataset, layers, k_min, k_max, graph = FIG13[name]
    stem = dataset if graph == "train" else f"{dataset}_{graph}"
    if reuse:
        import csv

        path = Path(reuse[0]) / f"fig13_{stem}.csv"
        if not path.exists():
            raise FileNotFoundError(f"{path}: no Fig. 13 sweep to reuse")
        with path.open() as f:
            points = [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]
        source = f"sweep read from {path}"
    elif graph != "train":
        raise ValueError(
            f"{name}: sweep the {graph} graph with `python benchmarks/lpgcn_conv_clients.py --dataset "
            f"{dataset} --graph {graph} --out DIR`, then pass --reuse DIR"
        )
    else:
        from fedgraphrec.data.registry import load_dataset
        from fedgraphrec.data.types import Interactions
        from fedgraphrec.reproduce.lpgcn_fig13 import fig13_sweep

        data = load_dataset(dataset)
        if not isinstance(data, Interactions):
            raise ValueError(f"{dataset!r} is not an implicit-interaction dataset; Fig. 13 needs one")
        real = data.train
        points = fig13_sweep(real, real, _FIG13_FRACTIONS, _FIG13_SEEDS, _F13.integer("dim"), layers)
        source = "sweep run now"
    points.sort(key=lambda p: p["convolution_fraction"])
    k = [100 * p["convolution_fraction"] for p in points]
    cost = [p["cost_bytes"] for p in points]
    util = [p["R"] for p in points]
    measured = {
        "k minimum (% of users)": (min(k), k_min),
        "k maximum (% of users)": (max(k), k_max),
        "C rises with k (share of steps)": (_monotone_share(cost, True), 1.0),
        "R falls with k (share of steps)": (_monotone_share(util, False), 1.0),
    }
    rows = []
    for label, (ours, printed) in measured.items():
        row = PaperRow(label, "fig13", {"value": printed})
        rows.append({"row": label, "method": "fig13", "cells": paper_cells(row, {"value": (ours, 0.0)})})
    report = {
        "table": name,
        "title": f"LP-GCN Fig. 13 on {dataset}: convolution-client share k, per-client cost C, utilisation R",
        "source": "specs/lpgcn.md §9.7",
        "data": f"{dataset}: training graph `{graph}` (see benchmarks/lpgcn_conv_clients.py), α = 0, "
        f"d = {_F13.integer('dim')}, L = {layers}",
        "budget": "cpu",
        "budget_note": f"ρ ∈ {list(_FIG13_FRACTIONS)} added to the greedy cover, "
        f"seeds {_FIG13_SEEDS[0]}–{_FIG13_SEEDS[-1]} ({source})",
        "seeds": list(_FIG13_SEEDS),
        "overrides": [],
        "rows": rows,
    }
    write_report(report, Path(out_dir))
    return report
