"""P4GCN and rating-baseline learners: one epoch per round, rating metrics per split, resumable state."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from fedgraphrec.data.synthetic import synthetic_ratings
from fedgraphrec.evaluation.rating import mae, rmse
from fedgraphrec.protocols.p4gcn.settings import P4GCNSettings
from fedgraphrec.training.p4gcn_learner import make_rating_learner, rating_splits

SETTINGS = P4GCNSettings(dim=8, batch=64, epochs=3, lr=1e-2, eps=5.0)


@pytest.mark.parametrize("method", ["p4gcn", "pmf"])
def test_evaluate_splits_are_rmse_and_mae_of_the_predictions(method: str) -> None:
    data = synthetic_ratings(n_users=40, n_items=30, seed=0)
    learner = make_rating_learner(P4GCNSettings(**{**SETTINGS.__dict__, "method": method}), data, seed=1)
    assert learner.train_round(0).loss > 0
    got = learner.evaluate_splits(["valid", "test"], [10])
    _, val, te = rating_splits(data, 1)
    for split, (u, i, r) in (("valid", val), ("test", te)):
        pred = learner.run.predict(u, i) if method == "p4gcn" else learner.predict(u, i)  # type: ignore[union-attr]
        assert got[split]["rmse"] == pytest.approx(rmse(pred, r, clip=data.rating_range), rel=1e-12)
        assert got[split]["mae"] == pytest.approx(mae(pred, r, clip=data.rating_range), rel=1e-12)


@pytest.mark.parametrize("method", ["p4gcn", "p4gcn*", "lightgcn"])
def test_a_learner_resumed_from_its_state_continues_identically(method: str) -> None:
    data = synthetic_ratings(n_users=40, n_items=30, seed=0)
    s = P4GCNSettings(**{**SETTINGS.__dict__, "method": method})
    a = make_rating_learner(s, data, seed=1)
    a.train_round(0)
    state = a.state_dict()
    for value in _leaves(state):
        assert isinstance(value, torch.Tensor | int | float | str | bool | type(None)), type(value)
    b = make_rating_learner(s, data, seed=1)
    b.load_state_dict(copy.deepcopy(state))  # as from a checkpoint file: nothing shared with ``a``
    la, lb = a.train_round(1).loss, b.train_round(1).loss
    assert la == lb
    assert a.evaluate_splits(["test"]) == b.evaluate_splits(["test"])
    if method.startswith("p4gcn"):
        assert a.run_summary()["privacy"] == b.run_summary()["privacy"]  # type: ignore[index]


def _leaves(obj: object) -> list[object]:
    if isinstance(obj, dict):
        return [leaf for v in obj.values() for leaf in _leaves(v)]
    if isinstance(obj, list | tuple):
        return [leaf for v in obj for leaf in _leaves(v)]
    return [obj]


def test_p4gcn_learner_refuses_float32_and_baselines() -> None:
    data = synthetic_ratings(n_users=20, n_items=10, seed=0)
    from fedgraphrec.training.p4gcn_learner import P4GCNLearner

    with pytest.raises(ValueError, match="float64"):
        P4GCNLearner(SETTINGS, data, seed=0, dtype=torch.float32)
    with pytest.raises(ValueError, match="not 'pmf'"):
        P4GCNLearner(P4GCNSettings(method="pmf"), data, seed=0)
    assert np.isfinite(SETTINGS.eps)
