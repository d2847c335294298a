"""Seeded per-user splits of interactions and ratings.

Every split here is *per user*: each user's rows are shuffled with a named child stream of the
seed and cut by the requested fractions, so every user keeps the same share of train, validation
and test data (the usual protocol for the LightGCN-style benchmarks). The same input rows in the
same order and the same seed always give the same split.

Rounding rule: a user with ``n`` rows gets ``round_half_up(n * f_test)`` test rows and
``round_half_up(n * f_valid)`` validation rows, then, if fewer than ``min_train`` rows would remain
for training, validation rows and then test rows go back to train until ``min_train`` remain (or
the user has no other rows). So a user with a single row always keeps it for training.
"""

from __future__ import annotations

import dataclasses
from typing import overload

import numpy as np
import scipy.sparse as sp

from fedgraphrec.data._arrays import sorted_unique
from fedgraphrec.data.types import Interactions, Ratings, RatingSplit, binary_csr
from fedgraphrec.seeding import numpy_rng

TRAIN, VALID, TEST = 0, 1, 2
"""Labels returned by :func:`per_user_split`."""

DEFAULT_FRACTIONS: tuple[float, float, float] = (0.8, 0.1, 0.1)

SPLIT_STREAM = "data.split"
CARVE_STREAM = "data.carve_validation"
SAMPLE_STREAM = "data.sample_users"


def _check_fractions(fractions: tuple[float, float, float]) -> tuple[float, float, float]:
    if len(fractions) != 3 or any(f < 0 for f in fractions):
        raise ValueError(f"fractions must be three non-negative numbers, got {fractions}")
    if abs(sum(fractions) - 1.0) > 1e-9:
        raise ValueError(f"fractions must sum to 1, got {fractions} (sum {sum(fractions)})")
    if fractions[0] <= 0:
        raise ValueError("the train fraction must be positive")
    return (float(fractions[0]), float(fractions[1]), float(fractions[2]))


def per_user_split(
    users: np.ndarray,
    fractions: tuple[float, float, float] = DEFAULT_FRACTIONS,
    seed: int = 0,
    *,
    min_train: int = 1,
    stream: str = SPLIT_STREAM,
) -> np.ndarray:
    """Label every row as train, validation or test, per user.

    Args:
        users: user id of every row (non-negative integers).
        fractions: (train, valid, test) shares; they must sum to 1.
        seed: run seed.
        min_train: rows each user keeps for training when it has that many.
        stream: name of the random stream (a different name gives an independent split).

    Returns:
        An int8 array of :data:`TRAIN`/:data:`VALID`/:data:`TEST`, one per row.
    """
    _, f_valid, f_test = _check_fractions(fractions)
    users = np.asarray(users, dtype=np.int64)
    n = len(users)
    labels = np.full(n, TRAIN, dtype=np.int8)
    if n == 0:
        return labels
    rng = numpy_rng(seed, stream)
    shuffled = rng.permutation(n)
    order = shuffled[np.argsort(users[shuffled], kind="stable")]
    grouped = users[order]
    counts = np.bincount(grouped)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.arange(n) - first[grouped]
    n_test = np.floor(counts * f_test + 0.5).astype(np.int64)
    n_valid = np.floor(counts * f_valid + 0.5).astype(np.int64)
    keep = np.minimum(counts, min_train)
    excess = np.maximum(n_test + n_valid - (counts - keep), 0)
    take_valid = np.minimum(excess, n_valid)
    n_valid -= take_valid
    n_test -= excess - take_valid
    row_test = n_test[grouped]
    row_valid = n_valid[grouped]
    labels[order[rank < row_test]] = TEST
    labels[order[(rank >= row_test) & (rank < row_test + row_valid)]] = VALID
    return labels


def unique_pairs(users: np.ndarray, items: np.ndarray, n_items: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (user, item) pairs, sorted by user then item."""
    key = sorted_unique(np.asarray(users, dtype=np.int64) * n_items + np.asarray(items, dtype=np.int64))
    return key // n_items, key % n_items


def split_interactions(
    users: np.ndarray,
    items: np.ndarray,
    n_users: int,
    n_items: int,
    *,
    name: str,
    fractions: tuple[float, float, float] = DEFAULT_FRACTIONS,
    seed: int = 0,
    info: dict[str, object] | None = None,
) -> Interactions:
    """Split implicit (user, item) pairs per user into an :class:`Interactions`.

    Duplicate pairs are collapsed first, so a pair can never land in both train and test. The
    validation matrix is ``None`` when the validation fraction is 0.
    """
    fr = _check_fractions(fractions)
    u, i = unique_pairs(users, items, n_items)
    labels = per_user_split(u, fr, seed)

    def part(label: int) -> sp.csr_matrix:
        m = labels == label
        return binary_csr(u[m], i[m], n_users, n_items)

    meta = dict(info or {})
    meta.update({"split": "per-user", "fractions": fr, "split_seed": seed})
    return Interactions(
        name=name,
        n_users=n_users,
        n_items=n_items,
        train=part(TRAIN),
        test=part(TEST),
        valid=part(VALID) if fr[1] > 0 else None,
        info=meta,
    )


def split_ratings(
    users: np.ndarray,
    items: np.ndarray,
    ratings: np.ndarray,
    *,
    fractions: tuple[float, float, float] = DEFAULT_FRACTIONS,
    seed: int = 0,
) -> tuple[RatingSplit, RatingSplit | None, RatingSplit]:
    """Split rating rows per user into (train, valid, test); valid is ``None`` for a 0 fraction.

    Rows keep their input order within each part.
    """
    fr = _check_fractions(fractions)
    labels = per_user_split(users, fr, seed)

    def part(label: int) -> RatingSplit:
        m = labels == label
        return RatingSplit(users[m], items[m], ratings[m])

    return part(TRAIN), (part(VALID) if fr[1] > 0 else None), part(TEST)


def _concat(a: RatingSplit | None, b: RatingSplit) -> RatingSplit:
    if a is None:
        return b
    return RatingSplit(
        np.concatenate([a.users, b.users]),
        np.concatenate([a.items, b.items]),
        np.concatenate([a.ratings, b.ratings]),
    )


@overload
def carve_validation(data: Interactions, fraction: float, seed: int = 0) -> Interactions: ...


@overload
def carve_validation(data: Ratings, fraction: float, seed: int = 0) -> Ratings: ...


def carve_validation(data: Interactions | Ratings, fraction: float, seed: int = 0) -> Interactions | Ratings:
    """Move a seeded per-user ``fraction`` of the training data into the validation split.

    The test split is untouched and every user keeps at least one training row. If ``data``
    already has a validation split, the carved rows are added to it. The rounding rule is the
    module's (round half up, at least one training row per user).

    Args:
        data: an :class:`Interactions` or :class:`Ratings`.
        fraction: share of each user's training rows to move, in ``[0, 1)``.
        seed: run seed (stream ``data.carve_validation``).

    Returns:
        A new object of the same type; ``info["valid_carved"]`` records the fraction, seed and count.
    """
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"validation fraction must be in [0, 1), got {fraction}")
    if fraction == 0.0:
        return data
    if isinstance(data, Interactions):
        u, i = data.train_pairs()
        labels = per_user_split(u, (1.0 - fraction, fraction, 0.0), seed, stream=CARVE_STREAM)
        moved = labels == VALID
        train = binary_csr(u[~moved], i[~moved], data.n_users, data.n_items)
        valid = binary_csr(u[moved], i[moved], data.n_users, data.n_items)
        if data.valid is not None:
            valid = (valid + data.valid).tocsr()
            valid.data[:] = 1.0
        info = {**data.info, "valid_carved": {"fraction": fraction, "seed": seed, "moved": int(moved.sum())}}
        return dataclasses.replace(data, train=train, valid=valid, info=info)
    tr = data.train
    labels = per_user_split(tr.users, (1.0 - fraction, fraction, 0.0), seed, stream=CARVE_STREAM)
    moved = labels == VALID
    new_train = RatingSplit(tr.users[~moved], tr.items[~moved], tr.ratings[~moved])
    carved = RatingSplit(tr.users[moved], tr.items[moved], tr.ratings[moved])
    info = {**data.info, "valid_carved": {"fraction": fraction, "seed": seed, "moved": int(moved.sum())}}
    return dataclasses.replace(data, train=new_train, valid=_concat(data.valid, carved), info=info)


def sample_users(data: Interactions, fraction: float, seed: int = 0) -> Interactions:
    """Keep a seeded ``fraction`` of the users (their train, valid and test rows) and compact ids.

    Used to fit a large benchmark (Gowalla, Yelp2018) into a CPU budget while keeping its own
    train/test split: each kept user keeps every row it had. Items no kept user trains on are
    dropped (a model could never learn them), with their held-out pairs; users left without a
    training row are dropped too. ``user_ids``/``item_ids`` map back to the input's indices.

    Args:
        data: the full dataset.
        fraction: share of users to keep, in ``(0, 1]``; ``round(fraction * n_users)`` (at least
            one) users are drawn without replacement.
        seed: stream ``data.sample_users`` of this seed draws the users.

    Returns:
        A new :class:`Interactions`; ``info["user_sample"]`` records the fraction, seed and the
        users, items and held-out pairs kept or dropped.

    Raises:
        ValueError: ``fraction`` outside ``(0, 1]``.
    """
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"user_fraction must be in (0, 1], got {fraction}")
    if fraction == 1.0:
        return data
    n_keep = max(1, round(fraction * data.n_users))
    rng = numpy_rng(seed, SAMPLE_STREAM)
    users = np.sort(rng.choice(data.n_users, size=n_keep, replace=False))
    train = data.train[users]
    users = users[np.diff(train.indptr) > 0]
    train = data.train[users]
    items = np.flatnonzero(np.asarray(train.sum(axis=0)).ravel() > 0)

    def take(m: sp.csr_matrix | None) -> sp.csr_matrix | None:
        return None if m is None else m[users][:, items].tocsr()

    test = take(data.test)
    valid = take(data.valid)
    held_before = int(data.test[users].nnz) + (0 if data.valid is None else int(data.valid[users].nnz))
    held_after = int(test.nnz) + (0 if valid is None else int(valid.nnz))  # type: ignore[union-attr]
    base_users = data.user_ids if data.user_ids is not None else np.arange(data.n_users)
    base_items = data.item_ids if data.item_ids is not None else np.arange(data.n_items)
    info = {
        **data.info,
        "user_sample": {
            "fraction": fraction,
            "seed": seed,
            "users": len(users),
            "of_users": data.n_users,
            "items": len(items),
            "of_items": data.n_items,
            "dropped_heldout_pairs": held_before - held_after,
        },
    }
    return dataclasses.replace(
        data,
        n_users=len(users),
        n_items=len(items),
        train=train[:, items].tocsr(),
        test=test,
        valid=valid,
        user_ids=np.asarray(base_users)[users],
        item_ids=np.asarray(base_items)[items],
        info=info,
    )
