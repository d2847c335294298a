"""Matrix-Gaussian DP for P4GCN: the global bound vs brute force, s_l(i), μ*, accountant vs dp_accounting."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from fedgraphrec.privacy.gaussian_accountant import (
    GaussianAccountant,
    delta_for,
    epsilon_for,
    mu_star,
    noise_scales,
)
from fedgraphrec.privacy.matrix_gaussian import (
    EDGE_FLIP_BOUND,
    brute_force_release_sensitivity,
    brute_force_sensitivity,
    clip_frobenius,
    global_clip_scale,
    normalized_adjacency,
    row_noise,
    sample_matrix_gaussian,
    user_sensitivity,
)
from fedgraphrec.privacy.noise_source import SecureNoise


def _graph(n: int, p: float, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    a = np.triu(rng.random((n, n)) < p, 1)
    return sp.csr_matrix((a | a.T).astype(float))


def _special_graphs() -> list[sp.csr_matrix]:
    out = []
    for n in (2, 3, 5, 8):
        star = np.zeros((n, n))
        star[0, 1:] = star[1:, 0] = 1
        path = np.diag(np.ones(n - 1), 1)
        out += [sp.csr_matrix(star), sp.csr_matrix(np.ones((n, n)) - np.eye(n)), sp.csr_matrix(path + path.T)]
        out.append(sp.csr_matrix((n, n)))  # no links at all
    return out


def test_global_bound_holds_on_every_graph_without_slack() -> None:
    """The DP guarantee: Φ(A) ≤ EDGE_FLIP_BOUND for every graph, with zero tolerance."""
    graphs = _special_graphs() + [_graph(n, p, seed) for seed, (n, p) in enumerate(
        [(n, p) for n in (4, 6, 9) for p in (0.1, 0.3, 0.6, 0.9)]
    )]  # fmt: skip
    worst = max(brute_force_release_sensitivity(a) for a in graphs)
    print(f"worst whole-release sensitivity {worst:.4f} <= bound {EDGE_FLIP_BOUND:.4f}")
    assert worst <= EDGE_FLIP_BOUND
    assert worst == pytest.approx(np.sqrt(2))  # two isolated users linked: the bound is near tight


def test_paper_local_sensitivity_is_exceeded_so_it_is_no_guarantee() -> None:
    """The paper's s_l(i) is a local, data-dependent bound: single edge flips exceed it."""
    excess = max(
        float(np.max(brute_force_sensitivity(a) / user_sensitivity(a) - 1.0))
        for a in [
            _graph(n, p, seed) for seed, (n, p) in enumerate([(8, 0.3), (10, 0.2), (12, 0.15), (9, 0.5)])
        ]
    )
    print(f"worst excess of brute force over s_l = {excess:+.4f}")
    assert excess > 0  # if this ever fails, s_l became a real bound and the label can change


def test_sensitivity_isolated_user_formula() -> None:
    adj = sp.csr_matrix(np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]], float))
    s = user_sensitivity(adj)
    # c_o = 1 (isolated user 2): isolated -> sqrt(1/2 + 1/2); linked users: c_i = 1/2 + 1/2 = 1.
    assert s[2] == pytest.approx(1.0)
    assert s[0] == pytest.approx(np.sqrt(1.0 / 2 + 1.0))


def test_normalized_adjacency_symmetrises() -> None:
    adj = sp.csr_matrix(np.array([[0, 1], [0, 0]], float))
    lt = normalized_adjacency(adj, scale=0.5).toarray()
    np.testing.assert_allclose(lt, 0.5 * np.full((2, 2), 0.5))


@pytest.mark.parametrize(("eps", "want"), [(15, 2.998), (10, 2.197), (5, 1.256), (3, 0.818), (1, 0.314)])
def test_mu_star_values_of_spec(eps: float, want: float) -> None:
    mu = mu_star(eps, 1e-4)
    assert mu == pytest.approx(want, abs=1.5e-3)
    assert delta_for(eps, mu) == pytest.approx(1e-4, rel=1e-6)
    assert epsilon_for(mu, 1e-4) == pytest.approx(eps, rel=1e-6)


def test_accountant_agrees_with_dp_accounting() -> None:
    pld_mod = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    sigma, sens, k, delta = 3.0, 1.0, 20, 1e-4
    acc = GaussianAccountant(n_users=3)
    for _ in range(k):
        acc.record(np.array([0, 1]), np.array([sens, sens / 2]), np.array([sigma, sigma]))
    ours = acc.epsilon(delta)
    pld = pld_mod.from_gaussian_mechanism(
        standard_deviation=sigma, sensitivity=sens, value_discretization_interval=1e-4
    ).self_compose(k)
    ref = pld.get_epsilon_for_delta(delta)
    assert ours == pytest.approx(ref, rel=5e-3)
    assert acc.mu() == pytest.approx(sens / sigma * np.sqrt(k))


def test_noise_scales_meet_the_budget() -> None:
    s = np.array([0.5, 1.0, 2.0])
    sig = noise_scales(s, clip=0.1, releases=50, eps=10, delta=1e-4)
    acc = GaussianAccountant(3)
    for _ in range(50):
        acc.record(np.arange(3), 0.01 * s, sig)
    assert acc.epsilon(1e-4) == pytest.approx(10, rel=1e-6)
    with pytest.raises(ValueError, match="releases"):
        noise_scales(s, 0.1, 0, 10, 1e-4)


def test_clipping_bounds_and_noise_covariance() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 4))
    s = global_clip_scale(x, 0.1)
    assert np.linalg.norm(x / s, axis=1).max() == pytest.approx(0.1)
    assert global_clip_scale(x * 1e-3, 0.1) == 1.0  # already inside the ball: untouched
    np.testing.assert_array_equal(clip_frobenius(x * 1e-3, 0.1), x * 1e-3)
    assert np.linalg.norm(clip_frobenius(x, 0.1)) == pytest.approx(0.1)
    for source in (rng, SecureNoise()):
        e = row_noise(np.array([0.0, 2.0, 0.5]), 20000, source)
        assert not e[0].any()
        assert e[1].std() == pytest.approx(2.0, rel=0.05) and e[2].std() == pytest.approx(0.5, rel=0.05)
        assert abs(np.corrcoef(e[1], e[2])[0, 1]) < 0.05 and abs(e[1].mean()) < 0.1
    # Z = U G Vᵀ has row covariance U Uᵀ (V orthonormal): estimate it from many draws
    u = np.array([[3.0, 0.0], [1.0, 1.0]])
    zs = np.stack([sample_matrix_gaussian(u, np.eye(3), rng) for _ in range(4000)])  # (draws, 2, 3)
    cov = np.einsum("nic,njc->ij", zs, zs) / (4000 * 3)
    np.testing.assert_allclose(cov, u @ u.T, atol=0.4)
    with pytest.raises(ValueError, match="clip constant"):
        global_clip_scale(x, 0.0)
    with pytest.raises(ValueError, match="non-negative"):
        row_noise(np.array([-1.0]), 2, rng)
