"""LP-GCN communication cost: neighbour sets, Eqs. 30–32 and the Fig. 13 sweep."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from fedgraphrec.data.synthetic import synthetic_interactions
from fedgraphrec.protocols.lpgcn.cover import Assignment, plan_convolution
from fedgraphrec.reproduce.lpgcn_communication import (
    CommunicationReport,
    communication_report,
    neighbour_sets,
    per_client_cost,
    reuse_ratios,
    utilisation,
    utilisation_of_sums,
)
from fedgraphrec.reproduce.lpgcn_fig13 import fig13_sweep


def _random_graph(
    n: int, m: int, density: float, alpha: int, seed: int
) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """(real, holdings): holdings add ``alpha`` virtual items per client outside its real items."""
    rng = np.random.default_rng(seed)
    real = rng.random((n, m)) < density
    real[:, -1] = False  # no real holder
    virtual = np.zeros_like(real)
    for u in range(n):
        free = np.flatnonzero(~real[u])
        virtual[u, rng.choice(free, size=min(alpha, free.size), replace=False)] = True
    return sp.csr_matrix(real.astype(np.float32)), sp.csr_matrix((real | virtual).astype(np.float32))


def _brute_force(real: sp.csr_matrix, conv: np.ndarray) -> dict[int, tuple[set[int], int]]:
    """Per convolution-client: (N_ũ, Σ_ĩ |U_ĩ \\ {ũ}|), by plain Python sets."""
    dense = real.toarray() != 0
    out: dict[int, tuple[set[int], int]] = {}
    for u in sorted({int(x) for x in conv if x >= 0}):
        neighbours: set[int] = set()
        slots = 0
        for i in np.flatnonzero(conv == u):
            others = set(np.flatnonzero(dense[:, i]).tolist()) - {u}
            slots += len(others)
            neighbours |= others
        out[u] = (neighbours, slots)
    return out


def _fig7_toy() -> tuple[sp.csr_matrix, np.ndarray]:
    # I_u1 = {i1, i2}, I_u2 = {i2}, I_u3 = {i2, i3}; conv: i1 -> u1, i2, i3 -> u3 (specs §10).
    real = sp.csr_matrix(np.array([[1, 1, 0], [0, 1, 0], [0, 1, 1]], np.float32))
    return real, np.array([0, 2, 2])


def test_fig7_toy_known_answer() -> None:
    real, conv = _fig7_toy()
    nb = neighbour_sets(real, conv)
    assert nb.convolution_clients.tolist() == [0, 2]
    assert nb.n_neighbours.tolist() == [0, 2]  # N_u1 = ∅, N_u3 = {u1, u2}
    assert nb.n_slots.tolist() == [0, 2]
    assert nb.n_conv_items.tolist() == [1, 2]
    assert per_client_cost(nb, d=64, L=4) == pytest.approx(64 * 4 * 4 * 2 / 3)
    assert utilisation(nb) == 0.0 and utilisation_of_sums(nb) == 0.0


def test_reuse_is_counted_once_per_extra_item() -> None:
    # u0 convolves items 0 and 1, both also held by u1 and u2: slots 4, |N| 2, r = (4 - 2) / 2.
    # u3 convolves item 2, held by u1 only: slots 1, |N| 1, r = 0.
    real = sp.csr_matrix(np.array([[1, 1, 0], [1, 1, 1], [1, 1, 0], [0, 0, 1]], np.float32))
    nb = neighbour_sets(real, np.array([0, 0, 3]))
    assert nb.n_neighbours.tolist() == [2, 1] and nb.n_slots.tolist() == [4, 1]
    np.testing.assert_allclose(reuse_ratios(nb), [1.0, 0.0])
    assert utilisation(nb) == pytest.approx(0.5)  # Eq. 32: mean of ratios
    assert utilisation_of_sums(nb) == pytest.approx(2 / 3)  # [R]: pooled


def test_virtual_conv_client_counts_every_real_holder() -> None:
    # Item 0 is real for u1, u2 and virtual for its convolution-client u0.
    real = sp.csr_matrix(np.array([[0, 1], [1, 0], [1, 0]], np.float32))
    nb = neighbour_sets(real, np.array([0, 0]))
    assert nb.n_neighbours.tolist() == [2] and nb.n_slots.tolist() == [2]


@pytest.mark.parametrize(("seed", "alpha"), [(0, 0), (1, 0), (2, 3), (3, 5), (4, 2)])
def test_counts_and_eqs_30_to_32_match_brute_force(seed: int, alpha: int) -> None:
    real, holdings = _random_graph(35, 45, density=0.12, alpha=alpha, seed=seed)
    plan = plan_convolution(holdings, seed, extra_fraction=0.1 * seed)
    nb = neighbour_sets(real, plan.conv_client_of_item)
    ref = _brute_force(real, plan.conv_client_of_item)
    assert nb.convolution_clients.tolist() == list(ref)
    assert nb.n_neighbours.tolist() == [len(ref[u][0]) for u in ref]
    assert nb.n_slots.tolist() == [ref[u][1] for u in ref]

    d, L = 16, 3
    total = sum(len(v[0]) for v in ref.values())
    ratios = [(s - len(N)) / len(N) if N else 0.0 for N, s in ref.values()]
    pooled = sum(s - len(N) for N, s in ref.values()) / total
    report = communication_report(real, plan, d=d, L=L)
    assert isinstance(report, CommunicationReport)
    assert report.total_neighbours == total
    assert report.cost_bytes == pytest.approx(d * L * 4 * total / 35)
    assert report.cost_kib == pytest.approx(report.cost_bytes / 1024)
    assert report.cost_kb == pytest.approx(report.cost_bytes / 1000)
    assert pytest.approx(np.mean(ratios)) == report.R
    assert report.R_pooled == pytest.approx(pooled)
    assert report.k == plan.k and report.k_fraction == pytest.approx(plan.k / 35)
    assert report.n_convolution_clients == len(ref)
    assert report.convolution_fraction == pytest.approx(len(ref) / 35)
    assert report.mean_neighbours == pytest.approx(total / len(ref))


def test_neighbour_sets_rejects_inconsistent_input() -> None:
    real, conv = _fig7_toy()
    with pytest.raises(ValueError, match="no convolution-client"):
        neighbour_sets(real, np.array([0, -1, 2]))
    with pytest.raises(ValueError, match="shape"):
        neighbour_sets(real, np.array([0, 2]))
    with pytest.raises(ValueError, match="< n"):
        neighbour_sets(real, np.array([0, 3, 2]))
    with pytest.raises(TypeError):
        neighbour_sets(real.toarray(), conv)  # type: ignore[arg-type]
    nb = neighbour_sets(real, conv)
    with pytest.raises(ValueError, match="positive"):
        per_client_cost(nb, d=0, L=1)


def test_report_rejects_a_plan_for_another_graph() -> None:
    real, conv = _fig7_toy()
    plan = Assignment(conv, np.array([0, 2]), np.array([0, 2]), np.array([0, 2]), n_clients=4)
    with pytest.raises(ValueError, match="clients"):
        communication_report(real, plan, d=8, L=1)


def test_fig13_trend_on_a_power_law_graph() -> None:
    # Deterministic (seeded); 1000 users and 5 seeds keep the seed-averaged curves monotone even
    # where they flatten (ρ = 0.6 -> 0.9 moves C by ~0.7 %).
    data = synthetic_interactions(1000, 1500, mean_degree=25, seed=0, exponent=1.0)
    fractions = [0.0, 0.1, 0.3, 0.6, 0.9]
    rows = fig13_sweep(data.train, data.train, fractions, seeds=range(5), d=64, L=3)
    assert [r["fraction"] for r in rows] == fractions
    x = np.array([r["convolution_fraction"] for r in rows])
    cost = np.array([r["cost_kib"] for r in rows])
    R = np.array([r["R"] for r in rows])
    R_pooled = np.array([r["R_pooled"] for r in rows])
    assert np.all(np.diff(x) > 0)
    assert np.all(np.diff(cost) >= 0) and cost[-1] > cost[0]
    assert np.all(np.diff(R) <= 0) and R[-1] < R[0]
    assert np.all(np.diff(R_pooled) <= 0)
    assert rows[0]["k_fraction"] == pytest.approx(rows[0]["convolution_fraction"])  # ρ = 0: Ũ = Ū


def test_fig13_sweep_averages_over_seeds() -> None:
    real, holdings = _random_graph(30, 40, density=0.15, alpha=2, seed=9)
    (row,) = fig13_sweep(real, holdings, [0.4], seeds=[0, 1], d=8, L=2)
    singles = [fig13_sweep(real, holdings, [0.4], seeds=[s], d=8, L=2)[0] for s in (0, 1)]
    assert row["n_seeds"] == 2
    for key in ("cost_bytes", "R", "R_pooled", "convolution_fraction", "total_neighbours"):
        assert row[key] == pytest.approx((singles[0][key] + singles[1][key]) / 2)
    with pytest.raises(ValueError, match="seed"):
        fig13_sweep(real, holdings, [0.0], seeds=[], d=8, L=2)
