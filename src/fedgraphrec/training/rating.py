"""Rating training (P4GCN and its Table 1/2 baselines): one method, one seed, RMSE/MAE on the test split.

Methods (spec §7.5, all with the shared decoder ``σ`` over the dataset's rating range, A5) and every
setting are fields of :class:`~fedgraphrec.protocols.p4gcn.settings.P4GCNSettings`; the learners are
in :mod:`fedgraphrec.training.p4gcn_learner`. ``backend = "ckks-packed"`` runs the P4GCN methods on
real packed CKKS instead of the float64 simulation (``paillier``/``ckks`` also exist but are far too
slow for whole epochs).

Model selection: the epoch with the best validation RMSE, with early stopping after ``patience``
epochs without improvement; P4GCN's ``K`` and noise are calibrated to the full planned schedule of
``epochs``, so stopping early only spends less budget.

One run with a run folder: ``fedgraphrec train p4gcn --dataset filmtrust --set method=p4gcn``; the
paper tables: ``fedgraphrec reproduce p4gcn-t1-filmtrust``.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from fedgraphrec.data.types import Ratings
from fedgraphrec.protocols.p4gcn.settings import P4GCNSettings
from fedgraphrec.training.p4gcn_learner import P4GCNLearner, RatingLearner, make_rating_learner

__all__ = ["fit_rating", "run_method", "train_rating"]


def fit_rating(learner: P4GCNLearner | RatingLearner, epochs: int, patience: int) -> dict[str, Any]:
    """Train epoch by epoch; keep the test metrics of the best validation RMSE; stop after ``patience``."""
    best: dict[str, Any] = {"val_rmse": float("inf")}
    curve = []
    bad = 0
    for e in range(epochs):
        loss = learner.train_round(e).loss
        valid = learner.evaluate_splits(["valid"])["valid"]
        curve.append({"epoch": e + 1, "loss": loss, "val_rmse": valid["rmse"], "val_mae": valid["mae"]})
        if valid["rmse"] < best["val_rmse"]:
            test = learner.evaluate_splits(["test"])["test"]
            best = {
                "val_rmse": valid["rmse"],
                "test_rmse": test["rmse"],
                "test_mae": test["mae"],
                "epoch": e + 1,
            }
            bad = 0
        else:
            bad += 1
            if bad >= patience:
                break
    return {**best, "curve": curve}


def run_method(method: str, data: Ratings, seed: int, s: P4GCNSettings) -> dict[str, Any]:
    """Train one method with one seed; returns best-validation test metrics and the curve."""
    s = dataclasses.replace(s, method=method)
    t0 = time.perf_counter()
    learner = make_rating_learner(s, data, seed=seed)
    res = fit_rating(learner, s.epochs, s.patience)
    extra = learner.run_summary()
    if extra:
        res.update(extra)
        res["epsilon_spent"] = extra["privacy"]["epsilon_spent"] or 0.0
    res["seconds"] = time.perf_counter() - t0
    return res


def train_rating(data: Ratings, seed: int, s: P4GCNSettings, run_dir: str | Path) -> dict[str, Any]:
    """One method and seed on ``data``, written as a standard run folder; returns ``summary.json``'s dict."""
    from fedgraphrec.training.rundir import write_run

    res = run_method(s.method, data, seed, s)
    records = [
        {"epoch": r["epoch"], "loss": r["loss"], "valid": {"rmse": r["val_rmse"], "mae": r["val_mae"]}}
        for r in res["curve"]
    ]
    summary: dict[str, Any] = {
        "protocol": "p4gcn",
        "method": s.method,
        "dataset": data.name,
        "seed": seed,
        "selection": "best validation RMSE",
        "selected_epoch": res.get("epoch"),
        "test": {"rmse": res.get("test_rmse"), "mae": res.get("test_mae")},
        "valid": {"rmse": res.get("val_rmse")},
        "train_seconds": res["seconds"],
        **{k: res[k] for k in ("privacy", "backend", "cipher_GB", "releases_K") if k in res},
    }
    config = {"protocol": "p4gcn", "dataset": data.name, "seed": seed, **dataclasses.asdict(s)}
    write_run(run_dir, config, records, summary, f"{s.method} on {data.name}")
    return summary
