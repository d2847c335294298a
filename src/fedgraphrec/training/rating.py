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
from typing import Any, Protocol

from fedgraphrec.data.types import Ratings
from fedgraphrec.protocols.p4gcn.settings import P4GCNSettings
from fedgraphrec.runtime.ledger import Ledger
from fedgraphrec.training.learner_base import BatchStats
from fedgraphrec.training.p4gcn_learner import make_rating_learner

__all__ = ["RatingLearnerLike", "fit_rating", "run_learner", "run_method", "train_rating", "write_rating_run"]


def fit_rating(learner: RatingLearnerLike, epochs: int, patience: int) -> dict[str, Any]:
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


class RatingLearnerLike(Protocol):
    """What :func:`fit_rating` drives: one epoch per round, RMSE/MAE per split, a run summary."""

    def train_round(self, epoch: int) -> BatchStats:
        """One epoch."""
        ...

    def evaluate_splits(self, splits: list[str], ks: list[int] | None = None) -> dict[str, dict[str, float]]:
        """RMSE and MAE per split."""
        ...

    def run_summary(self) -> dict[str, Any]:
        """What the run adds to its record (privacy, backend, traffic)."""
        ...


def run_learner(learner: RatingLearnerLike, s: P4GCNSettings) -> dict[str, Any]:
    """:func:`fit_rating` with ``s``'s epochs and patience, plus the learner's summary and the time."""
    t0 = time.perf_counter()
    res = fit_rating(learner, s.epochs, s.patience)
    extra = learner.run_summary()
    if extra.get("privacy"):
        res.update(extra)
        res["epsilon_spent"] = extra["privacy"]["epsilon_spent"] or 0.0
    res["seconds"] = time.perf_counter() - t0
    return res


def run_method(method: str, data: Ratings, seed: int, s: P4GCNSettings) -> dict[str, Any]:
    """Train one method with one seed; returns best-validation test metrics and the curve."""
    s = dataclasses.replace(s, method=method)
    t0 = time.perf_counter()
    res = run_learner(make_rating_learner(s, data, seed=seed), s)
    res["seconds"] = time.perf_counter() - t0
    return res


def train_rating(data: Ratings, seed: int, s: P4GCNSettings, run_dir: str | Path) -> dict[str, Any]:
    """One method and seed on ``data``, written as a standard run folder; returns ``summary.json``'s dict."""
    t0 = time.perf_counter()
    learner = make_rating_learner(s, data, seed=seed)
    res = run_learner(learner, s)
    res["seconds"] = time.perf_counter() - t0
    return write_rating_run(data.name, seed, s, res, run_dir, learner.ledger)


def write_rating_run(
    dataset: str,
    seed: int,
    s: P4GCNSettings,
    res: dict[str, Any],
    run_dir: str | Path,
    ledger: Ledger | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The standard run folder of a rating run (config, metrics, summary, curves, ledger); the summary."""
    from fedgraphrec.training.rundir import write_run

    records = [
        {"epoch": r["epoch"], "loss": r["loss"], "valid": {"rmse": r["val_rmse"], "mae": r["val_mae"]}}
        for r in res["curve"]
    ]
    summary: dict[str, Any] = {
        "protocol": "p4gcn",
        "method": s.method,
        "dataset": dataset,
        "seed": seed,
        "selection": "best validation RMSE",
        "selected_epoch": res.get("epoch"),
        "test": {"rmse": res.get("test_rmse"), "mae": res.get("test_mae")},
        "valid": {"rmse": res.get("val_rmse")},
        "train_seconds": res["seconds"],
        **{k: res[k] for k in ("privacy", "backend", "cipher_GB", "releases_K") if k in res},
        **(extra or {}),
    }
    config = {"protocol": "p4gcn", "dataset": dataset, "seed": seed, **dataclasses.asdict(s)}
    folder = write_run(run_dir, config, records, summary, f"{s.method} on {dataset}")
    if ledger is not None:
        ledger.save(folder)
    return summary
