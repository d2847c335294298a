"""DGREC hypergraphs: Ĥ_u against the dense formula, node sets, public split; model pieces."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from fedgraphrec.protocols.dgrec.hypergraph import build_hypergraphs, public_split
from fedgraphrec.protocols.dgrec.model import ModelConfig, UserModels


def _data() -> tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]:
    train = sp.csr_matrix(np.array([[1, 1, 0, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 0, 1]], dtype=float))
    social = sp.csr_matrix(np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]], dtype=float))
    #            tag0 tag1 tag2
    tags = sp.csr_matrix(np.array([[1, 0, 0], [1, 1, 0], [0, 1, 0], [0, 0, 0], [0, 0, 1]], dtype=float))
    return train, social, tags


def test_propagation_matches_formula_and_node_sets() -> None:
    train, social, tags = _data()
    g = build_hypergraphs(train, train, social, tags, 8, np.random.default_rng(0))
    # user 0: own {0, 1} then neighbour 1's public {2, 3}
    assert g.items[0, :4].tolist() == [0, 1, 2, 3] and g.mask[0].sum() == 4
    a = tags.toarray()[[0, 1, 2, 3]]
    a = a[:, a.sum(0) > 0]  # drop tag2 (empty here)
    a = np.hstack([a, np.array([[0], [0], [0], [1.0]])])  # item 3 is tagless: singleton hyperedge
    dv, dt = a.sum(1), a.sum(0)
    expected = np.diag(dv**-0.5) @ a @ np.diag(1 / dt) @ a.T @ np.diag(dv**-0.5)
    assert np.allclose(g.prop[0, :4, :4].numpy(), expected, atol=1e-6)
    assert g.prop[0, 4:].abs().sum() == 0 and g.prop[0, :, 4:].abs().sum() == 0
    alone = build_hypergraphs(train, train, social, tags, 8, np.random.default_rng(0), use_neighbours=False)
    assert alone.mask[0].sum() == 2  # w/non-neighbor: own items only


def test_only_public_items_of_neighbours_enter() -> None:
    train, social, tags = _data()
    public = sp.csr_matrix(np.array([[1, 0, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 0, 1]], dtype=float))
    g = build_hypergraphs(train, public, social, tags, 8, np.random.default_rng(0))
    assert set(g.items[0, : int(g.mask[0].sum())].tolist()) == {0, 1, 2}  # item 3 is user 1's private


@pytest.mark.parametrize("ratio", [0.0, 0.5, 1.0])
def test_public_split_is_a_subset_of_the_right_size(ratio: float) -> None:
    rng = np.random.default_rng(0)
    train = sp.random(30, 40, density=0.2, random_state=rng, format="csr")
    train.data[:] = 1
    pub = public_split(train, ratio, np.random.default_rng(1))
    assert (pub - pub.multiply(train)).nnz == 0
    assert np.array_equal(np.diff(pub.indptr), np.round(ratio * np.diff(train.indptr)).astype(int))
    with pytest.raises(ValueError, match="public ratio"):
        public_split(train, 1.5, rng)


@pytest.mark.parametrize(
    "cfg",
    [
        ModelConfig(d=4, n_interests=3, d_interest=2, hidden=(4, 3)),
        ModelConfig(d=4, item_graph=False, pearson=False, hidden=(4, 3)),
        ModelConfig(d=4, attention=False, hidden=(4, 3)),
        ModelConfig(d=4, kind="mf"),
        ModelConfig(d=4, kind="lgn"),
    ],
)
def test_users_get_independent_gradients(cfg: ModelConfig) -> None:
    train, social, tags = _data()
    g = build_hypergraphs(train, train, social, tags, 6, np.random.default_rng(0))
    m = UserModels(3, 5, cfg, torch.Generator().manual_seed(0))
    p = {k: v.clone().requires_grad_(True) for k, v in m.params.items()}
    pos = torch.tensor([[0, 1], [2, 3], [4, 4]])
    neg = torch.tensor([[3, 4], [0, 1], [0, 2]])
    losses = m.losses(p, g.items, g.mask, g.prop, pos, neg, torch.ones(3), torch.full((3,), 3.0))
    losses[1].backward()
    grad_e = p["E"].grad
    assert grad_e is not None
    assert grad_e[[0, 2]].abs().sum() == 0 and grad_e[1].abs().sum() > 0


def test_pearson_of_identical_interests_is_one() -> None:
    x = torch.randn(1, 1, 7).expand(1, 4, 7)
    assert UserModels._pearson(x).item() == pytest.approx(1.0, abs=1e-4)
    with pytest.raises(ValueError, match="kind"):
        ModelConfig(kind="gnn")


def test_bipartite_ablation_graph_and_step() -> None:
    from fedgraphrec.protocols.dgrec.settings import DGRECSettings
    from fedgraphrec.protocols.dgrec.trainer import DGREC

    train, social, tags = _data()
    g = build_hypergraphs(train, train, social, tags, 8, np.random.default_rng(0), bipartite=True)
    k = int(g.mask[0].sum())
    nodes = g.items[0, :k].tolist()
    assert nodes == [0, 1, 2, 3, 5, 6]  # items 0-3, then tags 0 and 1 as ids 5 + t
    prop = g.prop[0, :k, :k].numpy()
    assert np.allclose(prop, prop.T) and prop[0, 1] == 0 and prop[0, 4] > 0  # item–tag edges only
    s = DGRECSettings(d=4, n_interests=2, d_interest=2, hidden=(4, 3), hypergraph=False)
    rec = DGREC(train, social, tags, s, seed=0)
    assert rec.models.params["E"].shape == (3, 5 + 3, 4)
    assert rec.step(0) >= 1
