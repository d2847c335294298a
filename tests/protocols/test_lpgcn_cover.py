"""LP-GCN Algorithm 3: greedy minimum set cover and random convolution-item assignment."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from fedgraphrec.protocols.lpgcn.cover import (
    Assignment,
    add_extra_candidates,
    assign_convolution_items,
    greedy_set_cover,
    plan_convolution,
)
from tests.helpers import random_train


def _random_holdings(n: int, m: int, density: float, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    dense = rng.random((n, m)) < density
    dense[:, 0] = False  # an item nobody holds
    dense[-1, :] = False  # a client holding nothing
    return sp.csr_matrix(dense.astype(np.float32))


def _reference_greedy(holdings: sp.csr_matrix) -> list[int]:
    """The textbook loop: sole holders first, then max new coverage, lowest id on ties."""
    dense = holdings.toarray() != 0
    n, _ = dense.shape
    degree = dense.sum(axis=0)
    chosen = {int(np.flatnonzero(dense[:, j])[0]) for j in np.flatnonzero(degree == 1)}
    covered = degree == 0
    for u in chosen:
        covered |= dense[u]
    while not covered.all():
        best, best_gain = -1, 0
        for u in range(n):
            if u in chosen:
                continue
            g = int((dense[u] & ~covered).sum())
            if g > best_gain:
                best, best_gain = u, g
        chosen.add(best)
        covered |= dense[best]
    return sorted(chosen)


def _held(holdings: sp.csr_matrix) -> np.ndarray:
    return np.asarray((holdings != 0).sum(axis=0)).ravel() > 0


# --- greedy_set_cover -------------------------------------------------------------------------


def test_fig5_toy_example_picks_u1_u2() -> None:
    # A graph consistent with Fig. 5: {u1, u2} covers every item, {u1, u3, u4} does too.
    # items i1..i5 -> columns 0..4; u1 alone holds i1, i2.
    rows = {0: [0, 1, 2], 1: [2, 3, 4], 2: [3], 3: [4]}
    dense = np.zeros((4, 5), np.float32)
    for u, items in rows.items():
        dense[u, items] = 1
    assert greedy_set_cover(sp.csr_matrix(dense)).tolist() == [0, 1]


@pytest.mark.parametrize("seed", range(8))
def test_cover_matches_reference_greedy_and_covers_every_held_item(seed: int) -> None:
    h = _random_holdings(23, 31, density=0.12 + 0.02 * seed, seed=seed)
    cover = greedy_set_cover(h)
    assert cover.tolist() == _reference_greedy(h)
    assert np.all(np.diff(cover) > 0)
    covered = np.asarray(h[cover].sum(axis=0)).ravel() > 0
    np.testing.assert_array_equal(covered, _held(h))


def test_sole_holders_are_always_in_the_cover() -> None:
    for seed in range(5):
        h = _random_holdings(40, 60, density=0.05, seed=seed)
        csc = h.tocsc()
        sole = np.flatnonzero(np.diff(csc.indptr) == 1)
        sole_holders = set(csc.indices[csc.indptr[sole]].tolist())
        assert sole_holders, "the fixture should contain sole-holder items"
        assert sole_holders <= set(greedy_set_cover(h).tolist())


def test_ties_go_to_the_lowest_client_id() -> None:
    # Every item has two holders; clients 0..3 each cover two items, client 4 covers three.
    dense = np.array(
        [
            [1, 1, 0, 0, 0, 0],
            [1, 1, 0, 0, 0, 0],
            [0, 0, 1, 1, 0, 0],
            [0, 0, 1, 1, 0, 0],
            [0, 0, 0, 0, 1, 1],
            [0, 0, 0, 0, 1, 1],
        ],
        dtype=np.float32,
    )
    assert greedy_set_cover(sp.csr_matrix(dense)).tolist() == [0, 2, 4]


def test_cover_ignores_values_duplicates_and_explicit_zeros() -> None:
    rows = np.array([0, 0, 1, 2, 2])
    cols = np.array([0, 0, 1, 1, 2])
    vals = np.array([3.0, 2.0, 1.0, 0.0, 7.0])
    h = sp.coo_matrix((vals, (rows, cols)), shape=(3, 4)).tocsr()  # (2, 1) is an explicit zero
    assert greedy_set_cover(h).tolist() == [0, 1, 2]  # all three are sole holders; item 3 unheld


def test_cover_of_an_empty_matrix_is_empty() -> None:
    assert greedy_set_cover(sp.csr_matrix((5, 7))).tolist() == []


def test_cover_rejects_dense_input() -> None:
    with pytest.raises(TypeError, match="scipy sparse"):
        greedy_set_cover(np.eye(3))  # type: ignore[arg-type]


# --- assign_convolution_items ----------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_assignment_picks_one_candidate_holder_per_held_item(seed: int) -> None:
    h = _random_holdings(30, 50, density=0.1, seed=seed)
    cover = greedy_set_cover(h)
    rng = np.random.default_rng(seed)
    candidates = np.union1d(cover, rng.choice(30, 8, replace=False))
    conv = assign_convolution_items(h, candidates, rng)
    held = _held(h)
    assert conv.shape == (50,)
    np.testing.assert_array_equal(conv >= 0, held)
    items = np.flatnonzero(held)
    assert np.all(np.asarray(h[conv[items], items]).ravel() != 0)  # ũ_i holds i
    assert np.isin(conv[items], candidates).all()


def test_assignment_is_uniform_over_eligible_candidates() -> None:
    # 4000 identical items held by clients 0..5; candidates {0, 2, 3, 5}.
    m = 4000
    h = sp.csr_matrix(np.ones((6, m), np.float32))
    conv = assign_convolution_items(h, np.array([5, 0, 3, 2]), np.random.default_rng(7))
    counts = np.bincount(conv, minlength=6)
    assert counts[1] == counts[4] == 0
    expected, sd = m / 4, np.sqrt(m * 0.25 * 0.75)
    assert np.all(np.abs(counts[[0, 2, 3, 5]] - expected) < 5 * sd)
    chi2 = float(((counts[[0, 2, 3, 5]] - expected) ** 2 / expected).sum())
    assert chi2 < 20.0  # 3 d.o.f.; P(chi2 > 20) ~ 2e-4


def test_assignment_uniformity_per_item_with_varying_holder_sets() -> None:
    # Item j is held by clients 0..(j % 4 + 1); every client is a candidate; repeat draws.
    m, reps = 8, 3000
    dense = np.zeros((5, m), np.float32)
    for j in range(m):
        dense[: j % 4 + 2, j] = 1
    h = sp.csr_matrix(dense)
    rng = np.random.default_rng(3)
    draws = np.stack([assign_convolution_items(h, np.arange(5), rng) for _ in range(reps)])
    for j in range(m):
        c = j % 4 + 2
        counts = np.bincount(draws[:, j], minlength=5)
        assert counts[c:].sum() == 0
        assert np.all(np.abs(counts[:c] - reps / c) < 5 * np.sqrt(reps * (1 / c) * (1 - 1 / c)))


def test_assignment_rejects_candidates_that_do_not_cover() -> None:
    h = sp.csr_matrix(np.array([[1, 0], [0, 1]], np.float32))
    with pytest.raises(ValueError, match="no holder among the candidates"):
        assign_convolution_items(h, np.array([0]), np.random.default_rng(0))
    with pytest.raises(ValueError, match="candidate ids"):
        assign_convolution_items(h, np.array([0, 2]), np.random.default_rng(0))


# --- plan_convolution ------------------------------------------------------------------------


def test_plan_is_reproducible_and_seed_dependent() -> None:
    h = sp.csr_matrix(random_train(30, 40, density=0.3, seed=1))
    a, b, c = plan_convolution(h, 0), plan_convolution(h, 0), plan_convolution(h, 1)
    np.testing.assert_array_equal(a.conv_client_of_item, b.conv_client_of_item)
    assert not np.array_equal(a.conv_client_of_item, c.conv_client_of_item)
    np.testing.assert_array_equal(a.candidates, greedy_set_cover(h))
    np.testing.assert_array_equal(a.cover, a.candidates)


def test_plan_fields_are_consistent_and_read_only() -> None:
    h = sp.csr_matrix(random_train(25, 30, density=0.3, seed=2))
    plan = plan_convolution(h, 3, extra_fraction=0.2)
    assert isinstance(plan, Assignment)
    assert plan.n_clients == 25 and plan.n_items == 30
    assert set(plan.cover.tolist()) <= set(plan.candidates.tolist())
    assert plan.k == len(plan.cover) + 5  # round(0.2 * 25) non-cover users added
    assert set(plan.convolution_clients.tolist()) <= set(plan.candidates.tolist())
    np.testing.assert_array_equal(
        plan.convolution_clients, np.unique(plan.conv_client_of_item[plan.conv_client_of_item >= 0])
    )
    for u in plan.convolution_clients:
        assert (plan.conv_client_of_item[plan.convolution_items(int(u))] == u).all()
    with pytest.raises(ValueError):
        plan.candidates[0] = 7


def test_extra_candidates_follow_the_fig13_rule() -> None:
    h = _random_holdings(50, 40, density=0.15, seed=4)  # client 49 holds nothing
    cover = greedy_set_cover(h)
    rng = np.random.default_rng(0)
    grown = add_extra_candidates(h, cover, 0.3, rng)
    assert len(grown) == len(cover) + 15
    assert set(cover.tolist()) <= set(grown.tolist())
    assert 49 not in grown.tolist()
    everyone = add_extra_candidates(h, cover, 1.0, rng)
    assert everyone.tolist() == list(range(49))  # saturates at every holding client
    np.testing.assert_array_equal(add_extra_candidates(h, cover, 0.0, rng), cover)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        add_extra_candidates(h, cover, 1.5, rng)


def test_extra_candidates_grow_the_convolution_clients() -> None:
    h = sp.csr_matrix(random_train(60, 80, density=0.2, seed=5))
    small = plan_convolution(h, 0, 0.0)
    large = plan_convolution(h, 0, 0.8)
    assert len(large.convolution_clients) > len(small.convolution_clients)


@pytest.mark.datasets
def test_gowalla_cover_covers_every_item() -> None:
    root = os.environ.get("FEDGRAPHREC_DATA")
    if not root or not (Path(root) / "gowalla").is_dir():
        pytest.skip("FEDGRAPHREC_DATA does not hold gowalla")
    from fedgraphrec.data.registry import load_dataset

    train = load_dataset("gowalla", data_dir=root).train
    cover = greedy_set_cover(train)  # speed is measured by benchmarks/lpgcn_conv_clients.py, not here
    covered = np.asarray(train[cover].sum(axis=0)).ravel() > 0
    np.testing.assert_array_equal(covered, _held(train))
