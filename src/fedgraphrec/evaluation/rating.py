"""Rating-prediction error metrics: RMSE and MAE.

For predictions ``p_1..p_n`` and true ratings ``y_1..y_n`` (optionally with every prediction first
clipped to ``[lo, hi]``, ``p̃_j = min(max(p_j, lo), hi)``)::

    RMSE = sqrt( (1/n) Σ_j (p̃_j − y_j)² )
    MAE  = (1/n) Σ_j |p̃_j − y_j|

Both are computed in float64 and returned as Python floats. Inputs may be NumPy arrays, Torch
tensors (any device; detached) or sequences of numbers, of identical shape and non-empty.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

__all__ = ["LOWER_IS_BETTER", "better", "mae", "rmse", "worst"]

LOWER_IS_BETTER: frozenset[str] = frozenset({"rmse", "mae"})
"""Metrics (by name, as in a run's metric records) where a smaller value is the better model: the
rating errors. Every other metric (recall@K, ndcg@K, …) is higher-is-better."""


def better(metric: str, a: float, b: float) -> bool:
    """Whether value ``a`` of ``metric`` is strictly better than ``b`` (model selection, early stopping)."""
    return a < b if metric in LOWER_IS_BETTER else a > b


def worst(metric: str) -> float:
    """The value every real value of ``metric`` beats (``+inf`` for an error, ``-inf`` otherwise)."""
    return float("inf") if metric in LOWER_IS_BETTER else float("-inf")


ArrayLike = np.ndarray | torch.Tensor | Sequence[float]


def _as_f64(x: ArrayLike) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().to(torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


def _errors(pred: ArrayLike, truth: ArrayLike, clip: tuple[float, float] | None) -> np.ndarray:
    """Return ``p̃ − y`` as a flat float64 array after validation and optional clipping."""
    p, y = _as_f64(pred), _as_f64(truth)
    if p.shape != y.shape:
        raise ValueError(f"pred has shape {p.shape}, truth has shape {y.shape}")
    if p.size == 0:
        raise ValueError("cannot compute an error metric of zero predictions")
    if clip is not None:
        lo, hi = float(clip[0]), float(clip[1])
        if not lo <= hi:
            raise ValueError(f"clip range must satisfy lo <= hi, got {clip}")
        p = np.clip(p, lo, hi)
    return (p - y).ravel()


def rmse(pred: ArrayLike, truth: ArrayLike, *, clip: tuple[float, float] | None = None) -> float:
    """Root mean squared error ``sqrt((1/n) Σ_j (p̃_j − y_j)²)``.

    Args:
        pred: predicted ratings ``p``.
        truth: true ratings ``y``, same shape as ``pred``.
        clip: optional ``(lo, hi)`` rating range (e.g. ``Ratings.rating_range``); predictions are
            clipped to it first, ``p̃ = min(max(p, lo), hi)``. ``None`` uses ``p̃ = p``.

    Returns:
        The RMSE as a float (``nan`` if any input is ``nan``).

    Raises:
        ValueError: if shapes differ, inputs are empty, or ``lo > hi``.
    """
    e = _errors(pred, truth, clip)
    return float(np.sqrt(np.mean(e * e)))


def mae(pred: ArrayLike, truth: ArrayLike, *, clip: tuple[float, float] | None = None) -> float:
    """Mean absolute error ``(1/n) Σ_j |p̃_j − y_j|``.

    Args:
        pred: predicted ratings ``p``.
        truth: true ratings ``y``, same shape as ``pred``.
        clip: optional ``(lo, hi)`` rating range; predictions are clipped to it first,
            ``p̃ = min(max(p, lo), hi)``. ``None`` uses ``p̃ = p``.

    Returns:
        The MAE as a float (``nan`` if any input is ``nan``).

    Raises:
        ValueError: if shapes differ, inputs are empty, or ``lo > hi``.
    """
    e = _errors(pred, truth, clip)
    return float(np.mean(np.abs(e)))
