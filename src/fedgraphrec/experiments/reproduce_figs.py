"""Paper figures (and grid tables) reproduced: ``fedgraphrec reproduce lpgcn-f10`` and friends.

A :class:`Figure` is a set of *series*, each a method of one runner (``train``: the ordinary
:class:`~fedgraphrec.experiments.train.Trainer`, ``p4gcn``: :mod:`~.p4gcn_table`, ``dgrec``:
:mod:`~.dgrec`) that is either swept over an x axis (one run per x and seed, ``arg=x``), a curve over
epochs (``xs=()`` on a ``train`` series: its ``metrics.jsonl``) or a constant reference (``xs=()`` on
a runner series: one run, drawn as a dashed line). Most of these figures print no numbers, so the
report's cells are the paper's *claims* ("error falls as ε grows": the share of sweep steps that move
that way, 1.0 in the paper), judged by :func:`~.reproduce.verdict` beside any printed numbers
(FedGRec Tables 3–4, DGREC Table 3). :func:`reproduce_figure` writes ``figure.png`` (the curves,
ours) beside the usual ``reproduce.md`` / ``.json`` / ``.png``.

Runs go to ``OUT/runs/<series>/<arg><x>[-s<seed>]`` and are not run again when present (resume);
``reuse=`` names folders to read them from instead (or, for a ``flat`` DGREC figure, the committed
run files of ``results/dgrec/runs``; for a curve, ``metrics.jsonl`` files or FedGRec comparison JSONs,
one per series in order).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from fedgraphrec.experiments.reproduce import TABLES, Budget, PaperRow, paper_cells, write_report
from fedgraphrec.experiments.reproduce_runs import DGREC_ROW_ARGS

__all__ = ["FIGURES", "Claim", "Figure", "Series", "reproduce_figure", "train_overrides"]

# series label → x → metric → mean over seeds
Results = dict[str, dict[float, dict[str, float]]]


@dataclass(frozen=True)
class Series:
    """One line of a figure: ``method`` (runner method or ``protocol[:k=v,…]``) swept over ``xs``."""

    label: str
    method: str
    xs: tuple[float, ...] = ()
    args: tuple[str, ...] = ()  # fixed runner arguments / config overrides of this series
    arg: str = ""  # the runner argument / config key of x, when not the figure's


@dataclass(frozen=True)
class Claim:
    """A qualitative statement of the paper, measured on the results (1.0 = holds everywhere)."""

    text: str
    measure: Callable[[Results, str], float]
    paper: float = 1.0
    metrics: tuple[str, ...] = ()  # judged on these metrics only (default: every metric of the figure)


@dataclass(frozen=True)
class Figure:
    """A paper figure (or grid table) we can run; ``arg`` is the runner argument / config key of x."""

    name: str
    title: str
    source: str
    dataset: str
    data_note: str
    kind: str  # train | p4gcn | dgrec
    xlabel: str
    arg: str
    metrics: tuple[str, ...]
    series: tuple[Series, ...]
    budgets: dict[str, Budget]
    claims: tuple[Claim, ...] = ()
    paper: dict[tuple[str, float], dict[str, float]] = field(default_factory=dict)
    base: tuple[str, ...] = ()  # train: config overrides shared by every series
    flat: bool = False  # dgrec: run files may also sit directly in a reuse folder
    xlog: bool = False


# ---------------------------------------------------------------------------------------------
# Claim helpers: every one returns a share in [0, 1] (or nan when a series is missing).


def _at(res: Results, label: str, metric: str) -> list[tuple[float, float]]:
    return sorted((x, m[metric]) for x, m in res.get(label, {}).items() if metric in m)


def _last(res: Results, label: str, metric: str) -> float:
    points = _at(res, label, metric)
    return points[-1][1] if points else math.nan


def _const(res: Results, label: str, metric: str) -> float:
    points = _at(res, label, metric)
    return float(np.mean([v for _, v in points])) if points else math.nan


def trend(label: str, rising: bool) -> Callable[[Results, str], float]:
    """Share of consecutive sweep steps of ``label`` that move up (``rising``) or down."""

    def measure(res: Results, metric: str) -> float:
        values = np.array([v for _, v in _at(res, label, metric)])
        steps = np.diff(values)
        return float(np.mean(steps > 0 if rising else steps < 0)) if len(steps) else math.nan

    return measure


def beats(a: str, b: str, lower: bool, xs: Sequence[float] | None = None) -> Callable[[Results, str], float]:
    """Share of x (``xs``, or every x of either) where ``a`` is better than ``b``.

    A series with one point is a reference (constant); ``lower``: smaller is better (errors).
    """

    def measure(res: Results, metric: str) -> float:
        pa, pb = dict(_at(res, a, metric)), dict(_at(res, b, metric))
        ref_a = _const(res, a, metric) if len(pa) == 1 else math.nan
        ref_b = _const(res, b, metric) if len(pb) == 1 else math.nan
        wins = []
        for x in sorted(x for x in {*pa, *pb} if not math.isnan(x) and (xs is None or x in xs)):
            u, w = pa.get(x, ref_a), pb.get(x, ref_b)
            if not (math.isnan(u) or math.isnan(w)):
                wins.append(u < w if lower else u > w)
        return float(np.mean(wins)) if wins else math.nan

    return measure


def best_x_among(label: str, lower: bool, allowed: Sequence[float]) -> Callable[[Results, str], float]:
    """1.0 when the best x of ``label`` (at its last point) is one of ``allowed``."""

    def measure(res: Results, metric: str) -> float:
        points = _at(res, label, metric)
        if not points:
            return math.nan
        best = (min if lower else max)(points, key=lambda p: p[1])[0]
        return float(best in allowed)

    return measure


def _finals(labels: Sequence[str], lower: bool) -> Callable[[Results, str], float]:
    """1.0 when the first label's last value is the best of ``labels``' last values."""

    def measure(res: Results, metric: str) -> float:
        values = [_last(res, lab, metric) for lab in labels]
        if any(math.isnan(v) for v in values):
            return math.nan
        best = min(values) if lower else max(values)
        return float(values[0] == best)

    return measure


def overlap(a: str, b: str, tol: float = 5e-5) -> Callable[[Results, str], float]:
    """Share of common x where ``a`` and ``b`` agree within ``tol`` (the curves overlap)."""

    def measure(res: Results, metric: str) -> float:
        pa, pb = dict(_at(res, a, metric)), dict(_at(res, b, metric))
        common = sorted(set(pa) & set(pb))
        return float(np.mean([abs(pa[x] - pb[x]) <= tol for x in common])) if common else math.nan

    return measure


# ---------------------------------------------------------------------------------------------
# The figures.

_ML100K = TABLES["gnn4fr-t1"].base  # the LP-GCN equivalence script's settings (spec lpgcn.md §9.4)


def _f10() -> Figure:
    common = ("eval_initial=true", "crypto=accounted")
    return Figure(
        name="lpgcn-f10",
        title="LP-GCN Fig. 10 on ML-100K: loss, NDCG@5, Recall@5 per epoch, LightGCN vs LP-GCN(LightGCN)",
        source="specs/lpgcn.md §9.7",
        dataset="ml-100k",
        data_note="ML-100K u1.base/u1.test, ratings ≥ 4 (the authors' equivalence script: L = 5, d = 20, "
        "lr 0.01, λ = 1e-3, batch 2048, seed 2023)",
        kind="train",
        xlabel="epoch",
        arg="",
        metrics=("loss", "ndcg@5", "recall@5", "verify_max_deviation"),
        series=(
            Series("LightGCN (centralized)", "central", args=common),
            Series("LP-GCN (LightGCN)", "lpgcn", args=(*common, "verify=true")),
        ),
        budgets={
            "cpu": Budget(("epochs=50", "threads=1", "checkpoint_every=0"), (2023,), "50 of the 500 epochs"),
            "full": Budget(("epochs=500", "checkpoint_every=50"), (2023,), "the paper's 500 epochs"),
        },
        claims=(
            Claim("curves overlap (share of epochs equal within 5e-5)", overlap(*_F10), metrics=_F10_M),
            Claim("last epoch equal within 5e-5 (1 = identical)", _final_equal(*_F10), metrics=_F10_M),
            Claim(
                "parameters equal: --verify's largest relative deviation ≤ 1e-5 (float32)",
                _verified(_F10[0]),
                metrics=("verify_max_deviation",),
            ),
        ),
        base=_ML100K,
    )


_F10 = ("LP-GCN (LightGCN)", "LightGCN (centralized)")


_F10_M = ("loss", "ndcg@5", "recall@5")


def _verified(label: str) -> Callable[[Results, str], float]:
    def measure(res: Results, metric: str) -> float:
        values = [v for _, v in _at(res, label, metric)]
        return float(max(values) <= 1e-5) if values else math.nan

    return measure


def _final_equal(a: str, b: str, tol: float = 5e-5) -> Callable[[Results, str], float]:
    def measure(res: Results, metric: str) -> float:
        va, vb = _last(res, a, metric), _last(res, b, metric)
        return math.nan if math.isnan(va) or math.isnan(vb) else float(abs(va - vb) <= tol)

    return measure


def _f11() -> Figure:
    layers = (1.0, 2.0, 3.0, 4.0)
    lp, lg, pg = "LP-GCN (LightGCN+)", "LightGCN", "P-GCN"
    return Figure(
        name="lpgcn-f11",
        title="LP-GCN Fig. 11: Recall@20 / NDCG@20 against the number of layers L",
        source="specs/lpgcn.md §9.7",
        dataset="ml-100k",
        data_note="ML-100K u1 (ratings ≥ 4) stands in for Gowalla / Yelp2018 / Amazon-Book, where P-GCN "
        "costs ≈ 400 s per epoch here; LP-GCN(LightGCN+) is the federated protocol itself (crypto accounted)",
        kind="train",
        xlabel="layers L",
        arg="n_layers",
        metrics=("recall@20", "ndcg@20"),
        series=(
            Series(lp, "lpgcn:model=lightgcn+", layers, ("crypto=accounted",)),
            Series(lg, "central:model=lightgcn", layers),
            Series(pg, "pgcn:model=lightgcn+", layers, ("crypto=accounted",)),
        ),
        budgets={
            "cpu": Budget(
                ("epochs=30", "eval_every=30", "select=last", "threads=1", "checkpoint_every=0"),
                (1,),
                "30 epochs (the paper: up to 1,000 with early stopping), one seed, last epoch",
            ),
            "full": Budget(
                ("epochs=1000", "patience=50", "valid_fraction=0.1", "select=valid", "checkpoint_every=50"),
                (1, 2, 3, 4, 5),
                "up to 1,000 epochs, early stopping on validation Recall@20, 5 seeds",
            ),
        },
        claims=(
            Claim("LP-GCN(LightGCN+) > LightGCN at every L (share of L)", beats(lp, lg, lower=False)),
            Claim("LP-GCN(LightGCN+) > P-GCN at every L (share of L)", beats(lp, pg, lower=False)),
        ),
        base=(*_ML100K, "ks=[20]", "metric=recall@20"),
    )


_FG_BASE = (
    "model=lightgcn",
    "dim=64",
    "init_std=0.1",
    "lr=0.001",
    "reg=0.0001",
    "n_negatives=2048",
    "ks=[20]",
    "metric=recall@20",
    "select=last",
    "threads=1",
    "checkpoint_every=0",
    "eval_initial=true",
)
_FG_NOTE = "FedGRec's configuration (spec fedgrec.md §5.4: d = 64, S = 400, τ = 10, 2,048 negatives)"
_FG_FULL = Budget(("epochs=100000", "eval_every=1000", "log_every=100"), (2020,), "the paper's 10^5 rounds")
_FG_T34 = {  # (Table 3 NDCG@20, Table 4 Recall@20) for K = 1, 2, 3
    "FedGRec": ((0.1376, 0.1412, 0.1362), (0.1712, 0.1695, 0.1654)),
    "FedGRec-last": ((0.1376, 0.1332, 0.1246), (0.1712, 0.1605, 0.1493)),
    "FedGRec-concat": ((0.1266, 0.1267, 0.1254), (0.1502, 0.1515, 0.1494)),
}


def _fedgrec_t34(name: str, metric: str, col: int) -> Figure:
    ks = (1.0, 2.0, 3.0)
    paper = {
        (label, k): {metric: values[col][i]} for label, values in _FG_T34.items() for i, k in enumerate(ks)
    }
    return Figure(
        name=name,
        title=f"FedGRec Table {3 + col} on Gowalla: {metric} of the aggregation ablation against K",
        source="specs/fedgrec.md §5.7",
        dataset="ml-100k",
        data_note="ML-100K u1 (ratings ≥ 4, 943 users) stands in for Gowalla at the CPU budget; " + _FG_NOTE,
        kind="train",
        xlabel="K (latent embeddings)",
        arg="K",
        metrics=(metric,),
        series=(
            Series("FedGRec", "fedgrec:aggregation=mean", ks),
            Series("FedGRec-last", "fedgrec:aggregation=last", ks),
            Series("FedGRec-concat", "fedgrec:aggregation=concat,local_steps=1", ks),
        ),
        budgets={
            "cpu": Budget(
                ("epochs=50", "eval_every=50", "log_every=10", "eval_initial=false"),
                (2020,),
                "50 rounds of S = 400 on ML-100K (each user ≈ 21 times; the paper ≈ 1,340 on Gowalla), "
                "seed 2020, last round",
            ),
            "full": Budget(
                ("dataset=gowalla", "epochs=100000", "eval_every=1000", "log_every=100"),
                (2020,),
                "Gowalla, the paper's 10^5 rounds",
            ),
        },
        claims=(
            Claim("FedGRec > FedGRec-last at K = 2, 3", beats("FedGRec", "FedGRec-last", False, (2.0, 3.0))),
            Claim("FedGRec-last falls as K grows (share of steps)", trend("FedGRec-last", rising=False)),
            Claim("FedGRec > FedGRec-concat at every K", beats("FedGRec", "FedGRec-concat", lower=False)),
        ),
        paper=paper,
        base=(*_FG_BASE, "clients_per_round=400", "local_steps=10"),
    )


def _fedgrec_f2(dataset: str) -> Figure:
    labels = ("FedGRec-1", "FedGRec-2", "FedGRec-3")
    return Figure(
        name=f"fedgrec-f2-{dataset}",
        title=f"FedGRec Fig. 2 on {dataset}: Recall@20 / NDCG@20 against rounds, FedeRank vs FedGRec-K",
        source="specs/fedgrec.md §5.8",
        dataset=dataset,
        data_note=f"{dataset}: the LightGCN release's split; " + _FG_NOTE,
        kind="train",
        xlabel="round",
        arg="",
        metrics=("recall@20", "ndcg@20"),
        series=(
            Series("FedeRank", "federank"),
            *(Series(lab, f"fedgrec:K={lab[-1]}") for lab in labels),
        ),
        budgets={
            "cpu": Budget(
                ("epochs=100", "eval_every=25", "log_every=25", "clients_per_round=400", "local_steps=10"),
                (2020,),
                "100 rounds of S = 400 (the paper: 10^5), seed 2020",
            ),
            "full": _FG_FULL,
        },
        claims=(
            *(
                Claim(f"{lab} above FedeRank at the last round", _finals((lab, "FedeRank"), False))
                for lab in labels
            ),
            Claim("FedeRank rises faster early: above FedGRec-2 at the first evaluated round", _early()),
        ),
        base=_FG_BASE,
    )


def _early() -> Callable[[Results, str], float]:
    def measure(res: Results, metric: str) -> float:
        a, b = _at(res, "FedeRank", metric), dict(_at(res, "FedGRec-2", metric))
        first = [(x, v) for x, v in a if x > 0 and x in b]
        return float(first[0][1] > b[first[0][0]]) if first else math.nan

    return measure


def _fedgrec_f3() -> Figure:
    s_values, taus = (100, 200, 400, 800, 1600), (1, 2, 10, 20)
    return Figure(
        name="fedgrec-f3",
        title="FedGRec Fig. 3 on Gowalla, K = 2: users per round S and local steps τ",
        source="specs/fedgrec.md §5.8",
        dataset="gowalla",
        data_note="Gowalla: the LightGCN release's split; " + _FG_NOTE + "; S grid [D] of the spec",
        kind="train",
        xlabel="round",
        arg="",
        metrics=("recall@20", "ndcg@20"),
        series=(
            *(
                Series(f"S={s}", "fedgrec:K=2", args=(f"clients_per_round={s}", "local_steps=10"))
                for s in s_values
            ),
            *(
                Series(f"tau={t}", "fedgrec:K=2", args=("clients_per_round=400", f"local_steps={t}"))
                for t in taus
            ),
        ),
        budgets={
            "cpu": Budget(
                ("epochs=40", "eval_every=20", "log_every=20"), (2020,), "40 rounds (the paper: 10^5)"
            ),
            "full": _FG_FULL,
        },
        claims=(
            Claim("S = 400 best at the last round", _finals(("S=400", *(f"S={s}" for s in s_values)), False)),
            Claim(
                "larger S faster early (share of S steps up, first evaluated round)", _first_rises(s_values)
            ),
            Claim("τ = 10 or 20 above τ = 1 and 2 at the last round", _tau_claim()),
        ),
        base=_FG_BASE,
    )


def _first_rises(s_values: Sequence[int]) -> Callable[[Results, str], float]:
    def measure(res: Results, metric: str) -> float:
        first = [next((v for x, v in _at(res, f"S={s}", metric) if x > 0), math.nan) for s in s_values]
        steps = np.diff(np.array(first))
        return math.nan if np.isnan(steps).any() else float(np.mean(steps > 0))

    return measure


def _tau_claim() -> Callable[[Results, str], float]:
    def measure(res: Results, metric: str) -> float:
        fast = [_last(res, f"tau={t}", metric) for t in (10, 20)]
        slow = [_last(res, f"tau={t}", metric) for t in (1, 2)]
        return float(min(fast) > max(slow)) if not any(map(math.isnan, fast + slow)) else math.nan

    return measure


# P4GCN (spec p4gcn.md §7.8–7.9) on FilmTrust, plain backend.
_P4_CPU = ("--lr", "5e-3", "--epochs", "10", "--batch", "1024", "--patience", "3")
_P4_BUDGETS = {
    "cpu": Budget(
        _P4_CPU, (0, 1, 2), f"p4gcn_table {' '.join(_P4_CPU)} (Table 1: 20 epochs, batch 256), seeds 0–2"
    ),
    "full": Budget(
        ("--lr", "5e-3", "--patience", "10", "--epochs", "200", "--batch", "256"), (0, 1, 2), "200 epochs"
    ),
}
_P4_NOTE = "FilmTrust: seeded 80/10/10 split, trust graph symmetrised; P4GCN on the plain HE backend"


def _p4(
    name: str,
    title: str,
    source: str,
    axis: tuple[str, str],
    metrics: tuple[str, ...],
    series: tuple[Series, ...],
    claims: tuple[Claim, ...],
    xlog: bool = False,
) -> Figure:
    """A P4GCN figure on FilmTrust; ``axis``: (x label, the ``p4gcn_table`` argument of x)."""
    return Figure(
        name,
        title,
        source,
        "filmtrust",
        _P4_NOTE,
        "p4gcn",
        *axis,
        metrics,
        series,
        _P4_BUDGETS,
        claims,
        xlog=xlog,
    )


def _p4gcn_f4() -> Figure:
    eps = (1.0, 3.0, 5.0, 10.0, 15.0, 20.0)
    fu, nf, loc, ideal = "P4GCN (fusion)", "P4GCN w/o fusion", "LightGCN (no social data)", "P4GCN* (no DP)"
    return _p4(
        "p4gcn-f4",
        "P4GCN Fig. 4 on FilmTrust: RMSE / MAE against ε, with and without the fusion layer",
        "specs/p4gcn.md §7.8",
        ("ε", "--eps"),
        ("rmse", "mae"),
        (
            Series(fu, "p4gcn", eps),
            Series(nf, "p4gcn", eps, ("--no-fusion",)),
            Series(loc, "lightgcn"),
            Series(ideal, "p4gcn*"),
        ),
        (
            Claim("error falls as ε grows (share of steps, fusion)", trend(fu, rising=False)),
            Claim("fusion beats the no-social model at ε = 20", beats(fu, loc, True, (20.0,))),
            Claim("w/o fusion worse than fusion at the same ε (share of ε)", beats(fu, nf, lower=True)),
            Claim("w/o fusion hurts the local model at ε = 10", beats(loc, nf, True, (10.0,))),
        ),
    )


def _p4gcn_f5() -> Figure:
    betas = (0.01, 0.1, 1.0, 10.0, 100.0)
    dp, ideal = "P4GCN (DP)", "P4GCN* (no DP)"
    return _p4(
        "p4gcn-f5",
        "P4GCN Fig. 5 on FilmTrust: MAE against the social weight β (DP ε = 15 and ideal)",
        "specs/p4gcn.md §7.9",
        ("β", "--beta"),
        ("mae", "rmse"),
        (Series(dp, "p4gcn", betas), Series(ideal, "p4gcn*", betas)),
        (
            Claim("best β > the smallest (0.01), ideal", best_x_among(ideal, True, betas[1:])),
            Claim("best β > the smallest (0.01), DP", best_x_among(dp, True, betas[1:])),
            Claim("DP's best β at or left of the ideal's", _beta_left(dp, ideal)),
            Claim("the largest β (100) worse than the best, ideal", _not_best_at(ideal, betas[-1])),
        ),
        xlog=True,
    )


def _beta_left(dp: str, ideal: str) -> Callable[[Results, str], float]:
    def measure(res: Results, metric: str) -> float:
        a, b = _at(res, dp, metric), _at(res, ideal, metric)
        if not a or not b:
            return math.nan
        return float(min(a, key=lambda p: p[1])[0] <= min(b, key=lambda p: p[1])[0])

    return measure


def _not_best_at(label: str, x: float) -> Callable[[Results, str], float]:
    def measure(res: Results, metric: str) -> float:
        points = _at(res, label, metric)
        return float(min(points, key=lambda p: p[1])[0] != x) if points else math.nan

    return measure


# DGREC (spec dgrec.md §8.7–8.9) on Flixster (Monti), the committed budget of results/dgrec.
_DG_CPU = ("--epochs", "2", "--centres", "300", "--lr", "0.5")
_DG_NOTE = "Flixster (Monti's 3,000 × 3,000, fixed split) stands in for the paper's datasets"
_DG_FULL = Budget(("--epochs", "100", "--lr", "0.5"), (0, 1, 2, 3, 4), "100 epochs, every user a centre")
_DG_T3 = {  # Book-Crossing recall / ndcg (%), spec §8.8
    "DGREC": ("dgrec", 9.68, 5.13),
    "w/non-item graph": ("non-item-graph", 6.98, 3.83),
    "w/non-neighbor": ("non-neighbor", 6.77, 3.61),
    "w/non-item hypergraph": ("non-hypergraph", 9.20, 4.66),
    "w/non-attention": ("non-attention", 9.19, 4.78),
    "w/non-pearson": ("non-pearson", 9.41, 4.84),
    "w/non-sharing": ("non-sharing", 8.17, 4.11),
}


def chance(res: Results, metric: str) -> float:
    """Share of points above twice the random-ranking recall@20 (20 / items; Flixster 3,000)."""
    values = [v for series in res.values() for m in series.values() for k, v in m.items() if k == metric]
    return float(np.mean([v > 2 * 20 / 3000 for v in values])) if values else math.nan


_DG_CHANCE = Claim("runs above twice chance (share)", chance, metrics=("recall@20",))
_DG_CPU_BUDGET = Budget(
    _DG_CPU,
    (0,),
    "DGREC 2 epochs × 300 group centres; DMF / DLGNN (where shown) 6 epochs with every user a centre, "
    "lr 5 / 20 (dgrec-t2-flixster's budget); seed 0",
)


def _dgrec(name: str, title: str, source: str, series: tuple[Series, ...], **kw: Any) -> Figure:
    """A DGREC figure on Flixster: recall@20 / ndcg@20, runs of :mod:`~.dgrec` (``kw``: the rest)."""
    kw.setdefault("budgets", {"cpu": _DG_CPU_BUDGET, "full": _DG_FULL})
    kw.setdefault("data_note", _DG_NOTE)
    kw.setdefault("xlabel", "public ratio")
    kw.setdefault("arg", "--public-ratio")
    kw["claims"] = (*kw.get("claims", ()), _DG_CHANCE)
    return Figure(
        name, title, source, "flixster", kind="dgrec", metrics=("recall@20", "ndcg@20"), series=series, **kw
    )


def _dgrec_beats_all() -> Callable[[Results, str], float]:
    def measure(res: Results, metric: str) -> float:
        ours = _last(res, "DGREC", metric)
        others = [_last(res, lab, metric) for lab in _DG_T3 if lab != "DGREC"]
        return float(np.mean([ours > o for o in others if not math.isnan(o)]))

    return measure


def _dgrec_figures() -> list[Figure]:
    paper = {(label, 1.0): {"recall@20": v[1] / 100, "ndcg@20": v[2] / 100} for label, v in _DG_T3.items()}
    ratios = (0.2, 0.4, 0.6, 0.8, 1.0)
    sharing = ("--epochs", "1", "--centres", "100", "--lr", "0.5")
    return [
        _dgrec(
            "dgrec-t3",
            "DGREC Table 3: ablations, recall@20 / ndcg@20 (paper: Book-Crossing; ours: Flixster)",
            "specs/dgrec.md §8.8",
            tuple(Series(label, v[0], (1.0,)) for label, v in _DG_T3.items()),
            data_note=_DG_NOTE + " (the paper's Table 3 is on Book-Crossing and Weeplaces, unavailable here)",
            claims=(Claim("DGREC beats every ablation (share)", _dgrec_beats_all()),),
            paper=paper,
            flat=True,
        ),
        _dgrec(
            "dgrec-f2",
            "DGREC Fig. 2: recall@20 / ndcg@20 against the public interaction ratio",
            "specs/dgrec.md §8.7",
            (
                Series("DGREC", "dgrec", ratios),
                Series("DMF", "dmf", (1.0,), DGREC_ROW_ARGS["DMF"]),  # Table 2's budget for 1-hop groups
                Series("DLGNN", "dlgnn", (1.0,), DGREC_ROW_ARGS["DLGNN"]),
            ),
            claims=(
                Claim("DGREC above DMF at ratio 1", beats("DGREC", "DMF", False, (1.0,))),
                Claim("DGREC above DLGNN at ratio 1", beats("DGREC", "DLGNN", False, (1.0,))),
            ),
            flat=True,
        ),
        _dgrec(
            "dgrec-f3",
            "DGREC Fig. 3 (secure-sharing panel): recall@20 / ndcg@20 against δ (β = 1) and β (δ = 0.1)",
            "specs/dgrec.md §8.9",
            (
                Series("delta", "dgrec", (0.01, 0.05, 0.1, 0.2), ("--beta", "1.0"), "--delta"),
                Series("beta", "dgrec", (0.5, 1.0, 2.0, 3.0), ("--delta", "0.1"), "--beta"),
            ),
            data_note=_DG_NOTE + " (the paper's Fig. 3 is on Book-Crossing and Weeplaces)",
            xlabel="δ (β = 1) / β (δ = 0.1)",
            arg="",
            budgets={"cpu": Budget(sharing, (0,), "1 epoch × 100 group centres, seed 0"), "full": _DG_FULL},
            claims=(
                Claim("rises with δ (share of steps)", trend("delta", rising=True)),
                Claim("rises with β (share of steps)", trend("beta", rising=True)),
            ),
        ),
    ]


FIGURES: dict[str, Figure] = {
    f.name: f
    for f in (
        _f10(),
        _f11(),
        _fedgrec_t34("fedgrec-t3", "ndcg@20", 0),
        _fedgrec_t34("fedgrec-t4", "recall@20", 1),
        _fedgrec_f2("gowalla"),
        _fedgrec_f2("yelp2018"),
        _fedgrec_f3(),
        _p4gcn_f4(),
        _p4gcn_f5(),
        *_dgrec_figures(),
    )
}


# ---------------------------------------------------------------------------------------------
# Running and reporting.


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.=+-]+", "_", text).strip("_") or "series"


def _values_train(folder: Path, metrics: Sequence[str], curve: bool) -> dict[float, dict[str, float]]:
    """Test metrics of one trainer run: the summary's (a sweep point) or every epoch's (a curve)."""
    if not curve:
        test = json.loads((folder / "summary.json").read_text())["test"]
        return {math.nan: {m: float(test[m]) for m in metrics if m in test}}
    return _read_curve(folder / "metrics.jsonl", metrics)


def _read_curve(path: Path, metrics: Sequence[str]) -> dict[float, dict[str, float]]:
    points: dict[float, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        test = rec.get("test") or {}
        vals = {m: float(test.get(m, rec.get(m))) for m in metrics if test.get(m, rec.get(m)) is not None}
        if test and vals:
            points[float(rec["epoch"])] = vals
    return points


def _reused_curves(fig: Figure, files: Sequence[Path]) -> Results:
    """Curves from files: ``metrics.jsonl`` per series in order, or FedGRec comparison JSONs."""
    res: Results = {}
    for s, path in zip(fig.series, files, strict=False):
        if path.suffix == ".jsonl":
            res[s.label] = _read_curve(path, fig.metrics)
    for path in (p for p in files if p.suffix == ".json"):
        ours = json.loads(path.read_text()).get("ours", {})
        for s in fig.series:
            if s.label in ours:
                res[s.label] = {
                    float(r[0]): dict(zip(("recall@20", "ndcg@20"), map(float, r[1:3]), strict=True))
                    for r in ours[s.label]["curve"]
                }
    missing = [s.label for s in fig.series if s.label not in res]
    if missing:
        raise FileNotFoundError(f"{fig.name}: no curve of {missing} in {', '.join(map(str, files))}")
    return res


def _point(
    fig: Figure, s: Series, x: float | None, seed: int, plan: Budget, roots: list[Path], reuse: bool
) -> dict[float, dict[str, float]]:
    """Run (or find) one point of ``s`` and return its values (x → metric → value)."""
    from fedgraphrec.experiments.reproduce_runs import run_file, train_runner

    arg = s.arg or fig.arg
    sub = Path(_slug(s.label)) / (f"{_slug(arg)}{_fmt(x)}" if x is not None else "ref")
    if fig.kind == "train":
        sub = sub.with_name(f"{sub.name}-s{seed}")
        found = next((r / sub for r in roots if (r / sub / "summary.json").exists()), None)
        if found is None:
            if reuse:
                raise FileNotFoundError(f"no run of {s.label} in {', '.join(map(str, roots))} ({sub})")
            found = roots[0] / sub
            _train_config(fig, s, x, seed, plan, found)
        values = _values_train(found, fig.metrics, curve=x is None)
        return values if x is None else {x: values[math.nan]}
    ratio = x if x is not None and arg == "--public-ratio" else 1.0
    name = run_file(fig.kind, fig.dataset, s.method, seed, ratio)
    candidates = [r / sub / name for r in roots] + ([r / name for r in roots] if fig.flat else [])
    path = next((p for p in candidates if p.exists()), None)
    if path is None:
        if reuse:
            raise FileNotFoundError(f"no run of {s.label} (seed {seed}) in {', '.join(map(str, roots))}")
        extra = (arg, _fmt(x)) if x is not None else ()
        train_runner(
            fig.kind, fig.dataset, s.method, seed, (*plan.overrides, *s.args, *extra), roots[0] / sub
        )
        path = roots[0] / sub / name
    run = json.loads(path.read_text())
    if fig.kind == "p4gcn":
        vals = {"rmse": float(run["test_rmse"]), "mae": float(run["test_mae"])}
    else:
        vals = {k: float(v) for k, v in run["metrics"].items()}
    return {x if x is not None else math.nan: vals}


def train_overrides(
    fig: Figure, s: Series, x: float | None, seed: int, plan: Budget
) -> tuple[str, list[str]]:
    """(protocol, config overrides) of one trainer point: dataset, base, budget, series, x, seed."""
    from fedgraphrec.experiments.compare import parse_method

    spec = parse_method(s.method)
    point = [f"{s.arg or fig.arg}={_fmt(x)}"] if x is not None else []
    over = [f"dataset={fig.dataset}", *fig.base, *plan.overrides, *spec.overrides, *s.args, *point]
    return spec.protocol, [*over, f"seed={seed}"]


def _train_config(fig: Figure, s: Series, x: float | None, seed: int, plan: Budget, folder: Path) -> None:
    from fedgraphrec.experiments.config import load_config
    from fedgraphrec.experiments.train import Trainer

    protocol, over = train_overrides(fig, s, x, seed, plan)
    Trainer(load_config(None, over, protocol=protocol), folder).fit()


def reproduce_figure(
    name: str, out_dir: str | Path, *, budget: str = "cpu", reuse: Sequence[str | Path] = ()
) -> dict[str, Any]:
    """Run (or, with ``reuse``, collect) figure ``name`` and write the report and ``figure.png``.

    Raises:
        KeyError: unknown figure or budget.
        FileNotFoundError: ``reuse`` lacks a run of a series.
    """
    if name not in FIGURES:
        raise KeyError(f"unknown table {name!r}; available: {', '.join(FIGURES)}")
    fig = FIGURES[name]
    if budget not in fig.budgets:
        raise KeyError(f"table {name} has budgets {', '.join(fig.budgets)}, not {budget!r}")
    plan, out = fig.budgets[budget], Path(out_dir)
    paths = [Path(p) for p in reuse]
    files = [p for p in paths if p.is_file()]
    roots = [p for p in paths if not p.is_file()] or [out / "runs"]
    per_seed: dict[str, dict[float, list[dict[str, float]]]] = {}
    if files:
        res = _reused_curves(fig, files)
        per_seed = {lab: {x: [v] for x, v in pts.items()} for lab, pts in res.items()}
    else:
        for s in fig.series:
            for seed in plan.seeds:
                for x in s.xs or (None,):
                    for px, vals in _point(fig, s, x, seed, plan, roots, bool(reuse)).items():
                        per_seed.setdefault(s.label, {}).setdefault(px, []).append(vals)
    res, std = _mean_std(per_seed)
    rows = []
    for (label, x), paper in fig.paper.items():
        mean_std = {m: (res[label][x].get(m, math.nan), std[label][x].get(m, 0.0)) for m in paper}
        row = PaperRow(f"{label} @ {fig.xlabel} = {_fmt(x)}", label, paper)
        rows.append({"row": row.label, "method": label, "cells": paper_cells(row, mean_std)})
    for claim in fig.claims:
        for metric in claim.metrics or fig.metrics:
            row = PaperRow(f"{claim.text} ({metric})", "claim", {"claim": claim.paper})
            value = claim.measure(res, metric)
            rows.append(
                {"row": row.label, "method": "claim", "cells": paper_cells(row, {"claim": (value, 0.0)})}
            )
    report = {
        "table": fig.name,
        "title": fig.title,
        "source": fig.source,
        "data": fig.data_note,
        "budget": budget,
        "budget_note": _note(fig, plan, paths, res if files else None),
        "seeds": list(plan.seeds),
        "overrides": [],
        "rows": rows,
        "points": {lab: {_fmt(x): v for x, v in pts.items()} for lab, pts in res.items()},
        "points_std": {lab: {_fmt(x): v for x, v in pts.items()} for lab, pts in std.items()},
    }
    write_report(report, out)
    _points_md(fig, res, std, out / "reproduce.md")
    _curves(fig, res, out / "figure.png")
    return report


def _note(fig: Figure, plan: Budget, paths: Sequence[Path], curves: Results | None) -> str:
    """The budget note; read curves were made elsewhere, so their note says how far they go."""
    where = ", ".join(map(str, paths))
    if curves is not None:
        last = max(x for pts in curves.values() for x in pts)
        return f"curves read from {where} (up to {fig.xlabel} {_fmt(last)}), not run at this budget"
    return plan.note + (f" (runs from {where})" if paths else "")


def _mean_std(per_seed: dict[str, dict[float, list[dict[str, float]]]]) -> tuple[Results, Results]:
    mean: Results = {}
    std: Results = {}
    for label, pts in per_seed.items():
        for x, runs in pts.items():
            metrics = sorted({m for r in runs for m in r})
            vals = {m: np.array([r.get(m, math.nan) for r in runs]) for m in metrics}
            mean.setdefault(label, {})[x] = {m: float(v.mean()) for m, v in vals.items()}
            std.setdefault(label, {})[x] = {
                m: float(v.std(ddof=1)) if len(v) > 1 else 0.0 for m, v in vals.items()
            }
    return mean, std


def _points_md(fig: Figure, res: Results, std: Results, path: Path) -> None:
    """Append our points (mean ± std over seeds; a reference has x = –) to the report's markdown."""
    lines = ["", f"Ours, per point (`figure.png`; x = {fig.xlabel}):", ""]
    lines += [f"| series | x | {' | '.join(fig.metrics)} |", "|---|---|" + "---|" * len(fig.metrics)]
    for label, pts in res.items():
        step = max(1, len(pts) // 12)  # long curves: about a dozen rows
        keys = sorted(pts)
        for x in keys[::step] + ([keys[-1]] if (len(keys) - 1) % step else []):
            cells = [
                f"{pts[x][m]:.4f} ± {std[label][x].get(m, 0.0):.4f}" if m in pts[x] else "–"
                for m in fig.metrics
            ]
            lines.append(f"| {label} | {'–' if math.isnan(x) else _fmt(x)} | {' | '.join(cells)} |")
    with path.open("a") as f:
        f.write("\n".join(lines) + "\n")


def _curves(fig: Figure, res: Results, path: Path) -> None:
    """One panel per metric: a line per swept series or curve, a dashed line per reference."""
    panels, axes = plt.subplots(1, len(fig.metrics), figsize=(4.5 * len(fig.metrics), 3.6))
    for ax, metric in zip(np.atleast_1d(axes), fig.metrics, strict=True):
        for i, s in enumerate(fig.series):
            points = [(x, v) for x, v in _at(res, s.label, metric) if not math.isnan(x)]
            ref = [
                v
                for x, m in res.get(s.label, {}).items()
                if math.isnan(x)
                for k, v in m.items()
                if k == metric
            ]
            if points:
                xs, ys = zip(*points, strict=True)
                style = ("-", "--", ":", "-.")[i % 4]  # curves that coincide stay visible
                ax.plot(xs, ys, style, marker="o" if len(xs) < 30 else None, label=s.label, color=f"C{i}")
            for v in ref:
                ax.axhline(v, linestyle="--", label=s.label, color=f"C{i}")
        if fig.xlog:
            ax.set_xscale("log")
        ax.set_xlabel(fig.xlabel)
        ax.set_ylabel(metric)
        ax.legend(fontsize=7)
    panels.suptitle(f"{fig.title} (ours)", fontsize=9)
    panels.tight_layout()
    panels.savefig(path, dpi=120)
    plt.close(panels)
