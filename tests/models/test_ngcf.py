"""NGCF: one layer by hand, shapes, deterministic dropout, and training lowers the loss."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fedgraphrec.models.ngcf import NGCF
from fedgraphrec.models.propagation import NormalizedBipartite
from tests.helpers import random_train


def _model(layers: int = 2, dropout: float = 0.0, seed: int = 0) -> NGCF:
    graph = NormalizedBipartite.from_train(random_train(9, 11, seed=1), torch.float64)
    return NGCF(
        graph, 4, layers, 0.3, torch.Generator().manual_seed(seed), torch.float64, message_dropout=dropout
    )


def test_one_layer_matches_the_formula() -> None:
    m = _model(layers=1)
    R = torch.from_numpy(m.graph.csr.toarray())
    U, V = m.user_emb.detach(), m.item_emb.detach()
    W1, W2, b1, b2 = (x[0].detach() for x in (m.W1, m.W2, m.b1, m.b2))
    su, sv = R @ V, R.T @ U
    u1 = F.leaky_relu((su + U) @ W1 + b1 + (su * U) @ W2 + b2, 0.2)
    v1 = F.leaky_relu((sv + V) @ W1 + b1 + (sv * V) @ W2 + b2, 0.2)
    users, items = m.frozen_embeddings()
    assert users.shape == (9, 8) and items.shape == (11, 8)
    assert torch.allclose(users, torch.cat([U, F.normalize(u1, dim=1)], 1), atol=1e-12)
    assert torch.allclose(items, torch.cat([V, F.normalize(v1, dim=1)], 1), atol=1e-12)


def test_dropout_is_seeded_and_off_at_evaluation() -> None:
    a, b = _model(dropout=0.5), _model(dropout=0.5)
    assert torch.equal(a.embeddings()[0], b.embeddings()[0])  # same generator, same masks
    assert not torch.equal(a.embeddings()[0], a.frozen_embeddings()[0])
    assert torch.equal(a.frozen_embeddings()[0], _model(dropout=0.0).frozen_embeddings()[0])


def test_training_lowers_the_loss() -> None:
    m = _model(layers=2, dropout=0.1)
    opt = torch.optim.Adam(m.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(3)
    users, pos = torch.tensor([0, 2, 3, 4, 5, 6]), torch.tensor([0, 1, 2, 2, 3, 3])
    neg = torch.randint(0, 11, (6,), generator=g)
    first = m.batch_loss(users, pos, neg, 1e-3).total.item()
    for _ in range(30):
        opt.zero_grad()
        m.batch_loss(users, pos, neg, 1e-3).total.backward()
        opt.step()
    assert m.batch_loss(users, pos, neg, 1e-3).total.item() < 0.5 * first
