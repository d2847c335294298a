"""``dense_core``: top-N items then an iterated k-core, deterministic, compact ids, no stray test item."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from fedgraphrec.data.filters import dense_core


def _random_parts(seed: int = 0) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """A 60 × 40 train matrix with skewed item popularity and a disjoint test matrix."""
    rng = np.random.default_rng(seed)
    pop = 1.0 / np.arange(1, 41) ** 0.8
    full = rng.random((60, 40)) < np.clip(0.9 * pop / pop.max(), 0.02, 1.0)
    test_mask = full & (rng.random((60, 40)) < 0.2)
    return sp.csr_matrix(full & ~test_mask, dtype=np.float64), sp.csr_matrix(test_mask, dtype=np.float64)


def test_top_items_are_the_most_interacted_with_ties_to_the_lower_id() -> None:
    # item counts over both parts: item 2 → 3, items 0, 1 and 4 → 2, item 3 → 1
    train = sp.csr_matrix(np.array([[1, 1, 1, 0, 0], [1, 0, 1, 1, 1], [0, 0, 0, 0, 0]], dtype=float))
    test = sp.csr_matrix(np.array([[0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 1, 1, 0, 1]], dtype=float))
    sub = dense_core([train, test], top_items=3)
    assert sub.items.tolist() == [0, 1, 2]  # 2 (count 3), then 0 and 1 win the tie with 4
    assert sub.users.tolist() == [0, 1, 2]
    assert sub.parts[0].shape == (3, 3)
    assert sub.parts[1].toarray().tolist() == [[0, 0, 0], [0, 0, 0], [0, 1, 1]]


def test_the_core_is_iterated_until_every_kept_user_and_item_has_enough() -> None:
    train, test = _random_parts()
    sub = dense_core([train, test], top_items=30, min_user=5, min_item=4)
    both = (sub.parts[0] + sub.parts[1]).tocsr()
    assert len(sub.items) <= 30
    assert np.asarray((both > 0).sum(axis=1)).min() >= 5
    assert np.asarray((both > 0).sum(axis=0)).min() >= 4
    assert sub.rounds >= 1
    # compact ids: kept ids are ascending originals; the parts are exactly the original rows/columns
    assert np.all(np.diff(sub.users) > 0) and np.all(np.diff(sub.items) > 0)
    for new, old in zip(sub.parts, (train, test), strict=True):
        assert new.shape == (len(sub.users), len(sub.items))
        assert (new != old[sub.users][:, sub.items]).nnz == 0
    # no test pair survives on an item outside the kept set
    dropped = np.setdiff1d(np.arange(40), sub.items)
    assert sub.parts[1].nnz == test[sub.users][:, sub.items].nnz
    assert sub.parts[1].nnz + test[sub.users][:, dropped].nnz == test[sub.users].nnz


def test_dense_core_is_deterministic_and_a_pair_in_two_parts_counts_once() -> None:
    train, test = _random_parts(3)
    a = dense_core([train, test], top_items=25, min_user=3, min_item=3)
    b = dense_core([train.copy(), test.copy()], top_items=25, min_user=3, min_item=3)
    assert np.array_equal(a.users, b.users) and np.array_equal(a.items, b.items)
    assert a.n_interactions == b.n_interactions
    one = sp.csr_matrix(np.array([[1.0, 1.0]]))
    assert dense_core([one, one], min_item=2).items.size == 0  # item counts are 1, not 2


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"top_items": 0}, "top_items"),
        ({"min_user": 0}, "min_user"),
        ({"min_item": 1.5}, "min_item"),
        ({"top_items": True}, "top_items"),
    ],
)
def test_bad_parameters_name_themselves(kwargs: dict[str, object], name: str) -> None:
    train, test = _random_parts()
    with pytest.raises(ValueError, match=name):
        dense_core([train, test], **kwargs)  # type: ignore[arg-type]


def test_parts_must_exist_and_agree_in_shape() -> None:
    with pytest.raises(ValueError, match="parts"):
        dense_core([])
    with pytest.raises(ValueError, match=r"parts\[1\]"):
        dense_core([sp.csr_matrix((3, 4)), sp.csr_matrix((3, 5))])


def test_core_subset_of_a_ratings_dataset_keeps_side_information_aligned() -> None:
    """A derived dataset: ratings, social links and tags follow the kept users and items (compact ids)."""
    from fedgraphrec.data.derived import core_subset
    from fedgraphrec.data.registry import load_dataset
    from fedgraphrec.data.types import Ratings

    base = load_dataset("synthetic-ratings")
    assert isinstance(base, Ratings) and base.social is not None and base.tags is not None
    sub = core_subset(base, "tiny-core", {"top_items": 60, "min_user": 3, "min_item": 2})
    users, items = sub.info["base_user_ids"], sub.info["base_item_ids"]
    assert isinstance(users, np.ndarray) and isinstance(items, np.ndarray)
    assert (sub.n_users, sub.n_items) == (len(users), len(items)) and sub.n_items <= 60
    # every kept rating is a base rating of the original ids, and none of a kept pair is lost
    base_pairs = {(u, i) for s in (base.train, base.test) for u, i in zip(s.users, s.items, strict=True)}
    kept = {
        (users[u], items[i]) for s in (sub.train, sub.test) for u, i in zip(s.users, s.items, strict=True)
    }
    assert kept <= base_pairs
    assert kept == {(u, i) for u, i in base_pairs if u in set(users) and i in set(items)} - (
        {(u, i) for u, i in zip(base.valid.users, base.valid.items, strict=True)} if base.valid else set()
    )
    assert sub.social is not None and sub.social.src.max() < sub.n_users
    links = {(users[a], users[b]) for a, b in zip(sub.social.src, sub.social.dst, strict=True)}
    assert links <= set(zip(base.social.src.tolist(), base.social.dst.tolist(), strict=True))
    assert sub.tags is not None and np.asarray(sub.tags.matrix().sum(axis=0)).min() > 0
    with pytest.raises(ValueError, match="min_user"):
        core_subset(base, "bad", {"min_user": 0})
    with pytest.raises(ValueError, match="unknown filter keys"):
        core_subset(base, "bad", {"min_users": 3})
