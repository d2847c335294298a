"""The Trainer drives an epoch-level learner that evaluates itself with a rating error.

A learner with ``train_round`` and ``evaluate_splits`` (P4GCN's and DGREC's learners) needs no BPR
triples and no ``Interactions``; its ``rmse`` is lower-is-better, so the summary selects the epoch of
the lowest validation error and early stopping counts evaluations that did not lower it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from fedgraphrec.evaluation.rating import LOWER_IS_BETTER, better, worst
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.learner_base import BatchStats
from fedgraphrec.training.trainer import Trainer

VALID_RMSE = [1.0, 0.9, 0.8, 0.85, 0.9, 0.95, 1.0, 1.1]
"""Falls until epoch 3, then rises."""


class _Ratings:
    """Not ``Interactions``: no ``train`` matrix a BPR sampler could draw from."""

    name = "fake-ratings"
    valid = "present"

    def stats(self) -> dict[str, int]:
        return {"users": 3, "items": 4}


class _RatingLearner:
    """One epoch per ``train_round``; reports a scripted RMSE/MAE per split."""

    ledger = None

    def __init__(self, cfg: TrainConfig, data: Any) -> None:
        self.epochs = 0
        self.asked: list[tuple[list[str], list[int]]] = []

    def train_round(self, epoch: int) -> BatchStats:
        self.epochs += 1
        return BatchStats(loss=1.0 / self.epochs, bpr=0.0, reg=0.0)

    def evaluate_splits(self, splits: list[str], ks: list[int]) -> dict[str, dict[str, float]]:
        self.asked.append((splits, ks))
        valid = VALID_RMSE[self.epochs - 1]
        return {
            "valid": {"rmse": valid, "mae": valid / 2},
            "test": {"rmse": valid + 0.01, "mae": valid / 2 + 0.01},
        }

    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        raise AssertionError("a learner with evaluate_splits is not asked for embeddings")

    def train_batch(self, *args: Any) -> BatchStats:
        raise AssertionError("a learner with train_round gets no minibatches")

    def state_dict(self) -> dict[str, Any]:
        return {"epochs": self.epochs}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epochs = int(state["epochs"])

    def pop_deviation(self) -> float | None:
        return None


@pytest.fixture
def rating_config():
    """A rating protocol's config: it selects on ``rmse`` (the fake learner stands in for P4GCN's)."""

    def make(**changes: Any) -> TrainConfig:
        cfg = TrainConfig(protocol="p4gcn", dataset="synthetic", epochs=len(VALID_RMSE), checkpoint_every=0)
        assert cfg.eval.metric == "rmse"  # a rating protocol's default
        return dataclasses.replace(cfg, eval=dataclasses.replace(cfg.eval, ks=[10], **changes))

    return make


def test_the_direction_of_each_metric() -> None:
    assert {"rmse", "mae"} == LOWER_IS_BETTER
    assert better("rmse", 0.8, 0.9) and not better("rmse", 0.9, 0.8)
    assert better("recall@20", 0.9, 0.8) and not better("recall@20", 0.8, 0.9)
    assert worst("mae") == float("inf") and worst("ndcg@10") == float("-inf")


def test_selection_picks_the_lowest_rmse_epoch(tmp_path, rating_config) -> None:
    trainer = Trainer(
        rating_config(), tmp_path / "run", progress=False, data=_Ratings(), learner=_RatingLearner
    )
    result = trainer.fit()
    assert trainer._sampler is None  # no BPR triples were ever drawn
    assert result.summary["epochs_run"] == len(VALID_RMSE) and not result.summary["stopped_early"]
    assert result.summary["selected_epoch"] == 3
    assert result.summary["valid"]["rmse"] == 0.8
    assert result.summary["last_epoch_test"]["rmse"] == pytest.approx(1.11)
    assert trainer.learner.asked[0] == (["valid", "test"], [10])


def test_early_stopping_counts_evaluations_that_did_not_lower_the_rmse(tmp_path, rating_config) -> None:
    trainer = Trainer(
        rating_config(patience=2), tmp_path / "run", progress=False, data=_Ratings(), learner=_RatingLearner
    )
    result = trainer.fit()
    assert result.summary["stopped_early"]
    assert result.summary["epochs_run"] == 5  # epochs 4 and 5 did not beat epoch 3's 0.8
    assert result.summary["selected_epoch"] == 3
