import numpy as np
import pytest
import torch

from fedgraphrec.models.propagation import NormalizedBipartite, propagate, propagate_layers
from tests.helpers import random_train


def dense_reference(train, u0, v0, n_layers):
    """D^-1/2 A D^-1/2 on the full (n+m)x(n+m) adjacency, dense, float64."""
    R = train.toarray().astype(np.float64)
    n, m = R.shape
    A = np.zeros((n + m, n + m))
    A[:n, n:] = R
    A[n:, :n] = R.T
    deg = A.sum(1)
    inv = np.where(deg > 0, 1.0 / np.sqrt(np.where(deg > 0, deg, 1)), 0.0)
    A_hat = inv[:, None] * A * inv[None, :]
    E = np.vstack([u0, v0])
    layers = [E]
    for _ in range(n_layers):
        layers.append(A_hat @ layers[-1])
    final = np.mean(layers, axis=0)
    return layers, final[:n], final[n:]


@pytest.mark.parametrize("n_layers", [0, 1, 3])
def test_propagation_matches_dense_reference(n_layers):
    train = random_train()
    g = NormalizedBipartite.from_train(train, dtype=torch.float64)
    rng = np.random.default_rng(1)
    u0, v0 = rng.normal(size=(g.n_users, 5)), rng.normal(size=(g.n_items, 5))
    layers, ref_u, ref_v = dense_reference(train, u0, v0, n_layers)
    U, V = propagate(g, torch.from_numpy(u0), torch.from_numpy(v0), n_layers)
    np.testing.assert_allclose(U.numpy(), ref_u, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(V.numpy(), ref_v, rtol=1e-12, atol=1e-14)
    us, vs = propagate_layers(g, torch.from_numpy(u0), torch.from_numpy(v0), n_layers)
    for layer, (u, v) in enumerate(zip(us, vs, strict=True)):
        np.testing.assert_allclose(np.vstack([u.numpy(), v.numpy()]), layers[layer], rtol=1e-12, atol=1e-14)
    # the item nobody trained on keeps only its own layer-0 share
    np.testing.assert_allclose(V[-1].numpy(), v0[-1] / (n_layers + 1), rtol=1e-14)


def test_fused_backward_matches_per_layer_autograd():
    g = NormalizedBipartite.from_train(random_train(seed=3), dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    u0 = torch.randn(g.n_users, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    v0 = torch.randn(g.n_items, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    wu = torch.randn(g.n_users, 4, generator=gen, dtype=torch.float64)
    wv = torch.randn(g.n_items, 4, generator=gen, dtype=torch.float64)
    U, V = propagate(g, u0, v0, 3)
    gu, gv = torch.autograd.grad((U * wu).sum() + (V * wv).sum() ** 2, (u0, v0))
    us, vs = propagate_layers(g, u0, v0, 3)
    U2, V2 = torch.stack(us).mean(0), torch.stack(vs).mean(0)
    gu2, gv2 = torch.autograd.grad((U2 * wu).sum() + (V2 * wv).sum() ** 2, (u0, v0))
    torch.testing.assert_close(gu, gu2, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(gv, gv2, rtol=1e-12, atol=1e-13)


def test_gradcheck_fused_propagation():
    g = NormalizedBipartite.from_train(random_train(n_users=6, n_items=7, density=0.4), dtype=torch.float64)
    u0 = torch.randn(g.n_users, 2, dtype=torch.float64, requires_grad=True)
    v0 = torch.randn(g.n_items, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: propagate(g, a, b, 2), (u0, v0))


def test_dtype_and_shape_mismatch_are_clear_errors():
    g = NormalizedBipartite.from_train(random_train(), dtype=torch.float32)
    with pytest.raises(ValueError, match="dtype"):
        propagate(
            g,
            torch.zeros(g.n_users, 2, dtype=torch.float64),
            torch.zeros(g.n_items, 2, dtype=torch.float64),
            1,
        )
    with pytest.raises(ValueError, match="users"):
        propagate(g, torch.zeros(g.n_users + 1, 2), torch.zeros(g.n_items, 2), 1)
    with pytest.raises(ValueError, match="layer_weights"):
        propagate(g, torch.zeros(g.n_users, 2), torch.zeros(g.n_items, 2), 1, layer_weights=[1.0])
