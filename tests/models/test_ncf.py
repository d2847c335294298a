"""NCF: the all-items scorer equals the pairwise score, training lowers the loss, the loop evaluates it."""

from __future__ import annotations

import torch

from fedgraphrec.models.ncf import NCF
from fedgraphrec.models.propagation import NormalizedBipartite
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.trainer import Trainer
from tests.helpers import random_train


def _model() -> NCF:
    graph = NormalizedBipartite.from_train(random_train(9, 11, seed=2), torch.float64)
    return NCF(graph, 4, 0.3, torch.Generator().manual_seed(0), torch.float64)


def test_score_users_equals_pairwise_scores() -> None:
    m = _model()
    users = torch.tensor([0, 3, 8])
    full = m.score_users(users)
    assert full.shape == (3, 11)
    for row, u in enumerate(users.tolist()):
        pair = m.scores(torch.full((11,), u), torch.arange(11))
        assert torch.allclose(full[row], pair, atol=1e-12)


def test_training_lowers_the_loss() -> None:
    m = _model()
    opt = torch.optim.Adam(m.parameters(), lr=0.05)
    users, pos, neg = (
        torch.tensor([0, 2, 3, 4, 5]),
        torch.tensor([0, 1, 2, 2, 3]),
        torch.tensor([5, 6, 7, 8, 9]),
    )
    first = m.batch_loss(users, pos, neg, 1e-3).total.item()
    for _ in range(40):
        opt.zero_grad()
        m.batch_loss(users, pos, neg, 1e-3).total.backward()
        opt.step()
    assert m.batch_loss(users, pos, neg, 1e-3).total.item() < 0.5 * first


def test_trainer_evaluates_ncf_through_its_scorer(tmp_path) -> None:
    cfg = load_config(
        None,
        ["model=ncf", "dim=8", "epochs=2", "dataset_options.n_users=60", "dataset_options.n_items=70", "ks=[5]",
         "metric=recall@5", "lr=0.01"],
    )  # fmt: skip
    res = Trainer(cfg, tmp_path / "ncf", progress=False).fit()
    assert 0.0 <= res.summary["test"]["recall@5"] <= 1.0 and res.summary["model"] == "ncf"
