"""Per-round sampling of FedGRec: the round's users, their negatives and the local minibatches.

Every draw comes from a named child stream of the run seed (``("fedgrec", <what>, round)``), so a
round is reproducible on its own: a resumed run, the batched simulation and a per-client
reference draw the same users, negatives and pairs.

Except, with ``secure=True`` (``crypto = "real"`` without ``reproducible``), the negatives: they
hide which queried items are positives, and a server that regenerates them from the run seed
(``config.toml`` sits in every run folder) knows the rank of every item it was not asked for among
the non-positives, so it can name most positives of a query
(:func:`fedgraphrec.attacks.query_order.seeded_attack`). Then each node draws its own users'
negatives from a ChaCha20 keystream keyed by :func:`os.urandom`
(:class:`~fedgraphrec.privacy.noise_source.SecureNoise`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.privacy.noise_source import SecureNoise
from fedgraphrec.protocols.fedgrec.settings import FedGRecSettings
from fedgraphrec.seeding import numpy_rng

__all__ = ["RoundSample", "draw_round", "negatives_of", "sample_clients", "sample_round", "secure_ranks"]


def negatives_of(positives: np.ndarray, n_items: int, n_neg: int, rng: np.random.Generator) -> np.ndarray:
    """``min(n_neg, N - |N_u|)`` distinct items drawn uniformly from ``T`` minus ``N_u``.

    Draws ranks among the non-positive items without replacement and maps rank ``r`` to the item
    ``r + #{p ∈ N_u : p - (its index) ≤ r}``, so no rejection loop is needed.
    """
    free = n_items - len(positives)
    ranks = rng.choice(free, size=min(n_neg, free), replace=False)
    shifted = positives - np.arange(len(positives))
    return ranks + np.searchsorted(shifted, ranks, side="right")


def secure_ranks(free: int, size: int, source: SecureNoise) -> np.ndarray:
    """``size`` distinct ranks in ``[0, free)``, uniform, from the keystream (the ``size`` smallest keys)."""
    if size <= 0:
        return np.zeros(0, dtype=np.int64)
    keys = source.uniform((free,), torch.float64).numpy()
    return np.sort(np.argpartition(keys, size - 1)[:size]).astype(np.int64)


@dataclass(frozen=True)
class RoundSample:
    """Who takes part in a round and what each queries, in the flat layout of spec §7.

    Attributes:
        clients: sampled user ids, sorted (``S``).
        pos_ptr / pos_items: CSR of each client's positives (train items), ``P`` in all.
        neg_ptr / neg_items: CSR of each client's sampled negatives.
        pair_ptr: CSR of each client's (positive, negative) pairs of a local step.
        pair_pos: ``(Q,)`` position in ``pos_items`` of each pair's positive.
        pair_neg: ``(τ, Q)`` position in ``neg_items`` of each pair's negative in each local step.
            ``one_neg_per_pos``: one pair per positive, its negative drawn uniformly from the same
            client's negatives every step; ``all_pairs``: every positive with every negative, the
            same in every step.
        drop_before / drop_after: clients that go offline before / after uploading.
    """

    clients: np.ndarray
    pos_ptr: np.ndarray
    pos_items: np.ndarray
    neg_ptr: np.ndarray
    neg_items: np.ndarray
    pair_ptr: np.ndarray
    pair_pos: np.ndarray
    pair_neg: np.ndarray
    drop_before: np.ndarray
    drop_after: np.ndarray

    @property
    def pos_seg(self) -> np.ndarray:
        """Client position (in ``clients``) of every positive."""
        return np.repeat(np.arange(len(self.clients)), np.diff(self.pos_ptr))

    @property
    def pair_seg(self) -> np.ndarray:
        """Client position of every pair."""
        return np.repeat(np.arange(len(self.clients)), np.diff(self.pair_ptr))

    @property
    def neg_seg(self) -> np.ndarray:
        """Client position of every negative."""
        return np.repeat(np.arange(len(self.clients)), np.diff(self.neg_ptr))

    @property
    def n_queried(self) -> np.ndarray:
        """How many items each client queries (positives + negatives)."""
        return np.diff(self.pos_ptr) + np.diff(self.neg_ptr)

    def queries(self) -> tuple[np.ndarray, np.ndarray]:
        """Every (client position, item) of the round's queries, flat: positives, then negatives."""
        return np.concatenate([self.pos_seg, self.neg_seg]), np.concatenate([self.pos_items, self.neg_items])

    def queried(self, i: int) -> np.ndarray:
        """Item ids client number ``i`` queries: its positives, then its negatives."""
        return np.concatenate(
            [
                self.pos_items[self.pos_ptr[i] : self.pos_ptr[i + 1]],
                self.neg_items[self.neg_ptr[i] : self.neg_ptr[i + 1]],
            ]
        )


def _ptr(counts: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def sample_clients(active: np.ndarray, round_index: int, *, seed: int, clients_per_round: int) -> np.ndarray:
    """Step 1's users of round ``round_index``: uniform without replacement among ``active``, sorted.

    Public (a named child stream of the run seed): the server draws them.
    """
    size = min(clients_per_round, len(active))
    return np.sort(numpy_rng(seed, "fedgrec", "clients", round_index).choice(active, size, replace=False))


def draw_round(
    clients: np.ndarray,
    degrees: np.ndarray,
    positives: Callable[[int], np.ndarray],
    own: np.ndarray,
    n_items: int,
    round_index: int,
    settings: FedGRecSettings,
    *,
    secure: bool = False,
) -> RoundSample:
    """The draws of round ``round_index`` for the sampled users ``own`` (a shard of ``clients``).

    The negatives and the local pairs come from one stream per round over *all* sampled users in
    order (as the one-process simulation has always drawn them), so a shard replays the stream for
    every sampled user and keeps its own users' draws. Replaying needs only the sampled users'
    training degrees ``|N_u|`` (``degrees``, aligned with ``clients``; the server learns them anyway
    from the query sizes) and the positives of the shard's own users. The result is the one-shard
    sample restricted to ``own``, with its pointers re-based. ``secure``: the own users' negatives
    come from the CSPRNG instead (module docstring); nothing else changes. ``settings`` gives the
    run ``seed``, ``n_negatives``, ``local_steps``, ``dropout_before``, ``dropout_after`` and
    ``batch_mode``.
    """
    seed, n_negatives, local_steps = settings.seed, settings.n_negatives, settings.local_steps
    dropout_before, dropout_after, batch_mode = (
        settings.dropout_before,
        settings.dropout_after,
        settings.batch_mode,
    )
    size = len(clients)
    n_pos = np.asarray(degrees, dtype=np.int64)
    free = n_items - n_pos
    n_neg = np.minimum(n_negatives, free)
    mine = np.isin(clients, own)
    neg_rng = numpy_rng(seed, "fedgrec", "negatives", round_index)
    pos_lists, neg_lists = [], []
    source = SecureNoise() if secure else None
    for i, u in enumerate(clients.tolist()):
        if source is None:
            ranks = neg_rng.choice(int(free[i]), size=int(n_neg[i]), replace=False)
        elif mine[i]:
            ranks = secure_ranks(int(free[i]), int(n_neg[i]), source)
        if mine[i]:
            p = positives(u)
            pos_lists.append(p)
            neg_lists.append(ranks + np.searchsorted(p - np.arange(len(p)), ranks, side="right"))
    if (n_neg == 0).any():
        user = int(clients[np.argmax(n_neg == 0)])
        raise ValueError(f"user {user} has interacted with every item; BPR needs at least one negative")
    own_pos, own_neg = n_pos[mine], n_neg[mine]
    pos_ptr, neg_ptr = _ptr(own_pos), _ptr(own_neg)
    n_own = int(mine.sum())
    seg = np.repeat(np.arange(n_own), own_pos)
    if batch_mode == "all_pairs":
        pair_ptr = _ptr(own_pos * own_neg)
        pair_seg = np.repeat(np.arange(n_own), own_pos * own_neg)
        within = np.arange(pair_ptr[-1]) - pair_ptr[pair_seg]  # position inside the client's block
        pair_pos = pos_ptr[pair_seg] + within // own_neg[pair_seg]
        neg_once = neg_ptr[pair_seg] + within % own_neg[pair_seg]
        pair_neg = np.broadcast_to(neg_once, (local_steps, len(neg_once)))
    else:
        pair_ptr, pair_pos = pos_ptr, np.arange(len(seg))
        draws = numpy_rng(seed, "fedgrec", "local", round_index).random((local_steps, int(n_pos.sum())))
        draws = draws[:, np.repeat(mine, n_pos)]
        pair_neg = neg_ptr[seg] + np.minimum((draws * own_neg[seg]).astype(np.int64), own_neg[seg] - 1)
    drop_rng = numpy_rng(seed, "fedgrec", "dropout", round_index)
    order = drop_rng.permutation(clients)
    n_before = round(dropout_before * size)
    n_after = round(dropout_after * size)
    empty = np.zeros(0, dtype=np.int64)
    return RoundSample(
        clients=np.asarray(clients[mine], dtype=np.int64),
        pos_ptr=pos_ptr,
        pos_items=np.concatenate(pos_lists).astype(np.int64) if pos_lists else empty,
        neg_ptr=neg_ptr,
        neg_items=np.concatenate(neg_lists).astype(np.int64) if neg_lists else empty,
        pair_ptr=pair_ptr,
        pair_pos=pair_pos,
        pair_neg=np.ascontiguousarray(pair_neg),
        drop_before=np.intersect1d(order[:n_before], own),
        drop_after=np.intersect1d(order[n_before : n_before + n_after], own),
    )


def sample_round(train: sp.csr_matrix, round_index: int, settings: FedGRecSettings) -> RoundSample:
    """Round ``round_index``'s users, negatives and pairs over the whole population (one shard)."""
    degrees = np.diff(train.indptr).astype(np.int64)
    clients = sample_clients(
        np.flatnonzero(degrees > 0),
        round_index,
        seed=settings.seed,
        clients_per_round=settings.clients_per_round,
    )
    return draw_round(
        clients,
        degrees[clients],
        lambda u: train.indices[train.indptr[u] : train.indptr[u + 1]],
        clients,
        train.shape[1],
        round_index,
        settings,
    )
