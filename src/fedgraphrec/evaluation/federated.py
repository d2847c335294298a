"""Metric *sums* over one node's users, so a server's mean over nodes equals the centralized one.

In federated evaluation each node scores its own clients and replies, per split and metric, the sum
of its evaluated users' values and their number; the server divides the totals. This module computes
one node's sums from either its embeddings (``U V^T``) or a scoring function (models such as NeuMF).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.evaluation.ranking import evaluate_embeddings, evaluate_scores

__all__ = ["split_sums"]


def split_sums(
    targets: Mapping[str, sp.csr_matrix],
    exclude: Mapping[str, Sequence[sp.csr_matrix]],
    users: np.ndarray,
    ks: tuple[int, ...],
    embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
    score: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> dict[str, Any]:
    """Per split, ``"<split>/<metric>"``: the sum over ``users`` evaluated; ``"<split>/users"``: their count.

    Args:
        targets: held-out rows per split (all users; the rows of ``users`` are read).
        exclude: per split, the matrices whose items are masked (train, valid, ...).
        users: the global ids of the users scored, in the order of ``embeddings``' rows.
        ks: cut-offs.
        embeddings: ``(U, V)``, rows of ``U`` for ``users``: scores are ``U V^T``.
        score: otherwise ``score(rows)`` for positions in ``users``.
    """
    out: dict[str, Any] = {}
    for split, target in targets.items():
        masks = [m[users] for m in exclude[split]]
        if embeddings is not None:
            U, V = embeddings
            res = evaluate_embeddings(U, V, target[users], masks, ks=ks, per_user=True)
        elif score is not None:
            res = evaluate_scores(
                score, len(users), int(target.shape[1]), target[users], masks, ks=ks, per_user=True
            )
        else:
            raise ValueError("split_sums needs embeddings or a scoring function")
        for name, values in (res.per_user or {}).items():
            out[f"{split}/{name}"] = float(np.asarray(values, dtype=np.float64).sum())
        out[f"{split}/users"] = int(res.n_users_evaluated)
    return out
