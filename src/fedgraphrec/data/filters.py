"""Dense subsets of a large implicit dataset: top-N items, then an iterated k-core.

Decentralised protocols that keep a full item table per user (DGREC, one ``n_items × d`` table per
user) cannot run on Ciao's 105,114 items (7,375 × 105,114 × 16 × 4 B ≈ 49.6 GB). :func:`dense_core`
picks the subset they run on instead. It keeps the ``top_items`` most-interacted items (ties go
to the lower id), then repeatedly drops users with fewer than ``min_user`` and items with fewer
than ``min_item`` remaining interactions until nothing changes (the paper's Weeplaces rule,
"remove users and items with < 10 interactions", iterated). Counts are taken over every split that
is passed (train, validation and test together), as a filter applied before splitting would count
them. The split itself is not redrawn: every pair keeps the split the loader gave it.

There is no randomness, so the subset is the same on every call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

__all__ = ["CoreSubset", "dense_core"]


@dataclass(frozen=True)
class CoreSubset:
    """The kept part of a dataset, with compact ids.

    Attributes:
        users: original ids of the kept users, ascending; new user id ``k`` is ``users[k]``.
        items: original ids of the kept items, ascending; new item id ``k`` is ``items[k]``.
        parts: the input matrices restricted to the kept users and items (``len(users) ×
            len(items)``, same order as passed).
        rounds: pruning rounds until the k-core was stable.
    """

    users: np.ndarray
    items: np.ndarray
    parts: tuple[sp.csr_matrix, ...]
    rounds: int

    @property
    def n_interactions(self) -> int:
        """Kept (user, item) pairs over all parts."""
        return int(sum(p.nnz for p in self.parts))


def _positive_int(value: int | None, name: str, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(
            f"{name} must be a positive integer{' or None' if allow_none else ''}, got {value!r}"
        )


def dense_core(
    parts: Sequence[sp.spmatrix],
    *,
    top_items: int | None = None,
    min_user: int = 1,
    min_item: int = 1,
) -> CoreSubset:
    """Keep the ``top_items`` most-interacted items, then the iterated (``min_user``, ``min_item``)-core.

    Args:
        parts: the splits of one dataset (e.g. train, validation, test), each ``n_users × n_items``;
            a stored nonzero is one interaction, whatever its value.
        top_items: how many items to keep by interaction count over all ``parts`` (ties: lower
            item id first); ``None`` keeps every item before pruning.
        min_user: fewest interactions (over all parts, on kept items) a kept user has.
        min_item: fewest interactions (over all parts, of kept users) a kept item has.

    Returns:
        The kept ids (ascending, so the order of users and items is preserved) and every part
        restricted to them, with compact ids.

    Raises:
        ValueError: no parts, parts of different shapes, or a parameter that is not a positive
            integer (the message names it).
    """
    if len(parts) == 0:
        raise ValueError("parts must hold at least one matrix")
    shape = parts[0].shape
    for k, p in enumerate(parts):
        if p.shape != shape:
            raise ValueError(f"parts[{k}] has shape {p.shape}, parts[0] has {shape}")
    _positive_int(top_items, "top_items", allow_none=True)
    _positive_int(min_user, "min_user")
    _positive_int(min_item, "min_item")
    n_users, n_items = shape
    full = sp.csr_matrix(shape, dtype=np.float64)
    for p in parts:
        b = sp.csr_matrix(p, dtype=np.float64, copy=True)
        b.eliminate_zeros()
        b.data[:] = 1.0
        full = full + b
    full.data[:] = 1.0  # a pair present in two parts counts once
    item_count = np.asarray(full.sum(axis=0)).ravel()
    items = np.arange(n_items)
    if top_items is not None and top_items < n_items:
        order = np.lexsort((items, -item_count))  # count descending, then id ascending
        items = np.sort(order[:top_items])
    users = np.arange(n_users)
    sub = full[:, items].tocsr()
    rounds = 0
    while True:
        rounds += 1
        u_ok = np.asarray(sub.sum(axis=1)).ravel() >= min_user
        sub, users = sub[u_ok].tocsc(), users[u_ok]
        i_ok = np.asarray(sub.sum(axis=0)).ravel() >= min_item
        sub, items = sub[:, i_ok].tocsr(), items[i_ok]
        if u_ok.all() and i_ok.all():
            break
    kept = tuple(sp.csr_matrix(p)[users][:, items].tocsr() for p in parts)
    return CoreSubset(users=users, items=items, parts=kept, rounds=rounds)
