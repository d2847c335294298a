"""Per-round sampling of FedGRec: the round's users, their negatives and the local minibatches.

Every draw comes from a named child stream of the run seed (``("fedgrec", <what>, round)``), so a
round is reproducible on its own: a resumed run, the batched simulation and a per-client
reference draw the same users, negatives and pairs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from fedgraphrec.seeding import numpy_rng

__all__ = ["RoundSample", "negatives_of", "sample_round"]


def negatives_of(positives: np.ndarray, n_items: int, n_neg: int, rng: np.random.Generator) -> np.ndarray:
    """``min(n_neg, N - |N_u|)`` distinct items drawn uniformly from ``T`` minus ``N_u``.

    Draws ranks among the non-positive items without replacement and maps rank ``r`` to the item
    ``r + #{p ∈ N_u : p - (its index) ≤ r}``, so no rejection loop is needed.
    """
    free = n_items - len(positives)
    ranks = rng.choice(free, size=min(n_neg, free), replace=False)
    shifted = positives - np.arange(len(positives))
    return ranks + np.searchsorted(shifted, ranks, side="right")


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


def sample_round(
    train: sp.csr_matrix,
    round_index: int,
    *,
    seed: int,
    clients_per_round: int,
    n_negatives: int,
    local_steps: int,
    dropout_before: float = 0.0,
    dropout_after: float = 0.0,
    batch_mode: str = "one_neg_per_pos",
) -> RoundSample:
    """Draw round ``round_index``'s users (uniform, without replacement), negatives and pairs."""
    n_items = train.shape[1]
    active = np.flatnonzero(np.diff(train.indptr) > 0)
    size = min(clients_per_round, len(active))
    clients = np.sort(numpy_rng(seed, "fedgrec", "clients", round_index).choice(active, size, replace=False))
    neg_rng = numpy_rng(seed, "fedgrec", "negatives", round_index)
    pos_lists = [train.indices[train.indptr[u] : train.indptr[u + 1]] for u in clients]
    neg_lists = [negatives_of(p, n_items, n_negatives, neg_rng) for p in pos_lists]
    pos_ptr = _ptr(np.array([len(p) for p in pos_lists]))
    neg_ptr = _ptr(np.array([len(n) for n in neg_lists]))
    n_neg = np.diff(neg_ptr)
    if (n_neg == 0).any():
        user = int(clients[np.argmax(n_neg == 0)])
        raise ValueError(f"user {user} has interacted with every item; BPR needs at least one negative")
    n_pos = np.diff(pos_ptr)
    seg = np.repeat(np.arange(size), n_pos)
    if batch_mode == "all_pairs":
        pair_ptr = _ptr(n_pos * n_neg)
        pair_seg = np.repeat(np.arange(size), n_pos * n_neg)
        within = np.arange(pair_ptr[-1]) - pair_ptr[pair_seg]  # position inside the client's block
        pair_pos = pos_ptr[pair_seg] + within // n_neg[pair_seg]
        neg_once = neg_ptr[pair_seg] + within % n_neg[pair_seg]
        pair_neg = np.broadcast_to(neg_once, (local_steps, len(neg_once)))
    else:
        pair_ptr, pair_pos = pos_ptr, np.arange(len(seg))
        draws = numpy_rng(seed, "fedgrec", "local", round_index).random((local_steps, len(seg)))
        pair_neg = neg_ptr[seg] + np.minimum((draws * n_neg[seg]).astype(np.int64), n_neg[seg] - 1)
    drop_rng = numpy_rng(seed, "fedgrec", "dropout", round_index)
    order = drop_rng.permutation(clients)
    n_before = round(dropout_before * size)
    n_after = round(dropout_after * size)
    return RoundSample(
        clients=clients,
        pos_ptr=pos_ptr,
        pos_items=np.concatenate(pos_lists).astype(np.int64),
        neg_ptr=neg_ptr,
        neg_items=np.concatenate(neg_lists).astype(np.int64),
        pair_ptr=pair_ptr,
        pair_pos=pair_pos,
        pair_neg=pair_neg,
        drop_before=np.sort(order[:n_before]),
        drop_after=np.sort(order[n_before : n_before + n_after]),
    )
