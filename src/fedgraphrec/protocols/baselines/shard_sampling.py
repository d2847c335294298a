"""A shard's part of a round of the round-based baselines (FedPerGNN, FedNCF): negatives and local pairs.

FedGRec's sampler draws a round from one stream for all users in order, so what a user draws depends
on who else was sampled and how many items they hold: a node could not reproduce its users' draws
without the others' data. Here every sampled user draws its negatives and its local pairs from its
own stream ``(<protocol>, "sample", round, user)``, so a shard computes exactly its users' part, and
one node and three nodes draw the same. The round's *users* still come from FedGRec's public stream
(the server draws them), so budgets compare. Negatives hide which queried items are positives, so
with ``secure`` (the default under ``--crypto real``) each user's stream is a fresh
:func:`~fedgraphrec.seeding.secure_rng` instead: a server holding the seed cannot regenerate them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.protocols.base import Schedule, ServerProgram
from fedgraphrec.protocols.fedgrec.sampling import negatives_of
from fedgraphrec.runtime.message import Message
from fedgraphrec.seeding import hiding_rng, numpy_rng

__all__ = ["RoundSampledServer", "ShardRound", "round_clients", "sample_shard"]


@dataclass
class ShardRound:
    """The shard's part of the current round, kept between the query and the local stage.

    Attributes:
        clients: global ids of the shard's sampled clients (sorted).
        pos_ptr / pos_items: CSR of each client's positives (all its training items, sorted).
        neg_ptr / neg_items: CSR of each client's negatives.
        pair_neg: ``(τ, P)`` position in ``neg_items`` of each positive's negative in each step.
        neighbours: ``(P, d)`` FedPerGNN: mean embedding of each positive's other holders.
        round_index: the round.
    """

    clients: np.ndarray
    pos_ptr: np.ndarray
    pos_items: np.ndarray
    neg_ptr: np.ndarray
    neg_items: np.ndarray
    pair_neg: np.ndarray
    neighbours: torch.Tensor = field(default_factory=lambda: torch.zeros(0))
    round_index: int = 0

    @property
    def pos_seg(self) -> np.ndarray:
        """Client position of every positive."""
        return np.repeat(np.arange(len(self.clients)), np.diff(self.pos_ptr))

    def queries(self) -> tuple[np.ndarray, np.ndarray]:
        """``(client position, item)`` of every queried item, sorted by client then item."""
        seg = np.concatenate([self.pos_seg, np.repeat(np.arange(len(self.clients)), np.diff(self.neg_ptr))])
        items = np.concatenate([self.pos_items, self.neg_items]).astype(np.int64)
        order = np.lexsort((items, seg))
        return seg[order], items[order]


def _ptr(counts: list[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int64)


def sample_shard(
    rows: sp.csr_matrix,
    positions: np.ndarray,
    clients: np.ndarray,
    round_index: int,
    *,
    protocol: str,
    seed: int,
    n_negatives: int,
    local_steps: int,
    secure: bool = False,
) -> ShardRound:
    """The sampled clients' negatives and local pairs (one positive, one negative, each step).

    Args:
        rows: the shard's training rows (sorted indices).
        positions: row of each sampled client in ``rows``.
        clients: their global ids (name their streams).
        round_index: the round.
        protocol: names the streams.
        seed: the run seed.
        n_negatives: negatives each client draws (fewer if it lacks non-items).
        local_steps: local steps ``τ`` (one negative per positive and step).
        secure: draw from the OS CSPRNG (:func:`~fedgraphrec.seeding.secure_rng`), not the seed.

    Raises:
        ValueError: a sampled client holds every item (BPR needs a negative).
    """
    n_items = rows.shape[1]
    pos_lists, neg_lists, draws = [], [], []
    for row, u in zip(positions.tolist(), clients.tolist(), strict=True):
        rng = hiding_rng(secure, seed, protocol, "sample", round_index, u)
        pos = rows.indices[rows.indptr[row] : rows.indptr[row + 1]].astype(np.int64)
        neg = negatives_of(pos, n_items, n_negatives, rng).astype(np.int64)
        if not len(neg):
            raise ValueError(f"user {u} has interacted with every item; BPR needs at least one negative")
        pos_lists.append(pos)
        neg_lists.append(neg)
        draws.append(
            np.minimum((rng.random((local_steps, len(pos))) * len(neg)).astype(np.int64), len(neg) - 1)
        )
    neg_ptr = _ptr([len(n) for n in neg_lists])
    seg_neg = [neg_ptr[k] + d for k, d in enumerate(draws)]
    empty = np.zeros(0, dtype=np.int64)
    return ShardRound(
        clients=np.asarray(clients, dtype=np.int64),
        pos_ptr=_ptr([len(p) for p in pos_lists]),
        pos_items=np.concatenate(pos_lists) if pos_lists else empty,
        neg_ptr=neg_ptr,
        neg_items=np.concatenate(neg_lists) if neg_lists else empty,
        pair_neg=np.concatenate(seg_neg, axis=1) if seg_neg else np.zeros((local_steps, 0), dtype=np.int64),
        round_index=round_index,
    )


def round_clients(active: np.ndarray, round_index: int, *, seed: int, clients_per_round: int) -> np.ndarray:
    """The round's users: uniform without replacement among ``active`` (FedGRec's public stream), sorted."""
    size = min(clients_per_round, len(active))
    return np.sort(numpy_rng(seed, "fedgrec", "clients", round_index).choice(active, size, replace=False))


class RoundSampledServer(ServerProgram):
    """The server side of the round-based baselines: who enrolled, and each round's users.

    FedNCF and FedPerGNN enrol the same way (each node names its users with training items, field
    ``active``) and draw a round's users from FedGRec's public stream (:func:`round_clients`), so
    budgets compare; their servers inherit both from here.
    """

    schedule: ClassVar[Schedule] = "round"

    def init_state(self) -> None:
        """Nobody enrolled yet (subclasses add their tables and call this)."""
        self.active = np.zeros(0, dtype=np.int64)

    def enrol(self, replies: Mapping[int, Message]) -> None:
        """Record the users the nodes' replies name as holding training items (sorted)."""
        self.active = np.sort(
            np.concatenate([np.asarray(r.fields["active"], dtype=np.int64) for r in replies.values()])
        )

    def sample_clients(self, round_index: int) -> np.ndarray:
        """The round's users: uniform without replacement among the enrolled (FedGRec's stream)."""
        s = self.settings
        return round_clients(self.active, round_index, seed=s.seed, clients_per_round=s.clients_per_round)
