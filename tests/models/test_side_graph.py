"""LightGCN with side edges and HyperGNN (models/side_graph.py) against dense references."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from fedgraphrec.models.side_graph import (
    HyperGNN,
    LightGCNSide,
    augmented_adjacency,
    hypergraph_factor,
    hypergraph_incidence,
    items_sharing_a_tag,
)
from tests.helpers import random_train


def _side(n_users: int = 6, n_items: int = 7):
    train = random_train(n_users, n_items, density=0.3)
    social = sp.csr_matrix(np.array([[0, 1, 0, 0, 0, 1]] + [[0] * 6] * 5, dtype=float))  # 0-1, 0-5 (one way)
    item_item = sp.csr_matrix((np.ones(2), ([2, 4], [3, 5])), shape=(n_items, n_items))  # 2-3, 4-5
    tags = sp.csr_matrix(
        np.array([[1, 0], [0, 0], [1, 1], [0, 1], [0, 1], [0, 0], [0, 0]], dtype=float)
    )  # item × tag
    return train, social, item_item, tags


def _dense_sym_norm(A: np.ndarray) -> np.ndarray:
    deg = A.sum(1)
    inv = np.where(deg > 0, 1.0 / np.sqrt(np.where(deg > 0, deg, 1.0)), 0.0)
    return inv[:, None] * A * inv[None, :]


def test_augmented_adjacency_is_symmetric_normalised_with_social_and_item_edges() -> None:
    train, social, item_item, _ = _side()
    n, m = train.shape
    A_hat = augmented_adjacency(train, social, item_item).toarray()
    A = np.zeros((n + m, n + m))
    A[:n, n:] = train.toarray()
    A[n:, :n] = train.toarray().T
    for u, v in [(0, 1), (0, 5)]:  # social, symmetrised
        A[u, v] = A[v, u] = 1
    for i, j in [(2, 3), (4, 5)]:  # item–item, symmetrised
        A[n + i, n + j] = A[n + j, n + i] = 1
    np.testing.assert_allclose(A_hat, _dense_sym_norm(A), rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(A_hat, A_hat.T, atol=1e-15)
    assert np.all(np.diag(A_hat) == 0)
    assert A_hat[0, 1] > 0 and A_hat[5, 0] > 0 and A_hat[n + 2, n + 3] > 0 and A_hat[n + 5, n + 4] > 0
    # without side edges it is LightGCN's bipartite normalisation
    plain = augmented_adjacency(train).toarray()
    A0 = np.zeros_like(A)
    A0[:n, n:], A0[n:, :n] = train.toarray(), train.toarray().T
    np.testing.assert_allclose(plain, _dense_sym_norm(A0), rtol=1e-14, atol=1e-15)


def test_augmented_adjacency_rejects_a_wrong_shape_by_name() -> None:
    train, social, item_item, _ = _side()
    with pytest.raises(ValueError, match="social"):
        augmented_adjacency(train, social[:3, :3], item_item)
    with pytest.raises(ValueError, match="item_item"):
        augmented_adjacency(train, social, item_item[:3, :3])


def test_items_sharing_a_tag() -> None:
    _, _, _, tags = _side()
    T = items_sharing_a_tag(tags).toarray()
    expected = {(0, 2), (2, 3), (2, 4), (3, 4)}
    got = {(i, j) for i, j in zip(*np.nonzero(T), strict=True) if i < j}
    assert got == expected and np.array_equal(T, T.T)


def test_lightgcn_side_propagation_and_gradient_match_dense_reference() -> None:
    train, social, item_item, _ = _side()
    n, m = train.shape
    adj = augmented_adjacency(train, social, item_item)
    model = LightGCNSide(adj, n, dim=3, n_layers=2, dtype=torch.float64)
    U, V = model.embeddings()
    A = torch.from_numpy(adj.toarray())
    E0 = torch.cat([model.user_emb, model.item_emb]).detach().requires_grad_(True)
    ref = (E0 + A @ E0 + A @ (A @ E0)) / 3
    np.testing.assert_allclose(
        torch.cat([U, V]).detach().numpy(), ref.detach().numpy(), rtol=1e-12, atol=1e-14
    )
    w = torch.randn(n + m, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    (torch.cat([U, V]) * w).sum().backward()
    (ref * w).sum().backward()
    assert E0.grad is not None and model.user_emb.grad is not None and model.item_emb.grad is not None
    got = torch.cat([model.user_emb.grad, model.item_emb.grad])
    np.testing.assert_allclose(got.numpy(), E0.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_hypergraph_operator_equals_dense_formula() -> None:
    train, social, _, tags = _side()
    H = hypergraph_incidence(train, social, tags)
    n, m = train.shape
    Hd = H.toarray()
    # every user hyperedge is {u} ∪ I_u, tag hyperedges are the tags' items, friend sets {u} ∪ N(u)
    cols = {frozenset(np.flatnonzero(Hd[:, e])) for e in range(Hd.shape[1])}
    for u in range(n):
        items = set(n + train[u].indices)
        assert frozenset({u} | items) in cols
    assert frozenset({n + 0, n + 2}) in cols and frozenset({n + 2, n + 3, n + 4}) in cols
    assert frozenset({0, 1, 5}) in cols and frozenset({1, 0}) in cols and frozenset({5, 0}) in cols
    assert np.all(Hd.sum(0) >= 2)
    w = np.linspace(0.5, 2.0, Hd.shape[1])
    for weights in (None, w):
        W = np.ones(Hd.shape[1]) if weights is None else weights
        dv, de = Hd @ W, Hd.sum(0)
        Dv = np.diag(np.where(dv > 0, dv, np.inf) ** -0.5)
        P = Dv @ Hd @ np.diag(W) @ np.diag(1.0 / de) @ Hd.T @ Dv
        B = hypergraph_factor(H, weights).toarray()
        np.testing.assert_allclose(B @ B.T, P, rtol=1e-12, atol=1e-14)
        model = HyperGNN(sp.csr_matrix(B), n, dim=4, n_layers=2, dtype=torch.float64)
        X = torch.randn(n + m, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
        np.testing.assert_allclose(model.convolve(X).numpy(), P @ X.numpy(), rtol=1e-12, atol=1e-14)
        E0 = torch.cat([model.user_emb, model.item_emb]).detach().numpy()
        U, V = model.frozen_embeddings()
        ref = (E0 + P @ E0 + P @ P @ E0) / 3
        np.testing.assert_allclose(torch.cat([U, V]).numpy(), ref, rtol=1e-12, atol=1e-14)


def test_hypergraph_factor_rejects_bad_weights_by_name() -> None:
    train, social, _, tags = _side()
    H = hypergraph_incidence(train, social, tags)
    with pytest.raises(ValueError, match="edge_weights"):
        hypergraph_factor(H, np.ones(H.shape[1] + 1))
    with pytest.raises(ValueError, match="edge_weights"):
        hypergraph_factor(H, -np.ones(H.shape[1]))
    with pytest.raises(ValueError, match="tags"):
        hypergraph_incidence(train, social, tags[:3])
    with pytest.raises(ValueError, match="n_users"):
        HyperGNN(hypergraph_factor(H), 0)
