"""The LP-GCN shard's dense lookups equal a plain dictionary, for ids a lying server could send too."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgraphrec.protocols.lpgcn import lookup
from fedgraphrec.protocols.lpgcn.lookup import (
    IdIndex,
    PairIndex,
    WordIndex,
    distinct,
    grouped_order,
    ranks,
    unique_pairs,
)

ids = st.lists(st.integers(0, 40), max_size=30)
queries = st.lists(st.integers(-50, 60), max_size=30)


@given(ids, queries)
@settings(max_examples=200, deadline=None)
def test_id_index_is_the_first_position_of_each_id(keys: list[int], want: list[int]) -> None:
    first: dict[int, int] = {}
    for k, key in enumerate(keys):
        first.setdefault(key, k)
    got = IdIndex(np.array(keys, dtype=np.int64)).find(np.array(want, dtype=np.int64))
    assert got.tolist() == [first.get(w, -1) for w in want]


@pytest.mark.parametrize("dense", [True, False])
@given(pairs=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 9)), max_size=30),
       want=st.lists(st.tuples(st.integers(-3, 9), st.integers(-3, 12)), max_size=30))  # fmt: skip
@settings(max_examples=200, deadline=None)
def test_pair_index_is_the_first_position_of_each_pair(
    dense: bool, pairs: list[tuple[int, int]], want: list[tuple[int, int]]
) -> None:
    first: dict[tuple[int, int], int] = {}
    for k, pair in enumerate(pairs):
        first.setdefault(pair, k)
    rows, cols = (np.array([p[i] for p in pairs], dtype=np.int64) for i in (0, 1))
    index = PairIndex(rows, cols, 7, 10, dense_limit=lookup.DENSE_PAIRS if dense else 0)
    assert index._dense is dense
    w_rows, w_cols = (np.array([p[i] for p in want], dtype=np.int64) for i in (0, 1))
    assert index.find(w_rows, w_cols).tolist() == [first.get(p, -1) for p in want]


def test_distinct_and_ranks_match_unique_and_searchsorted() -> None:
    rng = np.random.default_rng(0)
    values = rng.integers(0, 50, 200)
    d = distinct(values, 50)
    assert d.tolist() == np.unique(values).tolist()
    assert ranks(d, values, 50).tolist() == np.searchsorted(d, values).tolist()
    with pytest.raises(ValueError, match=r"outside \[0, 50\)"):
        distinct(np.array([3, 50]), 50)
    with pytest.raises(ValueError, match="missing"):
        ranks(d[1:], d[:1], 50)


@pytest.mark.parametrize("dense", [True, False])
def test_ids_a_lying_server_sends_outside_the_grid_are_absent_not_wrapped(dense: bool) -> None:
    rows, cols = np.divmod(np.arange(6), 3)  # every pair of a 2 x 3 grid: a wrapped key always hits one
    index = PairIndex(rows, cols, 2, 3, dense_limit=lookup.DENSE_PAIRS if dense else 0)
    got = index.find(np.array([-1, 0, 1, 0, 2]), np.array([0, -1, 1, 3, 0]))
    assert got.tolist() == [-1, -1, 4, -1, -1]
    for row, col in ((-1, 0), (0, -1), (-1, -1)):  # every id below the grid's ends: no fast path either
        assert index.find(np.array([row, 1]), np.array([col, 1])).tolist() == [-1, 4]
    assert IdIndex(np.arange(5)).find(np.array([-1, -5, 4, 5])).tolist() == [-1, -1, 4, -1]
    assert IdIndex(np.arange(5)).find(np.array([-1, 4])).tolist() == [-1, 4]


@pytest.mark.parametrize("top", [9, 70_000])  # 16-bit radix passes, and the lexsort fallback
@given(rows=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), max_size=40))
@settings(max_examples=100, deadline=None)
def test_grouped_order_is_the_stable_sort_by_major_then_minor(top: int, rows: list[tuple[int, int]]) -> None:
    major = np.array([r[0] for r in rows], dtype=np.int64) * (top // 9)
    minor = np.array([r[1] for r in rows], dtype=np.int64) * (top // 9)
    want = sorted(range(len(rows)), key=lambda k: (major[k], minor[k]))  # Python's sort is stable
    assert grouped_order(major, minor).tolist() == want
    with pytest.raises(ValueError, match="non-negative"):
        grouped_order(np.array([0, -1]), np.array([0, 0]))


@pytest.mark.parametrize("top", [9, 70_000])
@given(rows=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), max_size=40))
@settings(max_examples=100, deadline=None)
def test_unique_pairs_are_np_unique_of_the_pairs_with_the_inverse(
    top: int, rows: list[tuple[int, int]]
) -> None:
    r = np.array([p[0] for p in rows], dtype=np.int64) * (top // 9)
    c = np.array([p[1] for p in rows], dtype=np.int64) * (top // 9)
    want, inverse = np.unique(np.stack([r, c], 1).reshape(-1, 2), axis=0, return_inverse=True)
    got_r, got_c, got_inv = unique_pairs(r, c)
    assert got_r.tolist() == want[:, 0].tolist() and got_c.tolist() == want[:, 1].tolist()
    assert got_inv.tolist() == inverse.reshape(-1).tolist()


def _colliding(n: int, bits: int, slot: int) -> list[int]:
    """``n`` distinct words whose multiplicative hash is ``slot`` in a table of ``2**bits`` slots."""
    inverse = pow(int(lookup._FIBONACCI), -1, 1 << 64)
    return [((slot << (64 - bits)) | (k + 1)) * inverse % (1 << 64) for k in range(n)]


@given(
    words=st.lists(st.integers(0, 2**64 - 1), unique=True, max_size=30),
    absent=st.lists(st.integers(0, 2**64 - 1), max_size=10),
    chain=st.integers(0, 12),
)
@settings(max_examples=200, deadline=None)
def test_word_index_is_a_dictionary_even_along_long_probe_chains(
    words: list[int], absent: list[int], chain: int
) -> None:
    bits = (len(words) + chain).bit_length() + 4  # the table size WordIndex picks
    crowded = [w for w in _colliding(chain + 3, bits, 5) if w not in words]
    keys = words + crowded[:chain]
    position = {w: k for k, w in enumerate(keys)}
    index = WordIndex(np.array(keys, dtype=np.uint64))
    queries = keys[::-1] + absent + crowded[chain:]  # present, arbitrary, and absent in the chain's slot
    got = index.find(np.array(queries, dtype=np.uint64))
    assert got.tolist() == [position.get(q, -1) for q in queries]
    with pytest.raises(ValueError, match="distinct"):
        WordIndex(np.array([7, 7], dtype=np.uint64))
