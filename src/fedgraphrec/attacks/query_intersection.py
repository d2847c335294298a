"""The query-intersection attack on FedGRec's training queries.

Each sampled user asks the server for the rows of ``Ñ_u = N_u ∪ J_u``: all its positives plus
``n_negatives`` random negatives, resampled every round. The paper argues the negatives hide the
positives. They do within one round, but the server knows which user sent which query, and across
rounds the positives are the only items that are *always* requested: the intersection of a user's
queries contains ``N_u`` and shrinks towards it as the user is sampled again. This module runs the
attack on the server's transcript and scores it against the truth.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from fedgraphrec.runtime.transcript import Transcript

__all__ = ["IntersectionResult", "query_intersection"]


@dataclass(frozen=True)
class IntersectionResult:
    """How well the intersection of a user's queries recovers its training items.

    Attributes:
        users: the users the server saw query at least ``min_rounds`` times.
        rounds_seen: how many queries of each.
        precision: per user ``|guess ∩ N_u| / |guess|``.
        recall: per user ``|guess ∩ N_u| / |N_u|`` (1 by construction: positives are in every query).
    """

    users: np.ndarray
    rounds_seen: np.ndarray
    precision: np.ndarray
    recall: np.ndarray

    @property
    def exact_fraction(self) -> float:
        """Fraction of attacked users whose guess is exactly ``N_u``."""
        if not len(self.users):
            return 0.0
        return float(np.mean((self.precision == 1.0) & (self.recall == 1.0)))

    def by_rounds_seen(self) -> list[dict[str, float]]:
        """Users, mean precision and exact-recovery fraction for each number of rounds seen."""
        rows = []
        for seen in sorted(set(self.rounds_seen.tolist())):
            mask = self.rounds_seen == seen
            rows.append(
                {
                    "rounds_seen": seen,
                    "users": int(mask.sum()),
                    "mean_precision": float(self.precision[mask].mean()),
                    "exact_fraction": float(np.mean(self.precision[mask] == 1.0)),
                }
            )
        return rows

    def summary(self) -> dict[str, float]:
        """Means over the attacked users, by how often each was seen."""
        out: dict[str, float] = {"users": float(len(self.users)), "exact_fraction": self.exact_fraction}
        if len(self.users):
            out["mean_precision"] = float(self.precision.mean())
            out["mean_recall"] = float(self.recall.mean())
        return out


def query_intersection(
    transcript: Transcript, train: sp.csr_matrix, *, kind: str = "item-ids", min_rounds: int = 2
) -> IntersectionResult:
    """Intersect every user's queries in the server's transcript and compare with ``train``.

    Args:
        transcript: the protocol network's transcript (transcripts on), read as the server.
        train: the true training matrix (only to score the attack).
        kind: payload kind of the queries.
        min_rounds: attack only users seen at least this often.

    Raises:
        ValueError: the transcript holds no queries with sender ids (transcripts were off).
    """
    guesses: dict[int, set[int]] = {}
    seen: dict[int, int] = defaultdict(int)
    for entry in transcript.of("server"):
        if entry.kind != kind:
            continue
        if entry.senders is None:
            raise ValueError(f"queries of kind {kind!r} carry no sender ids")
        for user, items in zip(entry.senders, entry.payloads, strict=True):
            query = {int(i) for i in np.asarray(items)}
            guesses[user] = query if user not in guesses else guesses[user] & query
            seen[user] += 1
    if not seen:
        raise ValueError(f"the server's transcript holds no {kind!r} queries; run with transcripts on")
    users = np.array(sorted(u for u, n in seen.items() if n >= min_rounds), dtype=np.int64)
    precision, recall = [], []
    for u in users:
        truth = set(train.indices[train.indptr[u] : train.indptr[u + 1]].tolist())
        hit = len(guesses[u] & truth)
        precision.append(hit / max(len(guesses[u]), 1))
        recall.append(hit / max(len(truth), 1))
    return IntersectionResult(
        users=users,
        rounds_seen=np.array([seen[u] for u in users], dtype=np.int64),
        precision=np.array(precision),
        recall=np.array(recall),
    )
