"""A DGREC neighbour infers a member's private items from the gradient vector it received.

The item-table part of a local gradient is non-zero exactly on the rows the member touched: its
hypergraph nodes (own items, neighbours' public items) and the step's positives and negatives. A
neighbour that receives the **plain** gradient ranks items by the L2 norm of their rows; one that
receives the **one-bit encoding** can only rank by ``|Σ bits|`` of a row (every row of ``±1`` has the
same norm), the best it can do per row. Success is measured on the member's *private* items (those it
did not publicise): hit rate of the top-``k`` guesses against the random-guess rate ``k·|P|/|I|``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["GradientInference", "private_item_hits"]


@dataclass(frozen=True)
class GradientInference:
    """Private-item recovery by a gradient-receiving neighbour.

    Attributes:
        hits: private items among the top-``k`` guesses, summed over targets.
        private: private items of the targets, summed.
        chance: expected hits of random guessing, summed.
        recall: ``hits / private``.
    """

    hits: int
    private: int
    chance: float
    recall: float


def _row_scores(vec: torch.Tensor, n_items: int, d: int) -> torch.Tensor:
    rows = vec[: n_items * d].reshape(n_items, d).to(torch.float64)
    if vec.dtype == torch.int8:
        return rows.sum(1).abs()
    return rows.norm(dim=1)


def private_item_hits(
    received: torch.Tensor, private: list[np.ndarray], n_items: int, d: int, k: int
) -> GradientInference:
    """Score what neighbours received (one row per target: plain float or one-bit int8 vectors).

    Args:
        received: ``[n_targets, n_s]`` vectors as received; the first ``n_items·d`` coordinates are the
            item table's gradient (DGREC's flattening order).
        private: each target's private item ids.
        n_items: item count.
        d: embedding size.
        k: guesses per target.
    """
    if received.shape[0] != len(private):
        raise ValueError(f"received has {received.shape[0]} rows but private lists {len(private)} targets")
    if not 0 < k <= n_items:
        raise ValueError(f"k must be in (0, {n_items}], got {k}")
    hits = total = 0
    chance = 0.0
    for vec, priv in zip(received, private, strict=True):
        top = torch.topk(_row_scores(vec, n_items, d), k).indices.numpy()
        hits += int(np.isin(top, priv).sum())
        total += len(priv)
        chance += k * len(priv) / n_items
    return GradientInference(hits, total, chance, hits / max(total, 1))
