"""LightGCN / LightGCN+ / BPR-MF losses and gradients against independent references (float64)."""

import numpy as np
import pytest
import torch

from fedgraphrec.models.lightgcn import LightGCN, LightGCNPlus
from fedgraphrec.models.mf import BPRMF
from fedgraphrec.models.propagation import NormalizedBipartite
from tests.helpers import random_train


def triples(n_users, n_items, size=9, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(
        torch.from_numpy(a)
        for a in (
            rng.integers(0, n_users, size),
            rng.integers(0, n_items, size),
            rng.integers(0, n_items, size),
        )
    )


def spec_gradients(train, U0, V0, n_layers, users, pos, neg, lam):
    """specs/lpgcn.md §2.4: direct gradients D and the adjoint recursion G, written with dense numpy."""
    R = train.toarray().astype(np.float64)
    du, di = R.sum(1), R.sum(0)
    C = np.where(R > 0, 1.0 / np.sqrt(np.outer(np.maximum(du, 1), np.maximum(di, 1))), 0.0)
    us, vs = [U0], [V0]
    for _ in range(n_layers):
        us.append(C @ vs[-1])
        vs.append(C.T @ us[-2])
    a = 1.0 / (n_layers + 1)
    U, V = a * sum(us), a * sum(vs)
    B = len(users)
    dU, dV = np.zeros_like(U), np.zeros_like(V)
    loss = 0.0
    for u, i, j in zip(users, pos, neg, strict=True):
        x = U[u] @ V[j] - U[u] @ V[i]
        loss += np.logaddexp(0, x) / B
        s = 1 / (1 + np.exp(-x))
        dU[u] += s * (V[j] - V[i]) / B
        dV[i] += -s * U[u] / B
        dV[j] += s * U[u] / B
    reg = 0.0
    rU, rV = np.zeros_like(U), np.zeros_like(V)
    for u, i, j in zip(users, pos, neg, strict=True):
        reg += (U0[u] @ U0[u] + V0[i] @ V0[i] + V0[j] @ V0[j]) / (2 * B)
        rU[u] += lam * U0[u] / B
        rV[i] += lam * V0[i] / B
        rV[j] += lam * V0[j] / B
    GU, GV = a * dU, a * dV
    for _ in range(n_layers):
        GU, GV = a * dU + C @ GV, a * dV + C.T @ GU
    return loss + lam * reg, GU + rU, GV + rV


@pytest.mark.parametrize("n_layers", [0, 1, 3])
def test_lightgcn_gradients_match_spec_recursion(n_layers):
    train = random_train(seed=5)
    g = NormalizedBipartite.from_train(train, dtype=torch.float64)
    model = LightGCN(g, dim=4, n_layers=n_layers, init_std=0.5, dtype=torch.float64)
    users, pos, neg = triples(g.n_users, g.n_items)
    out = model.batch_loss(users, pos, neg, reg_weight=0.01)
    out.total.backward()
    loss, GU, GV = spec_gradients(
        train,
        model.user_emb.detach().numpy(),
        model.item_emb.detach().numpy(),
        n_layers,
        users.numpy(),
        pos.numpy(),
        neg.numpy(),
        0.01,
    )
    assert abs(out.total.item() - loss) <= 1e-12 * abs(loss)
    np.testing.assert_allclose(model.user_emb.grad.numpy(), GU, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(model.item_emb.grad.numpy(), GV, rtol=1e-10, atol=1e-14)


def finite_difference(f, param, eps=1e-6):
    grad = torch.zeros_like(param)
    flat = param.data.view(-1)
    for k in range(flat.numel()):
        old = flat[k].item()
        flat[k] = old + eps
        up = f().item()
        flat[k] = old - eps
        down = f().item()
        flat[k] = old
        grad.view(-1)[k] = (up - down) / (2 * eps)
    return grad


def test_lightgcn_plus_gradients_match_finite_differences():
    train = random_train(n_users=7, n_items=8, density=0.4, seed=2)
    g = NormalizedBipartite.from_train(train, dtype=torch.float64)
    model = LightGCNPlus(g, train, dim=3, n_layers=2, init_std=0.5, dtype=torch.float64)
    users, pos, neg = triples(g.n_users, g.n_items, size=6, seed=1)

    def f():
        return model.batch_loss(users, pos, neg, reg_weight=0.1).total

    f().backward()
    with torch.no_grad():
        for p in (model.item_w, model.item_emb):
            np.testing.assert_allclose(p.grad.numpy(), finite_difference(f, p).numpy(), rtol=1e-6, atol=1e-9)


def test_lightgcn_plus_users_follow_eq6():
    train = random_train(seed=4)
    g = NormalizedBipartite.from_train(train, dtype=torch.float64)
    model = LightGCNPlus(g, train, dim=3, n_layers=1, dtype=torch.float64)
    R = train.toarray().astype(np.float64)
    deg = R.sum(1, keepdims=True)
    expected = (R / np.sqrt(deg)) @ model.item_w.detach().numpy()
    np.testing.assert_allclose(model.user0().detach().numpy(), expected, rtol=1e-13)


def test_bprmf_is_lightgcn_without_layers():
    train = random_train(seed=6)
    g = NormalizedBipartite.from_train(train, dtype=torch.float64)
    mf = BPRMF(g, dim=4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    users, pos, neg = triples(g.n_users, g.n_items)
    loss = mf.batch_loss(users, pos, neg, reg_weight=0.0).total
    U, V = mf.user_emb, mf.item_emb
    ref = torch.nn.functional.softplus((U[users] * V[neg]).sum(-1) - (U[users] * V[pos]).sum(-1)).mean()
    torch.testing.assert_close(loss, ref, rtol=1e-14, atol=0)


def test_float32_and_float64_start_from_the_same_tables():
    g = NormalizedBipartite.from_train(random_train())
    m32 = LightGCN(g, dim=4, generator=torch.Generator().manual_seed(7), dtype=torch.float32)
    m64 = LightGCN(g, dim=4, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    torch.testing.assert_close(m32.user_emb.detach().double(), m64.user_emb.detach(), rtol=1e-7, atol=1e-8)
