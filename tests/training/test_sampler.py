import numpy as np
import pytest

from fedgraphrec.training.sampler import BPRSampler
from tests.helpers import random_train


@pytest.mark.parametrize("scheme", ["interactions", "users"])
def test_same_seed_same_triples_and_negatives_are_valid(scheme):
    train = random_train(n_users=30, n_items=25, density=0.3, seed=1)
    a = BPRSampler(train, seed=5, scheme=scheme).epoch(3)
    b = BPRSampler(train, seed=5, scheme=scheme).epoch(3)
    for x, y in ((a.users, b.users), (a.pos, b.pos), (a.neg, b.neg)):
        np.testing.assert_array_equal(x, y)
    dense = train.toarray() > 0
    assert len(a) == train.nnz
    assert dense[a.users, a.pos].all(), "positives must be training items"
    assert not dense[a.users, a.neg].any(), "negatives must be outside the user's training items"


def test_epochs_and_seeds_differ():
    train = random_train(n_users=30, n_items=25, density=0.3, seed=1)
    s = BPRSampler(train, seed=5)
    assert not np.array_equal(s.epoch(0).users, s.epoch(1).users)
    assert not np.array_equal(s.epoch(0).neg, BPRSampler(train, seed=6).epoch(0).neg)


def test_interaction_scheme_visits_every_pair_once():
    train = random_train(n_users=30, n_items=25, density=0.3, seed=2)
    t = BPRSampler(train, seed=0, scheme="interactions").epoch(0)
    pairs = sorted(zip(t.users.tolist(), t.pos.tolist(), strict=True))
    coo = train.tocoo()
    assert pairs == sorted(zip(coo.row.tolist(), coo.col.tolist(), strict=True))


def test_negatives_are_uniform_over_non_train_items():
    train = random_train(n_users=4, n_items=6, density=0.4, seed=3)
    s = BPRSampler(train, seed=0)
    counts = np.zeros(train.shape)
    for e in range(400):
        t = s.epoch(e)
        np.add.at(counts, (t.users, t.neg), 1)
    dense = train.toarray() > 0
    for u in range(train.shape[0]):
        row = counts[u][~dense[u]]
        expected = row.sum() / len(row)
        # chi-square style bound: every allowed negative within 25 % of its expected count
        assert np.all(np.abs(row - expected) < 0.25 * expected), (u, row)


def test_batches_cover_epoch_and_validate_size():
    train = random_train(seed=4)
    s = BPRSampler(train, seed=0)
    batches = list(s.batches(0, 7))
    assert len(batches) == s.n_batches(7)
    assert sum(len(b[0]) for b in batches) == train.nnz
    with pytest.raises(ValueError, match="batch_size"):
        next(s.batches(0, 0))


def test_user_with_every_item_is_rejected():
    train = random_train(n_users=5, n_items=4, density=0.5)
    dense = train.toarray()
    dense[1] = 1
    import scipy.sparse as sp

    with pytest.raises(ValueError, match="every item"):
        BPRSampler(sp.csr_matrix(dense), seed=0)
