"""Bulk lookups of small non-negative integer ids, the per-minibatch work of an LP-GCN shard.

A shard looks up a few thousand ids per stage (the minibatch's users, items and (user, item)
pairs) in static sets built at set-up. Sorting and binary search cost a few hundred microseconds
per call at that size, more than the stage's sparse products on a small graph (issue #33's
ML-100K profile), while a dense table indexed by id answers in a few microseconds. The dense
tables here hold one entry per possible id (or pair, while the grid is small); larger pair grids
fall back to a sorted search. Ids outside the table (including negative ones a lying server could
send) are absent, never wrapped around. Tokens (random 64-bit words) are found by hashing
(:class:`WordIndex`), and rows are grouped by radix passes (:func:`grouped_order`): on fresh data a
binary search or a comparison sort mispredicts about every other branch.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "DENSE_PAIRS",
    "IdIndex",
    "PairIndex",
    "WordIndex",
    "distinct",
    "grouped_order",
    "in_first_order",
    "pair_groups",
    "ranks",
    "unique_pairs",
]

DENSE_PAIRS = 1 << 24
"""Largest (rows x columns) grid a :class:`PairIndex` keeps as a dense table (64 MiB of int32)."""


def _ints(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def distinct(values: np.ndarray, size: int) -> np.ndarray:
    """The sorted distinct values of ``values``, all in ``[0, size)`` (``np.unique``, by a mask)."""
    values = _ints(values)
    if len(values) and (values.min() < 0 or values.max() >= size):
        raise ValueError(f"an id is outside [0, {size})")
    mask = np.zeros(size, dtype=bool)
    mask[values] = True
    return np.flatnonzero(mask)


def ranks(sorted_distinct: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Position of every value in ``sorted_distinct`` (all present; ``np.searchsorted``, by a table)."""
    table = np.full(size, -1, dtype=np.int64)
    table[sorted_distinct] = np.arange(len(sorted_distinct))
    out = table[_ints(values)]
    if len(out) and out.min() < 0:
        raise ValueError("a value is missing from the set it is ranked in")
    return out


def unique_pairs(rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct ``(row, col)`` pairs sorted by row then column, and each pair's rank among them.

    ``np.unique`` of the pairs with ``return_inverse``, by :func:`grouped_order` (NumPy 2.4's hash
    path is slow for int64 keys).
    """
    rows, cols = _ints(rows), _ints(cols)
    order, first = pair_groups(rows, cols)
    inverse = np.empty(len(rows), dtype=np.int64)
    inverse[order] = np.cumsum(first) - 1
    return rows[order][first], cols[order][first], inverse


def pair_groups(major: np.ndarray, minor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`grouped_order` and, in that order, whether each row starts a new ``(major, minor)`` group."""
    order = grouped_order(major, minor)
    a, b = major[order], minor[order]
    first = np.ones(len(order), dtype=bool)
    np.not_equal(a[1:], a[:-1], out=first[1:])
    first[1:] |= b[1:] != b[:-1]
    return order, first


def grouped_order(major: np.ndarray, minor: np.ndarray) -> np.ndarray:
    """The stable order that sorts rows by ``(major, minor)``, both non-negative ids.

    Ids below 2^16 take two 16-bit radix passes (minor, then major), several times faster than a
    comparison sort of combined 64-bit keys; larger ids fall back to ``np.lexsort``.
    """
    major, minor = _ints(major), _ints(minor)
    if len(major) and (min(major.min(), minor.min()) < 0):
        raise ValueError("grouped_order takes non-negative ids")
    if len(major) and max(major.max(), minor.max()) < 1 << 16:
        order = np.argsort(minor.astype(np.uint16), kind="stable")
        return order[np.argsort(major[order].astype(np.uint16), kind="stable")]
    return np.lexsort((minor, major))


def in_first_order(values: np.ndarray) -> np.ndarray:
    """The distinct values, in the order of their first occurrence."""
    _, first = np.unique(values, return_index=True)
    return values[np.sort(first)]


class IdIndex:
    """Position of each id among a static array of non-negative ids (the first occurrence wins).

    Args:
        ids: the ids (non-negative integers); position ``k`` is ``ids[k]``.
    """

    def __init__(self, ids: np.ndarray) -> None:
        ids = _ints(ids)
        if len(ids) and ids.min() < 0:
            raise ValueError("ids must be non-negative")
        self._table = np.full(int(ids.max()) + 1 if len(ids) else 0, -1, dtype=np.int64)
        unique, first = np.unique(ids, return_index=True)
        self._table[unique] = first

    def find(self, want: np.ndarray) -> np.ndarray:
        """Position of every id in ``want`` (``-1`` for ids not in the set)."""
        want = _ints(want)
        n = len(self._table)
        if not n:
            return np.full(len(want), -1, dtype=np.int64)
        if not len(want) or (want.min() >= 0 and want.max() < n):  # the common case: no mask needed
            return self._table[want]
        inside = (want >= 0) & (want < n)
        return np.where(inside, self._table[np.clip(want, 0, n - 1)], -1)


class PairIndex:
    """Position of each (row, column) pair among a static set of pairs (first occurrence wins).

    A dense table while ``n_rows * n_cols`` is at most ``dense_limit`` (:data:`DENSE_PAIRS`); otherwise
    the pairs' int64 keys are sorted once and each query is sorted before the binary search (which then
    walks the table in order).
    """

    def __init__(
        self, rows: np.ndarray, cols: np.ndarray, n_rows: int, n_cols: int, dense_limit: int = DENSE_PAIRS
    ) -> None:
        rows, cols = _ints(rows), _ints(cols)
        self._shape = (int(n_rows), int(n_cols))
        if len(rows) and (rows.min() < 0 or rows.max() >= n_rows or cols.min() < 0 or cols.max() >= n_cols):
            raise ValueError(f"a pair is outside the {n_rows} x {n_cols} grid")
        keys = rows * n_cols + cols
        self._dense = n_rows * n_cols <= dense_limit
        if self._dense:
            self._table = np.full(n_rows * n_cols, -1, dtype=np.int32)
            unique, first = np.unique(keys, return_index=True)
            self._table[unique] = first
        else:
            self._order = np.argsort(keys, kind="stable")
            self._sorted = keys[self._order]

    def find(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Position of every pair ``(rows[k], cols[k])`` (``-1`` for pairs not in the set)."""
        rows, cols = _ints(rows), _ints(cols)
        n_rows, n_cols = self._shape
        if (
            self._dense
            and len(self._table)
            and (not len(rows) or (_within(rows, n_rows) and _within(cols, n_cols)))
        ):
            return self._table[rows * n_cols + cols].astype(np.int64)  # the common case: no mask needed
        inside = (rows >= 0) & (rows < n_rows) & (cols >= 0) & (cols < n_cols)
        keys = np.where(inside, rows * n_cols + cols, 0)
        if self._dense:
            if not len(self._table):
                return np.full(len(keys), -1, dtype=np.int64)
            return np.where(inside, self._table[keys], -1).astype(np.int64)
        if not len(self._sorted):
            return np.full(len(keys), -1, dtype=np.int64)
        by = np.argsort(keys)
        at = np.empty(len(keys), dtype=np.int64)
        at[by] = np.searchsorted(self._sorted, keys[by])
        at = at.clip(max=len(self._sorted) - 1)
        return np.where(inside & (self._sorted[at] == keys), self._order[at], -1)


_FIBONACCI = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio: multiplicative hashing's constant


class WordIndex:
    """Position of each of a set of distinct 64-bit words (e.g. a token's first 8 bytes), by hashing.

    An open-addressing table (linear probing, at most 1/16 full) over the words' multiplicative hash.
    A binary search of fresh queries mispredicts about every other branch (≈ 200 µs for a few
    thousand queries on a small set, 4x a repeated query's time); the table's bulk probe is a few
    branch-free vectorised passes. Words of small ids and random tokens alike spread over it.

    Args:
        words: distinct ``uint64`` words; position ``k`` is ``words[k]``.
    """

    def __init__(self, words: np.ndarray) -> None:
        words = np.asarray(words, dtype=np.uint64)
        if len(np.unique(words)) != len(words):
            raise ValueError("WordIndex takes distinct words")
        bits = len(words).bit_length() + 4
        self._shift, self._mask = np.uint64(64 - bits), (1 << bits) - 1
        self._words = words
        self._table = np.full(1 << bits, -1, dtype=np.int32 if len(words) < 1 << 31 else np.int64)
        slot = self._slots(words)
        pending = np.arange(len(words))
        while len(pending):  # each pass gives every free slot its lowest-numbered claimant
            at = slot[pending]
            free = self._table[at] < 0
            taken, first = np.unique(at[free], return_index=True)
            self._table[taken] = pending[free][first]
            pending = pending[self._table[at] != pending]
            slot[pending] = (slot[pending] + 1) & self._mask

    def _slots(self, words: np.ndarray) -> np.ndarray:
        return ((words * _FIBONACCI) >> self._shift).astype(np.int64)

    def find(self, words: np.ndarray) -> np.ndarray:
        """Position of every word (``-1`` for words not in the set)."""
        words = np.asarray(words, dtype=np.uint64)
        if not len(self._words):
            return np.full(len(words), -1, dtype=np.int64)
        slot = self._slots(words)
        pos = self._table[slot]
        used = pos >= 0
        hit = used & (self._words[np.maximum(pos, 0)] == words)
        out = np.where(hit, pos, -1)
        todo = np.flatnonzero(used & ~hit)  # a slot held by another word: probe on
        while len(todo):  # until the word or an empty slot
            slot[todo] = (slot[todo] + 1) & self._mask
            pos = self._table[slot[todo]]
            hit = (pos >= 0) & (self._words[np.maximum(pos, 0)] == words[todo])
            out[todo[hit]] = pos[hit]
            todo = todo[(pos >= 0) & ~hit]
        return out.astype(np.int64, copy=False)


def _within(values: np.ndarray, size: int) -> bool:
    return bool(values.min() >= 0 and values.max() < size)
