"""Tests for fedgraphrec.evaluation.rating (RMSE, MAE)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fedgraphrec.evaluation.rating import mae, rmse


def test_hand_case() -> None:
    # errors p - y = [1-2, 2-2, 3-5] = [-1, 0, -2]
    # RMSE = sqrt((1 + 0 + 4) / 3) = sqrt(5/3); MAE = (1 + 0 + 2) / 3 = 1
    pred, truth = [1.0, 2.0, 3.0], [2.0, 2.0, 5.0]
    assert rmse(pred, truth) == pytest.approx(math.sqrt(5 / 3), rel=1e-15)
    assert mae(pred, truth) == pytest.approx(1.0, rel=1e-15)


def test_clipping() -> None:
    pred, truth = np.array([0.0, 6.0, 3.5]), np.array([1.0, 5.0, 4.0])
    # unclipped errors [-1, 1, -0.5]: RMSE = sqrt((1 + 1 + 0.25)/3) = sqrt(0.75), MAE = 2.5/3
    assert rmse(pred, truth) == pytest.approx(math.sqrt(0.75), rel=1e-15)
    assert mae(pred, truth) == pytest.approx(2.5 / 3, rel=1e-15)
    # clipped to [1, 5]: pred -> [1, 5, 3.5], errors [0, 0, -0.5]
    # RMSE = sqrt(0.25/3), MAE = 0.5/3
    assert rmse(pred, truth, clip=(1.0, 5.0)) == pytest.approx(math.sqrt(0.25 / 3), rel=1e-15)
    assert mae(pred, truth, clip=(1.0, 5.0)) == pytest.approx(0.5 / 3, rel=1e-15)


def test_torch_and_2d_inputs() -> None:
    # errors [[0.5, -0.5], [1.5, 0]]: squares sum 0.25 + 0.25 + 2.25 = 2.75 -> RMSE = sqrt(2.75/4);
    # abs sum 0.5 + 0.5 + 1.5 = 2.5 -> MAE = 2.5/4 = 0.625
    pred = torch.tensor([[3.5, 2.5], [5.5, 1.0]], dtype=torch.float32, requires_grad=True)
    truth = torch.tensor([[3.0, 3.0], [4.0, 1.0]])
    assert rmse(pred, truth) == pytest.approx(math.sqrt(2.75 / 4), rel=1e-7)
    assert mae(pred, truth) == pytest.approx(0.625, rel=1e-7)
    assert isinstance(rmse(pred, truth), float)


def test_perfect_predictions() -> None:
    y = np.array([1.0, 4.0, 2.5])
    assert rmse(y, y) == 0.0
    assert mae(y, y) == 0.0


def test_errors() -> None:
    with pytest.raises(ValueError, match="shape"):
        rmse([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="zero"):
        mae([], [])
    with pytest.raises(ValueError, match="lo <= hi"):
        rmse([1.0], [1.0], clip=(5.0, 1.0))
