"""Seeded per-user splits and the validation carve-out."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgraphrec.data.splits import (
    TEST,
    TRAIN,
    VALID,
    carve_validation,
    per_user_split,
    sample_users,
    split_interactions,
    split_ratings,
)
from fedgraphrec.data.synthetic import synthetic_interactions, synthetic_ratings
from fedgraphrec.data.types import Interactions


def _pairs(m: object) -> set[tuple[int, int]]:
    coo = m.tocoo()  # type: ignore[attr-defined]
    return set(zip(coo.row.tolist(), coo.col.tolist(), strict=True))


def test_per_user_split_counts_and_determinism() -> None:
    users = np.repeat(np.arange(4), [1, 2, 10, 20])
    a = per_user_split(users, (0.8, 0.1, 0.1), seed=5)
    b = per_user_split(users, (0.8, 0.1, 0.1), seed=5)
    c = per_user_split(users, (0.8, 0.1, 0.1), seed=6)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)
    for u, (n_valid, n_test) in enumerate([(0, 0), (0, 0), (1, 1), (2, 2)]):
        lab = a[users == u]
        assert (lab == VALID).sum() == n_valid and (lab == TEST).sum() == n_test


def test_named_streams_are_independent() -> None:
    users = np.repeat(np.arange(50), 10)
    a = per_user_split(users, (0.8, 0.1, 0.1), seed=1, stream="x")
    b = per_user_split(users, (0.8, 0.1, 0.1), seed=1, stream="y")
    assert not np.array_equal(a, b)


@pytest.mark.parametrize("fractions", [(0.5, 0.5), (0.8, 0.3, -0.1), (0.7, 0.1, 0.1), (0.0, 0.5, 0.5)])
def test_bad_fractions(fractions: tuple[float, ...]) -> None:
    with pytest.raises(ValueError):
        per_user_split(np.zeros(3, dtype=np.int64), fractions, seed=0)  # type: ignore[arg-type]


@settings(max_examples=50, deadline=None)
@given(
    degrees=st.lists(st.integers(1, 30), min_size=1, max_size=30),
    f_valid=st.sampled_from([0.0, 0.1, 0.25]),
    f_test=st.sampled_from([0.1, 0.2, 0.5]),
    seed=st.integers(0, 2**31),
)
def test_every_user_keeps_a_train_row(degrees: list[int], f_valid: float, f_test: float, seed: int) -> None:
    users = np.repeat(np.arange(len(degrees)), degrees)
    labels = per_user_split(users, (1 - f_valid - f_test, f_valid, f_test), seed)
    train_per_user = np.bincount(users[labels == TRAIN], minlength=len(degrees))
    assert (train_per_user >= 1).all()
    assert len(labels) == len(users)


def test_split_interactions_disjoint_and_complete() -> None:
    rng = np.random.default_rng(0)
    users = rng.integers(0, 30, 2000)
    items = rng.integers(0, 50, 2000)
    d = split_interactions(users, items, 30, 50, name="x", seed=4)
    e = split_interactions(users, items, 30, 50, name="x", seed=4)
    assert d.valid is not None and e.valid is not None
    tr, va, te = _pairs(d.train), _pairs(d.valid), _pairs(d.test)
    assert not (tr & va) and not (tr & te) and not (va & te)
    assert tr | va | te == set(zip(users.tolist(), items.tolist(), strict=True))
    assert tr == _pairs(e.train) and te == _pairs(e.test)
    no_valid = split_interactions(users, items, 30, 50, name="x", fractions=(0.8, 0.0, 0.2))
    assert no_valid.valid is None


def test_split_ratings_partition() -> None:
    r = synthetic_ratings(100, 80, seed=2, fractions=(1.0, 0.0, 0.0))
    users, items, ratings = r.train.users, r.train.items, r.train.ratings
    tr, va, te = split_ratings(users, items, ratings, seed=1)
    assert va is not None
    assert len(tr) + len(va) + len(te) == len(users)
    keys = [set(zip(s.users.tolist(), s.items.tolist(), strict=True)) for s in (tr, va, te)]
    assert not (keys[0] & keys[1]) and not (keys[0] & keys[2]) and not (keys[1] & keys[2])


def test_carve_validation_interactions() -> None:
    d = synthetic_interactions(200, 300, seed=1)
    c = carve_validation(d, 0.1, seed=3)
    assert isinstance(c, Interactions) and c.valid is not None
    assert _pairs(c.test) == _pairs(d.test)
    assert _pairs(c.train) | _pairs(c.valid) == _pairs(d.train)
    assert not (_pairs(c.train) & _pairs(c.valid))
    assert (c.user_degrees() >= 1).all()
    again = carve_validation(d, 0.1, seed=3)
    assert again.valid is not None and _pairs(again.valid) == _pairs(c.valid)
    assert c.info["valid_carved"] == {"fraction": 0.1, "seed": 3, "moved": c.valid.nnz}
    assert carve_validation(d, 0.0, seed=3) is d
    with pytest.raises(ValueError):
        carve_validation(d, 1.0, seed=3)


def test_carve_validation_adds_to_existing_valid() -> None:
    d = synthetic_interactions(100, 200, seed=1, valid_fraction=0.1)
    assert d.valid is not None
    c = carve_validation(d, 0.2, seed=0)
    assert c.valid is not None
    assert _pairs(d.valid) <= _pairs(c.valid)
    assert c.valid.nnz + c.train.nnz == d.valid.nnz + d.train.nnz


def test_carve_validation_ratings() -> None:
    r = synthetic_ratings(100, 150, seed=1, fractions=(0.9, 0.0, 0.1))
    assert r.valid is None
    c = carve_validation(r, 0.2, seed=1)
    assert c.valid is not None
    assert len(c.train) + len(c.valid) == len(r.train)
    assert np.array_equal(c.test.users, r.test.users)
    assert set(np.unique(c.train.users).tolist()) == set(np.unique(r.train.users).tolist())


def test_sample_users_keeps_whole_users_and_their_trained_items() -> None:
    data = synthetic_interactions(200, 300, seed=3, valid_fraction=0.1)
    a = sample_users(data, 0.25, seed=4)
    b = sample_users(data, 0.25, seed=4)
    assert a.n_users == 50 and a.n_users == b.n_users
    assert (a.user_ids == b.user_ids).all() and (a.item_ids == b.item_ids).all()
    assert a.user_ids is not None and a.item_ids is not None
    assert sample_users(data, 0.25, seed=5).user_ids.tolist() != a.user_ids.tolist()  # type: ignore[union-attr]
    # every kept item has a training interaction; ids are compact
    assert (np.asarray(a.train.sum(axis=0)).ravel() > 0).all()
    assert a.train.shape == (a.n_users, a.n_items) == a.test.shape
    # each kept user keeps every train row; held-out rows survive unless their item left
    for k, u in enumerate(a.user_ids.tolist()):
        orig = {int(a.item_ids[j]) for j in a.train[k].indices}
        assert orig == set(data.train[u].indices.tolist())
        kept_test = {int(a.item_ids[j]) for j in a.test[k].indices}
        assert kept_test == set(data.test[u].indices.tolist()) & set(a.item_ids.tolist())
    dropped = a.info["user_sample"]["dropped_heldout_pairs"]  # type: ignore[index]
    before = data.test[a.user_ids].nnz + data.valid[a.user_ids].nnz  # type: ignore[index]
    assert before - a.test.nnz - a.valid.nnz == dropped  # type: ignore[union-attr]


@pytest.mark.parametrize("fraction", [0.0, -0.1, 1.5])
def test_sample_users_rejects_bad_fraction(fraction: float) -> None:
    with pytest.raises(ValueError, match="user_fraction"):
        sample_users(synthetic_interactions(20, 30, seed=0), fraction)


def test_sample_users_whole_population_is_identity() -> None:
    data = synthetic_interactions(20, 30, seed=0)
    assert sample_users(data, 1.0) is data
