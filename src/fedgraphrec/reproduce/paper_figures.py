"""The paper figures and grid tables ``fedgraphrec reproduce`` can run (:data:`FIGURES`).

LP-GCN Fig. 10–11 and FedGRec Tables 3–4 and Fig. 2–3 here; P4GCN Fig. 4–5 and DGREC Table 3 and
Fig. 2–3 in :mod:`~fedgraphrec.reproduce.paper_figures_social`. Each
with its paper claims, its dataset copy and its ``cpu`` / ``full`` budgets (spec sections in each
figure's ``source``). Running and reporting: :mod:`~fedgraphrec.reproduce.figures`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import matplotlib

matplotlib.use("Agg")
import numpy as np

from fedgraphrec.reproduce.claims import (
    Claim,
    Figure,
    Results,
    Series,
    beats,
    finals,
    last_value,
    overlap,
    series_points,
    trend,
)
from fedgraphrec.reproduce.paper_figures_social import dgrec_figures, p4gcn_f4, p4gcn_f5
from fedgraphrec.reproduce.papers import paper
from fedgraphrec.reproduce.tables import TABLES, budget_of, budgets_of

__all__ = ["FIGURES"]

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
        budgets=budgets_of(paper("lpgcn").section("f10").section("budgets")),
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
        values = [v for _, v in series_points(res, label, metric)]
        return float(max(values) <= 1e-5) if values else math.nan

    return measure


def _final_equal(a: str, b: str, tol: float = 5e-5) -> Callable[[Results, str], float]:
    def measure(res: Results, metric: str) -> float:
        va, vb = last_value(res, a, metric), last_value(res, b, metric)
        return math.nan if math.isnan(va) or math.isnan(vb) else float(abs(va - vb) <= tol)

    return measure


def _f11() -> Figure:
    data = paper("lpgcn").section("f11")
    layers = data.numbers("layers")
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
        budgets=budgets_of(data.section("budgets")),
        claims=(
            Claim("LP-GCN(LightGCN+) > LightGCN at every L (share of L)", beats(lp, lg, lower=False)),
            Claim("LP-GCN(LightGCN+) > P-GCN at every L (share of L)", beats(lp, pg, lower=False)),
        ),
        base=(*_ML100K, "ks=[20]", "metric=recall@20"),
    )


_FG = paper("fedgrec")
_FG_BASE = _FG.section("figures").texts("base")
_FG_NOTE = "FedGRec's configuration (spec fedgrec.md §5.4: d = 64, S = 400, τ = 10, 2,048 negatives)"
_FG_FULL = budget_of(_FG.section("figures").section("full"))


def _fedgrec_t34(name: str, metric: str, col: int) -> Figure:
    data = _FG.section("t34")
    ks, numbers = data.numbers("ks"), data.section("paper")
    printed = {
        (label, k): {metric: numbers.section(label).numbers(metric)[i]}
        for label in numbers.names()
        for i, k in enumerate(ks)
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
        budgets=budgets_of(data.section("budgets")),
        claims=(
            Claim("FedGRec > FedGRec-last at K = 2, 3", beats("FedGRec", "FedGRec-last", False, (2.0, 3.0))),
            Claim("FedGRec-last falls as K grows (share of steps)", trend("FedGRec-last", rising=False)),
            Claim("FedGRec > FedGRec-concat at every K", beats("FedGRec", "FedGRec-concat", lower=False)),
        ),
        paper=printed,
        base=(*_FG_BASE, *data.texts("base")),
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
        budgets={**budgets_of(_FG.section("f2").section("budgets")), "full": _FG_FULL},
        claims=(
            *(
                Claim(f"{lab} above FedeRank at the last round", finals((lab, "FedeRank"), False))
                for lab in labels
            ),
            Claim("FedeRank rises faster early: above FedGRec-2 at the first evaluated round", _early()),
        ),
        base=_FG_BASE,
    )


def _early() -> Callable[[Results, str], float]:
    def measure(res: Results, metric: str) -> float:
        a, b = series_points(res, "FedeRank", metric), dict(series_points(res, "FedGRec-2", metric))
        first = [(x, v) for x, v in a if x > 0 and x in b]
        return float(first[0][1] > b[first[0][0]]) if first else math.nan

    return measure


def _fedgrec_f3() -> Figure:
    data = _FG.section("f3")
    s_values, taus = data.integers("users_per_round"), data.integers("local_steps")
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
        budgets={**budgets_of(data.section("budgets")), "full": _FG_FULL},
        claims=(
            Claim("S = 400 best at the last round", finals(("S=400", *(f"S={s}" for s in s_values)), False)),
            Claim(
                "larger S faster early (share of S steps up, first evaluated round)", _first_rises(s_values)
            ),
            Claim("τ = 10 or 20 above τ = 1 and 2 at the last round", _tau_claim()),
        ),
        base=_FG_BASE,
    )


def _first_rises(s_values: Sequence[int]) -> Callable[[Results, str], float]:
    def measure(res: Results, metric: str) -> float:
        first = [
            next((v for x, v in series_points(res, f"S={s}", metric) if x > 0), math.nan) for s in s_values
        ]
        steps = np.diff(np.array(first))
        return math.nan if np.isnan(steps).any() else float(np.mean(steps > 0))

    return measure


def _tau_claim() -> Callable[[Results, str], float]:
    def measure(res: Results, metric: str) -> float:
        fast = [last_value(res, f"tau={t}", metric) for t in (10, 20)]
        slow = [last_value(res, f"tau={t}", metric) for t in (1, 2)]
        return float(min(fast) > max(slow)) if not any(map(math.isnan, fast + slow)) else math.nan

    return measure


# P4GCN (spec p4gcn.md §7.8–7.9) on FilmTrust, plain backend.
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
        p4gcn_f4(),
        p4gcn_f5(),
        *dgrec_figures(),
    )
}
