"""Small array helpers shared by the data layer."""

from __future__ import annotations

import numpy as np


def sorted_unique(a: np.ndarray) -> np.ndarray:
    """Distinct values of ``a`` in ascending order.

    Sort-based; for large int64 arrays it is much faster than ``np.unique`` under NumPy 2.4,
    whose default hash-based path is slow for that case.
    """
    s = np.sort(np.asarray(a), kind="stable")
    if len(s) == 0:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def occurrence_mask(keys: np.ndarray, keep: str) -> np.ndarray:
    """Mask keeping one row per distinct key: its ``"first"`` or ``"last"`` occurrence in row order."""
    n = len(keys)
    mask = np.zeros(n, dtype=bool)
    if n == 0:
        return mask
    order = np.argsort(keys, kind="stable")
    s = keys[order]
    boundary = np.empty(n, dtype=bool)
    if keep == "first":
        boundary[0] = True
        np.not_equal(s[1:], s[:-1], out=boundary[1:])
    else:
        boundary[-1] = True
        np.not_equal(s[:-1], s[1:], out=boundary[:-1])
    mask[order[boundary]] = True
    return mask
