"""Top-K recommendation lists: the ranking the metrics score, as items and scores per user.

:func:`top_k` is the one place a list of recommendations is cut, for every caller (the saved-run
API, the CLI's ``recommend``, a Flower SuperNode writing its own users' lists). It uses the same
rule as :mod:`fedgraphrec.evaluation.ranking`: items in ``seen`` are masked to ``-inf`` and never
recommended, and the list is exactly :func:`torch.topk`'s order (``sorted=True``). When a user has
fewer than ``k`` rankable items the tail holds item ``-1`` with score ``-inf``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
import torch

__all__ = ["ScoreRows", "dot_scores", "top_k"]

ScoreRows = Callable[[torch.Tensor], torch.Tensor]
"""``users (int64 [b]) -> scores [b, n_items]``: a model's score rows for a batch of users."""


def dot_scores(users: torch.Tensor, items: torch.Tensor) -> ScoreRows:
    """The score rows ``U[u] · Vᵀ`` of an embedding model (the tables are read, never copied)."""

    def rows(idx: torch.Tensor) -> torch.Tensor:
        return users[idx] @ items.T

    return rows


def top_k(
    score_rows: ScoreRows,
    users: np.ndarray,
    k: int,
    n_items: int,
    seen: sp.csr_matrix | None = None,
    chunk: int = 1024,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best items of each user in ``users``, best first.

    Args:
        score_rows: the model's score rows (:data:`ScoreRows`).
        users: compact user indices (int64), in the order the result rows follow.
        k: list length (``1 ≤ k``; more than ``n_items`` is cut to ``n_items``).
        n_items: number of items (columns of every score row).
        seen: ``(n_users, n_items)`` matrix whose non-zeros are masked (the items a user already has),
            or ``None`` to rank every item.
        chunk: users scored at once.

    Returns:
        ``(items, scores)``, both ``[len(users), min(k, n_items)]``: item indices (int64; ``-1`` where
        fewer items were rankable) and their scores (float64; ``-inf`` there).

    Raises:
        ValueError: ``k < 1``, a user index out of range of ``seen``, or a NaN score.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    users = np.asarray(users, dtype=np.int64)
    if seen is not None and len(users) and (users.min() < 0 or users.max() >= seen.shape[0]):
        raise ValueError(f"user index out of range 0..{seen.shape[0] - 1}")
    width = min(k, n_items)
    out_items = np.full((len(users), width), -1, dtype=np.int64)
    out_scores = np.full((len(users), width), -np.inf, dtype=np.float64)
    for start in range(0, len(users), chunk):
        idx = users[start : start + chunk]
        scores = score_rows(torch.from_numpy(idx)).detach().to(torch.float64).clone()
        if scores.shape != (len(idx), n_items):
            raise ValueError(f"score rows have shape {tuple(scores.shape)}, expected ({len(idx)}, {n_items})")
        if torch.isnan(scores).any():
            raise ValueError("the model produced a NaN score; it cannot rank items")
        if seen is not None:
            sub = seen[idx].tocoo()
            scores[
                torch.from_numpy(sub.row.astype(np.int64)), torch.from_numpy(sub.col.astype(np.int64))
            ] = -torch.inf
        values, items = torch.topk(scores, width, dim=1, largest=True, sorted=True)
        values_np, items_np = values.numpy(), items.numpy().astype(np.int64)
        items_np[np.isneginf(values_np)] = -1
        out_items[start : start + len(idx)] = items_np
        out_scores[start : start + len(idx)] = values_np
    return out_items, out_scores
