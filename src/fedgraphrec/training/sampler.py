"""Deterministic BPR triple sampler that federated protocols replay exactly.

For a given ``(seed, epoch)`` the triples are a pure function of the training matrix, so the
centralized oracle and a federated protocol built on the same seed see the same batches in the
same order, and a resumed run sees what an uninterrupted run would have.

Two schemes:

- ``"interactions"``: every training pair ``(u, i)`` once per epoch, shuffled;
- ``"users"`` (LightGCN's ``UniformSample_original``): ``|train|`` draws of a user uniformly among
  users with at least one training item, then a positive uniformly among that user's items.

Either way the negative ``j`` is uniform over items outside the user's *training* items
(validation and test items may be drawn, as in LightGCN's code), by vectorised rejection.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.seeding import numpy_rng

__all__ = ["BPRSampler", "SamplerScheme", "Triples"]

SamplerScheme = Literal["interactions", "users"]


@dataclass(frozen=True)
class Triples:
    """One epoch of triples as int64 arrays of equal length."""

    users: np.ndarray
    pos: np.ndarray
    neg: np.ndarray

    def __len__(self) -> int:
        return len(self.users)


class BPRSampler:
    """Seeded BPR triples over a binary training matrix.

    Args:
        train: binary user×item CSR (the training interactions).
        seed: run seed; epoch ``e`` uses the stream ``("sampler", e)``.
        scheme: ``"interactions"`` or ``"users"`` (see module docstring).

    Raises:
        ValueError: if the matrix is empty, the scheme is unknown, or a user holds every item (no
            negative exists).
    """

    def __init__(self, train: sp.csr_matrix, seed: int, scheme: SamplerScheme = "interactions") -> None:
        if scheme not in ("interactions", "users"):
            raise ValueError(f"unknown sampler scheme {scheme!r}; choose 'interactions' or 'users'")
        train = sp.csr_matrix(train, copy=True)
        train.sum_duplicates()
        train.sort_indices()
        if train.nnz == 0:
            raise ValueError("the training matrix has no interactions to sample from")
        self.n_users, self.n_items = train.shape
        self.seed = seed
        self.scheme = scheme
        self._indptr = train.indptr.astype(np.int64)
        self._items = train.indices.astype(np.int64)
        self._deg = np.diff(self._indptr)
        self._users = np.repeat(np.arange(self.n_users, dtype=np.int64), self._deg)
        self._keys = self._users * self.n_items + self._items  # sorted: CSR order with sorted indices
        full = np.flatnonzero(self._deg >= self.n_items)
        if len(full):
            raise ValueError(f"user {int(full[0])} interacted with every item; no negative can be sampled")
        self._active = np.flatnonzero(self._deg > 0)

    @property
    def n_train(self) -> int:
        """Number of training interactions (= triples per epoch)."""
        return len(self._items)

    def epoch(self, epoch: int) -> Triples:
        """All triples of epoch ``epoch`` in batch order."""
        rng = numpy_rng(self.seed, "sampler", epoch)
        if self.scheme == "interactions":
            order = rng.permutation(self.n_train)
            users, pos = self._users[order], self._items[order]
        else:
            users = self._active[rng.integers(0, len(self._active), size=self.n_train)]
            offs = (rng.random(self.n_train) * self._deg[users]).astype(np.int64)
            pos = self._items[self._indptr[users] + offs]
        neg = self._negatives(users, rng)
        return Triples(users, pos, neg)

    def _negatives(self, users: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        neg = rng.integers(0, self.n_items, size=len(users))
        todo = np.arange(len(users))
        while len(todo):
            keys = users[todo] * self.n_items + neg[todo]
            at = np.searchsorted(self._keys, keys)
            at[at == len(self._keys)] = 0
            hit = self._keys[at] == keys
            todo = todo[hit]
            neg[todo] = rng.integers(0, self.n_items, size=len(todo))
        return neg

    def batches(
        self, epoch: int, batch_size: int
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """Minibatches ``(users, pos, neg)`` of epoch ``epoch`` as int64 tensors (last one may be short)."""
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        t = self.epoch(epoch)
        for start in range(0, len(t), batch_size):
            sl = slice(start, start + batch_size)
            yield (torch.from_numpy(t.users[sl]), torch.from_numpy(t.pos[sl]), torch.from_numpy(t.neg[sl]))

    def n_batches(self, batch_size: int) -> int:
        """Minibatches per epoch."""
        return -(-self.n_train // batch_size)
