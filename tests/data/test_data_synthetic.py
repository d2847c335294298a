"""The synthetic generators: deterministic, well-formed, fast, and carrying signal."""

from __future__ import annotations

import numpy as np
import pytest

from fedgraphrec.data.synthetic import synthetic_interactions, synthetic_ratings


def test_interactions_deterministic_by_seed() -> None:
    a = synthetic_interactions(300, 400, seed=7, valid_fraction=0.1)
    b = synthetic_interactions(300, 400, seed=7, valid_fraction=0.1)
    c = synthetic_interactions(300, 400, seed=8, valid_fraction=0.1)
    assert a.valid is not None and b.valid is not None
    assert (a.train != b.train).nnz == 0 and (a.test != b.test).nnz == 0 and (a.valid != b.valid).nnz == 0
    assert (a.train != c.train).nnz > 0


def test_interactions_shape_and_guarantees() -> None:
    d = synthetic_interactions(500, 800, mean_degree=15, seed=1, test_fraction=0.2, valid_fraction=0.1)
    assert (d.n_users, d.n_items) == (500, 800)
    assert d.user_degrees().min() >= 2
    assert d.valid is not None
    assert d.train.multiply(d.test).nnz == 0 and d.train.multiply(d.valid).nnz == 0
    assert d.valid.multiply(d.test).nnz == 0
    assert (np.diff(d.test.indptr) >= 1).all()
    total = d.train.nnz + d.test.nnz + d.valid.nnz
    assert 12 * 500 < total < 20 * 500
    pop = np.sort(d.item_degrees())[::-1]
    assert pop[: len(pop) // 10].sum() > 0.3 * pop.sum()  # heavy head: power-law popularity


def test_interactions_density_option() -> None:
    d = synthetic_interactions(200, 1000, density=0.02, seed=0, test_fraction=0.0)
    assert d.test.nnz == 0
    assert 0.015 < d.train.nnz / (200 * 1000) < 0.03
    with pytest.raises(ValueError):
        synthetic_interactions(10, 10, density=0.1, mean_degree=3)


def test_interactions_have_topic_signal() -> None:
    d = synthetic_interactions(400, 600, seed=3, n_topics=8)
    u, i = d.train_pairs()
    same = (np.asarray(d.info["user_topic"])[u] == np.asarray(d.info["item_topic"])[i]).mean()
    assert same > 0.3  # 1/8 would mean no signal


def test_ratings_deterministic_and_well_formed() -> None:
    a = synthetic_ratings(300, 400, seed=2)
    b = synthetic_ratings(300, 400, seed=2)
    assert np.array_equal(a.train.ratings, b.train.ratings)
    assert np.array_equal(a.train.users, b.train.users)
    assert a.social is not None and b.social is not None
    assert np.array_equal(a.social.src, b.social.src)
    values = np.concatenate([a.train.ratings, a.test.ratings])
    assert set(np.unique(values).tolist()) == {1.0, 2.0, 3.0, 4.0, 5.0}
    assert a.rating_range == (1.0, 5.0)
    assert a.tags is not None and a.tags.n_tags == 8 and a.tags.items.max() < 400
    assert (a.social.src != a.social.dst).all() and a.social.n_users == 300
    keys = {
        s: set(zip(x.users.tolist(), x.items.tolist(), strict=True))
        for s, x in (("tr", a.train), ("te", a.test))
    }
    assert not (keys["tr"] & keys["te"])


def test_ratings_optional_side_information() -> None:
    r = synthetic_ratings(50, 60, seed=0, social=False, tags=False)
    assert r.social is None and r.tags is None


def test_ratings_are_learnable() -> None:
    r = synthetic_ratings(400, 500, seed=4)
    ut = np.asarray(r.info["user_topic"])
    it = np.asarray(r.info["item_topic"])
    same = ut[r.train.users] == it[r.train.items]
    assert r.train.ratings[same].mean() > r.train.ratings[~same].mean() + 0.3
