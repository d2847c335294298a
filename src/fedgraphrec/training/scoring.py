"""Evaluating a learner once per evaluation, and keeping the model that was evaluated.

:func:`evaluate_learner` is the training loop's evaluation: it asks the learner for its metrics in
the first way the learner offers (module docstring of :mod:`.trainer`: ``evaluate_splits``,
``evaluate_federated``, ``score_users``, ``embeddings``) and returns, beside the metrics, the model
it evaluated as a :class:`~fedgraphrec.training.snapshot.Snapshot` (or how to make one, or why there
is none). The snapshot reuses what the evaluation computed: the ``U``/``V`` tables it ranked with, or
the score matrix it ranked; a protocol's prediction stages never run twice for it.

:func:`evaluate_embeddings_on` and :func:`evaluate_scorer_on` are the two full-ranking evaluations,
shared by the loop and by :class:`~fedgraphrec.training.run.Run` (a saved model scores the same).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.data.types import Interactions
from fedgraphrec.evaluation.ranking import evaluate_embeddings, evaluate_scores
from fedgraphrec.training.snapshot import DENSE_LIMIT, Snapshot, dense_scores

__all__ = [
    "FLOWER_NOTE",
    "data_shape",
    "evaluate_embeddings_on",
    "evaluate_learner",
    "evaluate_scorer_on",
    "split_target",
]

Metrics = dict[str, dict[str, float]]
Model = Snapshot | Callable[[], Snapshot] | None

FLOWER_NOTE = (
    "the users' model is held by the SuperNodes (each node keeps its own users' rows); the server's "
    "run folder holds no user table — see docs/guide/using-a-model.md"
)


def split_target(data: Interactions, split: str) -> tuple[sp.csr_matrix, list[sp.csr_matrix]]:
    """Held-out matrix of ``split`` and what to mask (``test``: train+valid; ``valid``: train)."""
    if split == "valid":
        if data.valid is None:
            raise ValueError("the dataset has no validation split")
        return data.valid, [data.train]
    return data.test, [data.train] + ([data.valid] if data.valid is not None else [])


def evaluate_embeddings_on(
    U: torch.Tensor, V: torch.Tensor, data: Interactions, ks: list[int], split: str = "test"
) -> dict[str, float]:
    """Full-ranking metrics on ``split`` (``test`` masks train+valid items; ``valid`` masks train)."""
    target, exclude = split_target(data, split)
    return dict(evaluate_embeddings(U.float(), V.float(), target, exclude, ks=tuple(ks)).metrics)


def evaluate_scorer_on(
    score_users: Callable[[torch.Tensor], torch.Tensor],
    data: Interactions,
    ks: list[int],
    split: str = "test",
) -> dict[str, float]:
    """As :func:`evaluate_embeddings_on`, for models whose score is not a dot product (NCF)."""
    target, exclude = split_target(data, split)
    n_users, n_items = target.shape
    result = evaluate_scores(score_users, n_users, n_items, target, exclude, ks=tuple(ks), chunk_size=256)
    return dict(result.metrics)


def data_shape(data: Any) -> tuple[int, int] | None:
    """``(n_users, n_items)`` of a run's data (``Interactions`` or ``Ratings``), ``None`` if unknown."""
    n_users, n_items = getattr(data, "n_users", None), getattr(data, "n_items", None)
    if isinstance(n_users, int | np.integer) and isinstance(n_items, int | np.integer):
        return int(n_users), int(n_items)
    return None


def _too_large(shape: tuple[int, int] | None) -> str:
    """Why no dense snapshot is kept for data of ``shape`` ("" when it fits :data:`DENSE_LIMIT`)."""
    if shape is None:
        return "the run's data does not say its number of users and items"
    if shape[0] * shape[1] > DENSE_LIMIT:
        return (
            f"the model has no embeddings and its score matrix ({shape[0]} x {shape[1]}) is larger "
            f"than {DENSE_LIMIT:.0e} entries; no snapshot was written"
        )
    return ""


def evaluate_learner(
    learner: Any, data: Any, splits: list[str], ks: list[int], epoch: int
) -> tuple[Metrics, Model, str]:
    """Metrics of ``learner`` on ``splits`` and the model it evaluated.

    Returns:
        ``(metrics by split, model, reason)``: ``model`` is a :class:`Snapshot` (tables or scores
        the evaluation used), a function that makes one from the learner's current state (rating
        learners' ``score_rows``: predicted ratings, made only when a file is written), or ``None``
        with ``reason`` saying why no model can be kept.
    """
    own: Callable[[list[str], list[int]], Metrics] | None = getattr(learner, "evaluate_splits", None)
    federated: Callable[[list[int]], Metrics] | None = getattr(learner, "evaluate_federated", None)
    scorer: Callable[[torch.Tensor], torch.Tensor] | None = getattr(learner, "score_users", None)
    shape = data_shape(data)
    if own is not None:  # the learner evaluates itself (rating metrics, its own splits)
        got = own(splits, ks)
        rows: Callable[[torch.Tensor], torch.Tensor] | None = getattr(learner, "score_rows", None)
        if rows is None:
            return got, None, "the learner gives no score rows (no snapshot of its model)"
        reason = _too_large(shape)
        if reason or shape is None:
            return got, None, reason
        n_users, n_items = shape
        return got, lambda: Snapshot.dense(epoch, dense_scores(rows, n_users, n_items)), ""
    if federated is not None:  # the nodes score their own clients (engines across processes)
        return federated(ks), None, FLOWER_NOTE
    if scorer is not None:
        reason = _too_large(shape)
        if reason or shape is None:
            return {name: evaluate_scorer_on(scorer, data, ks, name) for name in splits}, None, reason
        scores = dense_scores(scorer, *shape)  # each row once, for every split and the snapshot
        got = {name: evaluate_scorer_on(lambda idx: scores[idx], data, ks, name) for name in splits}
        return got, Snapshot.dense(epoch, scores), ""
    U, V = learner.embeddings()
    return (
        {name: evaluate_embeddings_on(U, V, data, ks, name) for name in splits},
        Snapshot.dot(epoch, U, V),
        "",
    )
