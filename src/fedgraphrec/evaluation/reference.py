"""Reference rankings a reader needs to judge a recall: train popularity and random scores.

Neither learns anything user-specific. ``popularity`` ranks every user's unseen items by their
number of training interactions (ties: lower item id first, deterministic); ``random`` scores every
item with independent uniform draws from a named, seeded stream (so a seed gives the same draw),
and :func:`expected_random_recall` is the exact expectation of the random ranking's recall@k. A
method that does not beat ``popularity`` has not learned more than what every user shares.
Both go through :func:`~fedgraphrec.evaluation.ranking.evaluate_scores`, the evaluator of the runs
they are compared with (same test users, same masked items).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.evaluation.ranking import evaluate_scores
from fedgraphrec.seeding import torch_generator

__all__ = ["REFERENCES", "expected_random_recall", "reference_metrics"]

REFERENCES = ("popularity", "random")


def reference_metrics(
    kind: str,
    train: sp.csr_matrix,
    test: sp.csr_matrix,
    seed: int = 0,
    ks: Sequence[int] = (20,),
    exclude: Sequence[sp.csr_matrix | None] | None = None,
) -> dict[str, float]:
    """The ranking metrics at ``ks`` of a reference ranking, with the training items masked.

    Args:
        kind: ``"popularity"`` or ``"random"``.
        train: user×item training matrix (popularity counts, and the masked items).
        test: user×item test matrix.
        seed: the random ranking's seed (stream ``"reference.random"``); popularity ignores it.
        ks: cut-offs.
        exclude: the masked matrices (default ``[train]``; a trainer's test masks train + valid).

    Raises:
        ValueError: unknown ``kind``.
    """
    if kind not in REFERENCES:
        raise ValueError(f"kind must be one of {REFERENCES}, got {kind!r}")
    n_users, n_items = train.shape
    if kind == "popularity":
        count = np.asarray(train.sum(axis=0), dtype=np.float64).ravel()
        # a tiny decreasing offset breaks ties by item id, whatever topk does with equal scores
        pop = torch.from_numpy(count - np.arange(n_items) / (2.0 * n_items))

        def score(users: torch.Tensor) -> torch.Tensor:
            return pop.expand(len(users), -1)

    else:
        gen = torch_generator(seed, "reference.random")

        def score(users: torch.Tensor) -> torch.Tensor:
            return torch.rand(len(users), n_items, generator=gen, dtype=torch.float64)

    masked = [train] if exclude is None else list(exclude)
    res = evaluate_scores(score, n_users, n_items, test, masked, ks=tuple(ks))
    return {k: float(v) for k, v in res.metrics.items()}


def expected_random_recall(train: sp.csr_matrix, test: sp.csr_matrix, k: int = 20) -> float:
    """Exact mean over test users of E[recall@k] under a uniformly random ranking of unseen items.

    A user with ``c`` candidate items (all but the training ones) and ``t`` test items among them
    expects ``min(k, c) · t / c`` hits, hence recall ``min(k, c) / c``.
    """
    test = sp.csr_matrix(test)
    has = np.diff(test.indptr) > 0
    cand = train.shape[1] - np.diff(sp.csr_matrix(train).indptr)[has]
    cand = np.maximum(cand, 1)
    return float(np.mean(np.minimum(k, cand) / cand)) if has.any() else float("nan")
