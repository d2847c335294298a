"""FeSoG's item-attention user model (the "FeSog-" baseline of P4GCN Table 1)."""

from __future__ import annotations

import numpy as np
import torch

from fedgraphrec.models.rating import FeSoGItem


def _model() -> FeSoGItem:
    users = np.array([0, 0, 0, 1, 1, 3])  # user 2 has no training items
    items = np.array([0, 1, 2, 2, 3, 1])
    return FeSoGItem(4, 5, users, items, dim=3, generator=torch.Generator().manual_seed(0))


def test_attention_is_a_convex_combination_of_the_users_items() -> None:
    m = _model()
    with torch.no_grad():
        m.item.copy_(torch.tensor([1.0, -2.0, 0.5]).expand(5, 3))  # every item the same vector
    h_u, h_i = m()
    expected = m.user.detach().clone()
    expected[[0, 1, 3]] += torch.tensor([1.0, -2.0, 0.5])  # weights sum to one per user
    torch.testing.assert_close(h_u, expected)  # user 2: nothing to aggregate
    assert h_i is m.item


def test_attention_matches_an_explicit_softmax_and_gets_gradients() -> None:
    m = _model()
    h_u, _ = m()
    e_u, e_i, a = m.user, m.item, m.att
    items = [0, 1, 2]
    logits = torch.stack(
        [torch.nn.functional.leaky_relu(e_u[0] @ a[:3] + e_i[i] @ a[3:], 0.2) for i in items]
    )
    ref = e_u[0] + (torch.softmax(logits, 0)[:, None] * e_i[items]).sum(0)
    torch.testing.assert_close(h_u[0], ref)
    h_u.sum().backward()
    assert m.att.grad is not None and bool(m.att.grad.abs().sum() > 0)
