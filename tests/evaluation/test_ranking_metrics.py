"""Tests for fedgraphrec.evaluation.ranking (full-ranking top-K metrics)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgraphrec.data.types import binary_csr
from fedgraphrec.evaluation.ranking import (
    RankingResult,
    default_chunk_size,
    evaluate_embeddings,
    evaluate_scores,
)

# --------------------------------------------------------------------------------------------------
# Hand-computed fixture: 4 users × 6 items, distinct scores.
#
#   user 0: scores [6,5,4,3,2,1] -> order 0,1,2,3,4,5; train {0} (would rank first), valid {2},
#           test {1,3,4,5}  (|T| = 4 > K = 3)
#   user 1: scores [1,2,3,4,5,6] -> order 5,4,3,2,1,0; train {5} (would rank first), valid {4},
#           test {3}        (|T| = 1 < K)
#   user 2: train {1}, no test items -> skipped
#   user 3: scores [3,1,2,6,5,4] -> order 3,4,5,0,2,1; no train/valid, test {5,0} (|T| = 2 < K)
#
# Discounts 1/log2(r+1): r=1 -> 1, r=2 -> 1/log2(3) = 0.6309298, r=3 -> 1/log2(4) = 0.5.

SCORES = np.array(
    [
        [6, 5, 4, 3, 2, 1],
        [1, 2, 3, 4, 5, 6],
        [1, 2, 3, 4, 5, 6],
        [3, 1, 2, 6, 5, 4],
    ],
    dtype=np.float32,
)
N_USERS, N_ITEMS = SCORES.shape
L3 = 1.0 / math.log2(3)  # discount at rank 2

TRAIN = binary_csr(np.array([0, 1, 2]), np.array([0, 5, 1]), N_USERS, N_ITEMS)
VALID = binary_csr(np.array([0, 1]), np.array([2, 4]), N_USERS, N_ITEMS)
TEST = binary_csr(np.array([0, 0, 0, 0, 1, 3, 3]), np.array([1, 3, 4, 5, 3, 5, 0]), N_USERS, N_ITEMS)

# Exclude train only.
#   user 0: top3 = [1,2,3], rel = [1,0,1]
#     K=1: P = 1/1, R = 1/4, NDCG = 1/1 = 1, hit = 1
#     K=3: hits = 2, P = 2/3, R = 2/4, DCG = 1 + 1/log2(4) = 1.5,
#          IDCG (min(4,3) = 3 terms) = 1 + L3 + 0.5, NDCG = 1.5 / (1.5 + L3), hit = 1
#   user 1: top3 = [4,3,2], rel = [0,1,0]
#     K=1: all 0
#     K=3: P = 1/3, R = 1/1, DCG = L3, IDCG (min(1,3) = 1 term) = 1, NDCG = L3, hit = 1
#   user 3: top3 = [3,4,5], rel = [0,0,1]
#     K=1: all 0
#     K=3: P = 1/3, R = 1/2, DCG = 0.5, IDCG (2 terms) = 1 + L3, NDCG = 0.5 / (1 + L3), hit = 1
PER_USER_TRAIN = {
    "precision@1": [1.0, 0.0, 0.0],
    "recall@1": [0.25, 0.0, 0.0],
    "ndcg@1": [1.0, 0.0, 0.0],
    "hit@1": [1.0, 0.0, 0.0],
    "precision@3": [2 / 3, 1 / 3, 1 / 3],
    "recall@3": [0.5, 1.0, 0.5],
    "ndcg@3": [1.5 / (1.5 + L3), L3, 0.5 / (1 + L3)],
    "hit@3": [1.0, 1.0, 1.0],
}
# Means over the 3 evaluated users (user 2 skipped):
#   P@1 = 1/3, R@1 = (1/4)/3 = 1/12, NDCG@1 = 1/3, hit@1 = 1/3
#   P@3 = (2/3 + 1/3 + 1/3)/3 = 4/9, R@3 = (1/2 + 1 + 1/2)/3 = 2/3,
#   NDCG@3 = (1.5/(1.5+L3) + L3 + 0.5/(1+L3)) / 3, hit@3 = 1
MEANS_TRAIN = {
    "precision@1": 1 / 3,
    "recall@1": 1 / 12,
    "ndcg@1": 1 / 3,
    "hit@1": 1 / 3,
    "precision@3": 4 / 9,
    "recall@3": 2 / 3,
    "ndcg@3": (1.5 / (1.5 + L3) + L3 + 0.5 / (1 + L3)) / 3,
    "hit@3": 1.0,
}

# Exclude train and valid.
#   user 0: order after masking 0 and 2 = 1,3,4,5 -> top3 = [1,3,4], rel = [1,1,1]
#     K=1: P = 1, R = 1/4, NDCG = 1, hit = 1
#     K=3: P = 3/3 = 1, R = 3/4, DCG = 1 + L3 + 0.5 = IDCG -> NDCG = 1, hit = 1
#   user 1: order after masking 5 and 4 = 3,2,1,0 -> top3 = [3,2,1], rel = [1,0,0]
#     K=1: P = 1, R = 1, NDCG = 1, hit = 1
#     K=3: P = 1/3, R = 1, DCG = 1 = IDCG -> NDCG = 1, hit = 1
#   user 3: unchanged (no valid items).
PER_USER_TRAIN_VALID = {
    "precision@1": [1.0, 1.0, 0.0],
    "recall@1": [0.25, 1.0, 0.0],
    "ndcg@1": [1.0, 1.0, 0.0],
    "hit@1": [1.0, 1.0, 0.0],
    "precision@3": [1.0, 1 / 3, 1 / 3],
    "recall@3": [0.75, 1.0, 0.5],
    "ndcg@3": [1.0, 1.0, 0.5 / (1 + L3)],
    "hit@3": [1.0, 1.0, 1.0],
}
# Means: P@1 = 2/3, R@1 = (1/4 + 1)/3 = 5/12, NDCG@1 = 2/3, hit@1 = 2/3,
#        P@3 = (1 + 1/3 + 1/3)/3 = 5/9, R@3 = (3/4 + 1 + 1/2)/3 = 3/4,
#        NDCG@3 = (1 + 1 + 0.5/(1+L3))/3, hit@3 = 1
MEANS_TRAIN_VALID = {
    "precision@1": 2 / 3,
    "recall@1": 5 / 12,
    "ndcg@1": 2 / 3,
    "hit@1": 2 / 3,
    "precision@3": 5 / 9,
    "recall@3": 3 / 4,
    "ndcg@3": (2 + 0.5 / (1 + L3)) / 3,
    "hit@3": 1.0,
}


def _score_fn(scores: np.ndarray):
    s = torch.from_numpy(scores)

    def fn(idx: torch.Tensor) -> torch.Tensor:
        return s[idx]

    return fn


def _run(api: str, scores: np.ndarray, test, exclude, ks, **kw) -> RankingResult:
    n_u, n_i = scores.shape
    if api == "scores":
        return evaluate_scores(_score_fn(scores), n_u, n_i, test, exclude, ks, **kw)
    # identity item embeddings: user_emb @ I^T == scores exactly
    return evaluate_embeddings(
        torch.from_numpy(scores.copy()), torch.eye(n_i, dtype=torch.float32), test, exclude, ks, **kw
    )


def _assert_metrics(got: dict[str, float], want: dict[str, float]) -> None:
    assert list(got) == list(want)
    for key, v in want.items():
        assert got[key] == pytest.approx(v, rel=1e-12, abs=1e-12), key


@pytest.mark.parametrize("api", ["scores", "embeddings"])
def test_hand_case_train_masking(api: str) -> None:
    res = _run(api, SCORES, TEST, (TRAIN,), (1, 3), per_user=True)
    assert res.n_users_evaluated == 3
    assert res.ks == (1, 3)
    _assert_metrics(res.metrics, MEANS_TRAIN)
    assert res.users is not None and res.per_user is not None
    np.testing.assert_array_equal(res.users, [0, 1, 3])
    for key, v in PER_USER_TRAIN.items():
        np.testing.assert_allclose(res.per_user[key], v, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("api", ["scores", "embeddings"])
def test_hand_case_train_and_valid_masking(api: str) -> None:
    res = _run(api, SCORES, TEST, (TRAIN, VALID), (1, 3), per_user=True)
    assert res.n_users_evaluated == 3
    _assert_metrics(res.metrics, MEANS_TRAIN_VALID)
    assert res.per_user is not None
    for key, v in PER_USER_TRAIN_VALID.items():
        np.testing.assert_allclose(res.per_user[key], v, rtol=1e-12, atol=1e-12)


def test_none_exclude_entries_are_ignored() -> None:
    res = _run("scores", SCORES, TEST, (TRAIN, None), (1, 3))
    _assert_metrics(res.metrics, MEANS_TRAIN)


def test_no_masking_lets_train_items_rank_first() -> None:
    # Without masking, user 0's top1 is item 0 (train, not test) and user 1's top1 is item 5
    # (train, not test); user 3's top1 is item 3 (not test): hit@1 = 0 for everyone.
    res = _run("scores", SCORES, TEST, (), (1,))
    assert res.metrics["hit@1"] == 0.0
    assert res.metrics["precision@1"] == 0.0
    # With train masked, user 0's top1 becomes item 1, a test item (see fixture).
    assert _run("scores", SCORES, TEST, (TRAIN,), (1,)).metrics["hit@1"] == pytest.approx(1 / 3)


def test_multiple_ks_match_single_k_runs_and_keep_order() -> None:
    multi = _run("scores", SCORES, TEST, (TRAIN,), (3, 1, 3))
    assert multi.ks == (3, 1)
    assert list(multi.metrics) == [
        "precision@3",
        "recall@3",
        "ndcg@3",
        "hit@3",
        "precision@1",
        "recall@1",
        "ndcg@1",
        "hit@1",
    ]
    for k in (1, 3):
        single = _run("scores", SCORES, TEST, (TRAIN,), (k,))
        for key, v in single.metrics.items():
            assert multi.metrics[key] == v


def test_k_larger_than_rankable_items_and_masked_items_never_hit() -> None:
    # 1 user, 3 items. Item 0 is both train and test (overlap): masked, so it can never be a hit,
    # but still counts in |T_u| = 2. Test = {0, 2}; scores [3,2,1]; after masking order = 1,2.
    # K = 5 > 3 items: top list = [1, 2, (0 masked, -inf)], rel = [0, 1, 0].
    #   hits = 1, P@5 = 1/5, R@5 = 1/2, DCG = 1/log2(3) = L3, IDCG (min(2,5) = 2 terms) = 1 + L3,
    #   NDCG = L3 / (1 + L3), hit = 1
    scores = np.array([[3.0, 2.0, 1.0]], dtype=np.float32)
    train = binary_csr(np.array([0]), np.array([0]), 1, 3)
    test = binary_csr(np.array([0, 0]), np.array([0, 2]), 1, 3)
    res = _run("scores", scores, test, (train,), (5,))
    _assert_metrics(
        res.metrics,
        {"precision@5": 1 / 5, "recall@5": 1 / 2, "ndcg@5": L3 / (1 + L3), "hit@5": 1.0},
    )
    # With every item masked nothing can be a hit.
    everything = binary_csr(np.zeros(3, dtype=np.int64), np.arange(3), 1, 3)
    res = _run("scores", scores, test, (everything,), (2,))
    assert all(v == 0.0 for v in res.metrics.values())


def test_users_subset() -> None:
    # users=[1, 2, 1]: duplicates ignored, user 2 has no test items -> only user 1 is evaluated.
    res = _run("scores", SCORES, TEST, (TRAIN,), (1, 3), users=[1, 2, 1], per_user=True)
    assert res.n_users_evaluated == 1
    assert res.users is not None
    np.testing.assert_array_equal(res.users, [1])
    _assert_metrics(res.metrics, {key: v[1] for key, v in PER_USER_TRAIN.items()})
    with pytest.raises(ValueError, match="users"):
        _run("scores", SCORES, TEST, (TRAIN,), (1,), users=[4])


def test_no_evaluated_users_gives_nan() -> None:
    empty = sp.csr_matrix((N_USERS, N_ITEMS), dtype=np.float32)
    res = _run("scores", SCORES, empty, (TRAIN,), (2,), per_user=True)
    assert res.n_users_evaluated == 0
    assert all(math.isnan(v) for v in res.metrics.values())
    assert res.per_user is not None and all(a.size == 0 for a in res.per_user.values())


def test_per_user_off_by_default_and_read_only() -> None:
    res = _run("scores", SCORES, TEST, (TRAIN,), (3,))
    assert res.users is None and res.per_user is None
    res = _run("scores", SCORES, TEST, (TRAIN,), (3,), per_user=True)
    assert res.per_user is not None and res.users is not None
    assert not res.per_user["ndcg@3"].flags.writeable
    assert not res.users.flags.writeable


def test_score_fn_output_not_mutated_by_default() -> None:
    stored = torch.from_numpy(SCORES.copy())

    def view_fn(idx: torch.Tensor) -> torch.Tensor:
        # users=[0, 1] in one chunk: a contiguous slice, i.e. a view into `stored`
        return stored[int(idx[0]) : int(idx[-1]) + 1]

    res = evaluate_scores(view_fn, N_USERS, N_ITEMS, TEST, (TRAIN,), (1, 3), users=[0, 1])
    np.testing.assert_array_equal(stored.numpy(), SCORES)
    _assert_metrics(res.metrics, {key: (v[0] + v[1]) / 2 for key, v in PER_USER_TRAIN.items()})
    # copy_scores=False writes the mask into the returned tensor (documented behaviour).
    evaluate_scores(view_fn, N_USERS, N_ITEMS, TEST, (TRAIN,), (1,), users=[0, 1], copy_scores=False)
    assert stored[0, 0] == -torch.inf and stored[1, 5] == -torch.inf


def test_explicit_zeros_and_non_csr_inputs() -> None:
    # An explicitly stored 0 in test is not relevant; in exclude it does not mask. COO is accepted.
    test = sp.csr_matrix(
        (np.array([1.0, 0.0]), (np.array([0, 0]), np.array([1, 2]))), shape=(1, 3)
    )  # test {1}, stored zero at item 2
    excl = sp.coo_matrix((np.array([0.0]), (np.array([0]), np.array([0]))), shape=(1, 3))
    scores = np.array([[3.0, 2.0, 1.0]], dtype=np.float32)
    # order 0,1,2 (item 0 not masked) -> top2 = [0,1], rel = [0,1]: P = 1/2, R = 1, NDCG = L3, hit 1
    res = _run("scores", scores, test, (excl,), (2,))
    _assert_metrics(res.metrics, {"precision@2": 0.5, "recall@2": 1.0, "ndcg@2": L3, "hit@2": 1.0})


def test_errors() -> None:
    with pytest.raises(ValueError, match="K"):
        _run("scores", SCORES, TEST, (TRAIN,), (0,))
    with pytest.raises(ValueError, match="empty"):
        _run("scores", SCORES, TEST, (TRAIN,), ())
    with pytest.raises(ValueError, match="shape"):
        _run("scores", SCORES, TEST[:3], (TRAIN,), (1,))
    with pytest.raises(ValueError, match="exclude"):
        _run("scores", SCORES, TEST, (TRAIN[:, :5],), (1,))
    with pytest.raises(ValueError, match="chunk_size"):
        _run("scores", SCORES, TEST, (TRAIN,), (1,), chunk_size=0)
    nan_scores = SCORES.copy()
    nan_scores[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        _run("scores", nan_scores, TEST, (TRAIN,), (1,))
    with pytest.raises(ValueError, match="shape"):
        evaluate_scores(lambda idx: torch.zeros(len(idx), 5), N_USERS, N_ITEMS, TEST, (), (1,))
    with pytest.raises(ValueError, match="dim"):
        evaluate_embeddings(torch.zeros(4, 3), torch.zeros(6, 2), TEST)


def test_default_chunk_size() -> None:
    # 256 MiB / (40981 items × 4 bytes) = 268435456 // 163924 = 1637 users
    assert default_chunk_size(40981) == 1637
    assert default_chunk_size(40981, bytes_per_score=8) == 818
    assert default_chunk_size(10**12) == 1


def _exact_embeddings(n_users: int, n_items: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    # score(u, i) = a_u * b_i + i / 1024: products of small integers plus a distinct dyadic fraction,
    # so every float32 score is exact (any BLAS summation order) and distinct within a row.
    rng = np.random.default_rng(seed)
    a = rng.integers(-8, 9, n_users).astype(np.float32)
    b = rng.integers(-8, 9, n_items).astype(np.float32)
    user = np.stack([a, np.ones(n_users, np.float32)], axis=1)
    item = np.stack([b, np.arange(n_items, dtype=np.float32) / 1024], axis=1)
    return torch.from_numpy(user), torch.from_numpy(item)


def _random_split(n_users: int, n_items: int, seed: int) -> tuple[sp.csr_matrix, ...]:
    rng = np.random.default_rng(seed)
    label = rng.choice(4, size=(n_users, n_items), p=[0.7, 0.15, 0.05, 0.1])
    mats = []
    for lab in (1, 2, 3):  # train, valid, test (disjoint)
        u, i = np.nonzero(label == lab)
        mats.append(binary_csr(u, i, n_users, n_items))
    return tuple(mats)


def test_chunk_size_one_vs_large_identical() -> None:
    n_users, n_items = 57, 300
    train, valid, test = _random_split(n_users, n_items, seed=1)
    U, V = _exact_embeddings(n_users, n_items, seed=2)
    ks = (1, 5, 20)
    ref = evaluate_embeddings(U, V, test, (train, valid), ks, chunk_size=n_users + 10, per_user=True)
    assert ref.n_users_evaluated > 0
    for cs in (1, 7, None):
        got = evaluate_embeddings(U, V, test, (train, valid), ks, chunk_size=cs, per_user=True)
        assert got.metrics == ref.metrics
        assert got.n_users_evaluated == ref.n_users_evaluated
        assert got.per_user is not None and ref.per_user is not None
        for key in ref.per_user:
            np.testing.assert_array_equal(got.per_user[key], ref.per_user[key])
    # The generic path on the same exact scores agrees too.
    S = (U @ V.T).numpy()
    for cs in (1, 1000):
        got = evaluate_scores(_score_fn(S), n_users, n_items, test, (train, valid), ks, chunk_size=cs)
        assert got.metrics == ref.metrics


def test_random_gaussian_embeddings_match_reference() -> None:
    n_users, n_items = 40, 120
    train, valid, test = _random_split(n_users, n_items, seed=3)
    g = torch.Generator().manual_seed(0)
    U = torch.randn(n_users, 8, generator=g, dtype=torch.float64)
    V = torch.randn(n_items, 8, generator=g, dtype=torch.float64)
    got = evaluate_embeddings(U, V, test, (train, valid), (3, 10), chunk_size=9, per_user=True)
    want = _reference(
        (U @ V.T).numpy(), test.toarray() > 0, [train.toarray() > 0, valid.toarray() > 0], (3, 10)
    )
    _compare(got, want)


# --------------------------------------------------------------------------------------------------
# Plain per-user numpy reference implementation.


def _reference(
    scores: np.ndarray, test: np.ndarray, masks: list[np.ndarray], ks: tuple[int, ...]
) -> dict[str, list[float]]:
    """Per-user metrics straight from the definitions (scores assumed distinct within a row)."""
    n_users, n_items = scores.shape
    masked = np.zeros_like(test, dtype=bool)
    for m in masks:
        masked |= m
    out: dict[str, list[float]] = {"users": []}
    for k in ks:
        for name in ("precision", "recall", "ndcg", "hit"):
            out[f"{name}@{k}"] = []
    for u in range(n_users):
        t_u = set(np.nonzero(test[u])[0].tolist())
        if not t_u:
            continue
        out["users"].append(u)
        candidates = [i for i in range(n_items) if not masked[u, i]]
        ranked = sorted(candidates, key=lambda i: -scores[u, i])
        for k in ks:
            top = ranked[:k]
            rel = [1.0 if i in t_u else 0.0 for i in top]
            hits = sum(rel)
            dcg = sum(r / math.log2(pos + 2) for pos, r in enumerate(rel))
            idcg = sum(1.0 / math.log2(pos + 2) for pos in range(min(len(t_u), k)))
            out[f"precision@{k}"].append(hits / k)
            out[f"recall@{k}"].append(hits / len(t_u))
            out[f"ndcg@{k}"].append(dcg / idcg)
            out[f"hit@{k}"].append(1.0 if hits > 0 else 0.0)
    return out


def _compare(got: RankingResult, want: dict[str, list[float]]) -> None:
    assert got.n_users_evaluated == len(want["users"])
    assert got.users is not None and got.per_user is not None
    np.testing.assert_array_equal(got.users, want["users"])
    for key, vals in want.items():
        if key == "users":
            continue
        np.testing.assert_allclose(got.per_user[key], vals, rtol=1e-12, atol=1e-12)
        if vals:
            assert got.metrics[key] == pytest.approx(float(np.mean(vals)), rel=1e-12, abs=1e-12)
        else:
            assert math.isnan(got.metrics[key])


@st.composite
def _problems(draw: st.DrawFn):
    n_users = draw(st.integers(1, 6))
    n_items = draw(st.integers(1, 8))
    perm = draw(st.permutations(range(n_users * n_items)))
    scores = np.asarray(perm, dtype=np.float32).reshape(n_users, n_items)  # distinct, exact
    cells = st.lists(st.booleans(), min_size=n_users * n_items, max_size=n_users * n_items)
    # train / valid / test drawn independently: overlaps allowed (masked test items can't be hit)
    train, valid, test = (np.array(draw(cells), dtype=bool).reshape(n_users, n_items) for _ in range(3))
    ks = tuple(draw(st.lists(st.integers(1, 10), min_size=1, max_size=3, unique=True)))
    chunk = draw(st.integers(1, 7))
    use_valid = draw(st.booleans())
    return scores, train, valid, test, ks, chunk, use_valid


@settings(max_examples=150, deadline=None)
@given(_problems())
def test_property_matches_reference(problem) -> None:
    scores, train, valid, test, ks, chunk, use_valid = problem
    masks = [train, valid] if use_valid else [train]
    want = _reference(scores, test, masks, ks)
    csr = [sp.csr_matrix(m.astype(np.float32)) for m in masks]
    test_csr = sp.csr_matrix(test.astype(np.float32))
    n_users, n_items = scores.shape
    got_s = evaluate_scores(
        _score_fn(scores), n_users, n_items, test_csr, csr, ks, chunk_size=chunk, per_user=True
    )
    _compare(got_s, want)
    got_e = evaluate_embeddings(
        torch.from_numpy(scores.copy()),
        torch.eye(n_items),
        test_csr,
        csr,
        ks,
        chunk_size=chunk,
        per_user=True,
    )
    _compare(got_e, want)
