"""The recommender's batch schedule and the release count ``K`` the social party calibrates to (spec §4.5).

``P1`` fixes the schedule up front from its own ratings (record indices per batch, epoch by epoch);
only the number of batches and, per iteration, the batch's distinct user ids (public, spec §1.4)
ever leave it. ``K`` follows from the schedule (:func:`release_count`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["batch_schedule", "release_count"]


def batch_schedule(
    n_records: int, batch_size: int, epochs: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """Record indices of every batch, epoch by epoch (fixed up front by ``P1``)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    out: list[np.ndarray] = []
    for _ in range(epochs):
        perm = rng.permutation(n_records)
        out.extend(perm[i : i + batch_size] for i in range(0, n_records, batch_size))
    return out


def release_count(
    schedule: list[np.ndarray], users: np.ndarray, n_users: int, sensitivity: str = "paper-local"
) -> int:
    """``K``: releases to calibrate for, plus 1 evaluation release.

    ``global``: every forward and backward of the schedule (an edge flip can move any user's row);
    ``paper-local``: the largest per-user count of forward + backward releases.
    """
    if sensitivity == "global":
        return 2 * len(schedule) + 1
    counts = np.zeros(n_users, dtype=np.int64)
    for idx in schedule:
        counts[np.unique(users[idx])] += 1
    return int(2 * counts.max() + 1)
