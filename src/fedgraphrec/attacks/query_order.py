"""What one round of item queries tells the server about which queried items are positives.

A round-based protocol (FedGRec, FedNCF, FedPerGNN) has each sampled user ask for the rows of
``N_u ∪ J_u``: its positives plus sampled negatives. The union is visible by design; which of its
items are positives must not be. Two ways a server separates them from a single round:

* :func:`order_attack` — the order of a query: a client that lists its positives first hands the
  server its training set (the first ``|Q| − n_negatives`` items). A query sorted by item id (or
  shuffled with a secret permutation) leaves only the chance level ``|N_u| / |Q|``.
* :func:`seeded_attack` — negatives regenerated from the run seed (``config.toml`` sits in every
  run folder). The negatives are the non-positives at drawn *ranks*; knowing the ranks, the server
  knows the rank of every item it was *not* asked for, hence how many positives lie below each,
  and every gap between two unqueried items that holds only positives is identified. Negatives from
  the CSPRNG make the regenerated ranks wrong; an inconsistent regeneration names nothing.

Both return a :class:`QueryLeak`: how many items the server names as positives, how many of them
are, and the precision of a random guess for comparison.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from fedgraphrec.runtime.transcript import Transcript

__all__ = ["QueryLeak", "order_attack", "round_queries", "seeded_attack", "separate_by_ranks"]

Ranks = Callable[[int, Mapping[int, int]], Mapping[int, np.ndarray]]
"""``(round, {user: |N_u|}) → {user: ranks}``: the negatives' ranks the server regenerates."""


@dataclass(frozen=True)
class QueryLeak:
    """How many positives a server names from the queries of one round.

    Attributes:
        queries: queries attacked (one per sampled user).
        positives: true positives in them.
        named: items the server names as positives.
        correct: named items that are positives.
        chance_precision: ``Σ|N_u| / Σ|Q_u|``, the precision of naming queried items at random.
    """

    queries: int
    positives: int
    named: int
    correct: int
    chance_precision: float

    @property
    def precision(self) -> float:
        """Fraction of named items that are positives (the chance precision if none is named)."""
        return self.correct / self.named if self.named else self.chance_precision

    @property
    def recall(self) -> float:
        """Fraction of the positives the server names."""
        return self.correct / self.positives if self.positives else 0.0

    def summary(self) -> dict[str, float]:
        """Plain numbers for reports."""
        return {
            "queries": self.queries,
            "positives": self.positives,
            "named": self.named,
            "correct": self.correct,
            "precision": self.precision,
            "recall": self.recall,
            "chance_precision": self.chance_precision,
        }


def round_queries(transcript: Transcript, *, kind: str = "item-ids") -> Iterator[tuple[int, int, np.ndarray]]:
    """``(round, user, query items as sent)`` of the first round in the server's transcript.

    Raises:
        ValueError: no query with sender ids was recorded (transcripts off).
    """
    entries = [e for e in transcript.of("server") if e.kind == kind]
    if not entries or any(e.senders is None for e in entries):
        raise ValueError(
            f"the server's transcript holds no {kind!r} queries with senders; turn transcripts on"
        )
    first = min(e.step for e in entries)
    for e in entries:
        if e.step == first:
            assert e.senders is not None
            for user, items in zip(e.senders, e.payloads, strict=True):
                yield first, int(user), np.asarray(items, dtype=np.int64)


def _n_pos(size: int, n_items: int, n_negatives: int) -> int | None:
    """``|N_u|`` from a query's size (``None`` when the whole catalogue was queried: it does not say)."""
    if size >= n_items:
        return None
    return max(size - n_negatives, 0)


def _score(named: dict[int, np.ndarray], queries: dict[int, np.ndarray], train: sp.csr_matrix) -> QueryLeak:
    n_named = correct = positives = queried = 0
    for u, q in queries.items():
        truth = train.indices[train.indptr[u] : train.indptr[u + 1]]
        guess = named.get(u, np.zeros(0, np.int64))
        n_named += len(guess)
        correct += int(np.isin(guess, truth).sum())
        positives += len(truth)
        queried += len(q)
    return QueryLeak(len(queries), positives, n_named, correct, positives / max(queried, 1))


def order_attack(transcript: Transcript, train: sp.csr_matrix, n_negatives: int) -> QueryLeak:
    """Name the first ``|Q| − n_negatives`` items of each query of one round as its positives.

    Args:
        transcript: the protocol network's transcript (read as the server).
        train: the true training matrix (only to score).
        n_negatives: the public setting (the server knows it).
    """
    queries = {u: q for _, u, q in round_queries(transcript)}
    n_items = train.shape[1]
    named = {}
    for u, q in queries.items():
        p = _n_pos(len(q), n_items, n_negatives)
        named[u] = q[: p or 0]
    return _score(named, queries, train)


def separate_by_ranks(query: np.ndarray, n_items: int, n_pos: int, ranks: np.ndarray) -> np.ndarray | None:
    """The items of ``query`` certain to be positives, given the negatives' ranks (``None``: inconsistent).

    The negatives are the non-positives at ``ranks`` (in increasing item order); every unqueried
    item is a non-positive whose rank is the next one *not* in ``ranks``. So before an unqueried item
    ``c`` of rank ``r`` lie ``c − r`` positives; a run of queried items between two unqueried ones
    whose count of positives equals its length is all positives.
    """
    free = n_items - n_pos
    queried = np.zeros(n_items, dtype=bool)
    queried[query] = True
    unqueried = np.flatnonzero(~queried)
    drawn = np.zeros(free, dtype=bool)
    if len(ranks) and (ranks.min() < 0 or ranks.max() >= free):
        return None
    drawn[ranks] = True
    other_ranks = np.flatnonzero(~drawn)
    if len(other_ranks) != len(unqueried):
        return None
    below = unqueried - other_ranks  # positives below each unqueried item
    in_run = np.diff(np.concatenate([[0], below, [n_pos]]))  # positives in each run of queried items
    edges = np.concatenate([[-1], unqueried, [n_items]])
    run_length = np.diff(edges) - 1
    if (in_run < 0).any() or (in_run > run_length).any():
        return None
    out = [
        np.arange(edges[k] + 1, edges[k + 1])
        for k in np.flatnonzero((in_run == run_length) & (run_length > 0))
    ]
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def seeded_attack(transcript: Transcript, train: sp.csr_matrix, n_negatives: int, ranks: Ranks) -> QueryLeak:
    """Regenerate one round's negatives from the seed and name the positives they expose.

    Args:
        transcript: the protocol network's transcript (read as the server).
        train: the true training matrix (only to score).
        n_negatives: the public setting.
        ranks: the protocol's draw of the negatives' ranks, as the server replays it from the seed.
    """
    got = list(round_queries(transcript))
    queries = {u: q for _, u, q in got}
    n_items = train.shape[1]
    degrees = {u: _n_pos(len(q), n_items, n_negatives) for u, q in queries.items()}
    known = {u: p for u, p in degrees.items() if p is not None}
    named: dict[int, np.ndarray] = {}
    if got and len(known) == len(degrees):
        drawn = ranks(got[0][0], known)
        for u, q in queries.items():
            found = separate_by_ranks(q, n_items, known[u], np.asarray(drawn[u], dtype=np.int64))
            if found is not None:
                named[u] = found
    return _score(named, queries, train)
