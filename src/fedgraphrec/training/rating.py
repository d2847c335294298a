"""Rating runs (P4GCN and its Table 1/2 baselines) through the one :class:`~.trainer.Trainer`.

Methods (spec §7.5, all with the shared decoder ``σ`` over the dataset's rating range, A5) and every
setting are fields of :class:`~fedgraphrec.protocols.p4gcn.settings.P4GCNSettings`; the learners are
in :mod:`fedgraphrec.training.p4gcn_learner`. ``backend = "ckks-packed"`` runs the P4GCN methods on
real packed CKKS instead of the float64 simulation (``paillier``/``ckks`` also exist but are far too
slow for whole epochs).

Model selection is the Trainer's: the epoch with the best validation RMSE, with early stopping after
``patience`` evaluations without improvement; P4GCN's ``K`` and noise are calibrated to the full
planned schedule of ``epochs``, so stopping early only spends less budget.

One run with a run folder: ``fedgraphrec train p4gcn --dataset filmtrust --set method=p4gcn``; the
paper tables: ``fedgraphrec reproduce p4gcn-t1-filmtrust``. :func:`train_rating` and
:func:`run_method` are the same run for code that holds a settings object (the table runner, the
Flower engine's coordinator).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from fedgraphrec.data.types import Interactions, Ratings
from fedgraphrec.protocols.p4gcn.settings import P4GCNSettings
from fedgraphrec.training.config import EvalSettings, TrainConfig
from fedgraphrec.training.learner_base import AnyLearner
from fedgraphrec.training.trainer import Trainer, fit_in_scratch

__all__ = ["NamedDataset", "rating_config", "run_method", "train_rating"]

LearnerFactory = Callable[[TrainConfig, Any], AnyLearner]


@dataclass(frozen=True)
class NamedDataset:
    """What a coordinator knows of the dataset it trains on: its name (the organisations hold the data)."""

    name: str

    def stats(self) -> dict[str, int]:
        """Nothing: the coordinator holds no data."""
        return {}


def rating_config(
    s: P4GCNSettings, dataset: str, seed: int, crypto: str = "accounted", checkpoint_every: int = 1
) -> TrainConfig:
    """The run configuration of settings ``s`` (its planned ``epochs`` and ``patience`` are the run's)."""
    return TrainConfig(
        protocol="p4gcn", dataset=dataset, seed=seed, epochs=s.epochs, crypto=crypto,
        reproducible=s.reproducible, checkpoint_every=checkpoint_every,
        eval=EvalSettings(metric="rmse", patience=s.patience), settings=s,
    )  # fmt: skip


def train_rating(
    data: Ratings | NamedDataset,
    seed: int,
    s: P4GCNSettings,
    run_dir: str | Path,
    learner: LearnerFactory | None = None,
    crypto: str = "accounted",
    checkpoint_every: int = 1,
) -> dict[str, Any]:
    """One method and seed written as a standard run folder by the Trainer; ``summary.json``'s dict.

    ``learner``: build the learner with this (the Flower coordinator) instead of ``make_learner``.
    """
    cfg = rating_config(s, data.name, seed, crypto, checkpoint_every)
    trainer = Trainer(cfg, run_dir, progress=False, data=cast(Interactions, data), learner=learner)
    return trainer.fit().summary


def run_method(method: str, data: Ratings, seed: int, s: P4GCNSettings) -> dict[str, Any]:
    """Train one method with one seed in a scratch run folder; the table runner's record.

    The record: the selected epoch's validation RMSE and test RMSE/MAE, the per-epoch curve, the
    seconds, and (P4GCN) the privacy report and ciphertext traffic.
    """
    s = dataclasses.replace(s, method=method)
    t0 = time.perf_counter()
    cfg = rating_config(s, data.name, seed, checkpoint_every=0)
    result, _ = fit_in_scratch(cfg, cast(Interactions, data))
    summary = result.summary
    res: dict[str, Any] = {
        "val_rmse": summary["valid"].get("rmse"),
        "test_rmse": summary["test"].get("rmse"),
        "test_mae": summary["test"].get("mae"),
        "epoch": summary["selected_epoch"],
        "curve": [
            {
                "epoch": r["epoch"],
                "loss": r["loss"],
                "val_rmse": r["valid"]["rmse"],
                "val_mae": r["valid"]["mae"],
            }
            for r in result.history
            if "valid" in r
        ],
    }
    if summary.get("privacy"):
        res.update({k: summary[k] for k in ("privacy", "backend", "cipher_GB", "releases_K") if k in summary})
        res["epsilon_spent"] = summary["privacy"]["epsilon_spent"] or 0.0
    res["seconds"] = time.perf_counter() - t0
    return res
