"""DGREC Table 2 side-information baselines (reproduce/dgrec_central.py) on tiny synthetic data."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from fedgraphrec.privacy.laplace import laplace_scale_for
from fedgraphrec.protocols.baselines.fedpergnn.settings import FedPerGNNSettings
from fedgraphrec.reproduce.dgrec_central import SideGraphLearner, build_central, item_relations, run
from fedgraphrec.reproduce.frontier import _epsilon
from fedgraphrec.training.config import ConfigError, EvalSettings, TrainConfig
from fedgraphrec.training.loading import load_config
from tests.helpers import random_train


def _data(n_users: int = 30, n_items: int = 25):
    train = random_train(n_users, n_items, density=0.2, seed=3)
    rng = np.random.default_rng(4)
    social = sp.csr_matrix(np.triu(rng.random((n_users, n_users)) < 0.1, 1).astype(float))
    social = (social + social.T).tocsr()
    tags = sp.csr_matrix((rng.random((n_items, 4)) < 0.3).astype(float))
    return train, social, tags


@pytest.mark.parametrize("method", ["lightgcn-side", "lightgcn", "hypergnn"])
def test_short_training_lowers_the_bpr_loss(method: str) -> None:
    train, social, tags = _data()
    model, graph = build_central(method, train, social, tags, dim=8, n_layers=2, seed=0)
    assert graph and all(v for k, v in graph.items() if method != "lightgcn" or not k.startswith("item_item"))
    learner = SideGraphLearner(model, train, lr=0.01, reg=1e-4, batch_size=64, seed=0)
    curve = [learner.train_round(e).loss for e in range(15)]
    assert curve[-1] < curve[0] - 0.05


def test_item_relations_of_an_item_graph_and_of_category_tags() -> None:
    W = sp.csr_matrix(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=float))
    got, how = item_relations((W + sp.identity(3)).tocsr())
    assert how.startswith("item graph") and np.array_equal(got.toarray(), W.toarray())
    cats = sp.csr_matrix(np.array([[1, 0], [1, 1], [0, 1]], dtype=float))
    got, how = item_relations(cats)
    assert how == "items sharing a tag" and np.array_equal(got.toarray(), W.toarray())


def test_laplace_scale_for_epsilon_one_inverts_the_projects_epsilon() -> None:
    scale = laplace_scale_for(1.0, 0.1)
    assert scale == pytest.approx(0.2)
    cfg = TrainConfig(protocol="fedpergnn", settings=FedPerGNNSettings(ldp_clip=0.1, ldp_scale=scale))
    assert _epsilon(cfg) == pytest.approx(1.0)  # the frontier's ε = 2δ/λ
    with pytest.raises(ValueError, match="epsilon"):
        laplace_scale_for(0.0, 0.1)
    with pytest.raises(ValueError, match="clip"):
        laplace_scale_for(1.0, -0.1)


def test_bad_method_and_epochs_are_named() -> None:
    train, social, tags = _data()
    with pytest.raises(ValueError, match="method"):
        build_central("ngcf", train, social, tags, dim=8, n_layers=1, seed=0)
    with pytest.raises(ValueError, match="method"):
        run("ngcf", "flixster", 0, 1)
    with pytest.raises(ValueError, match="epochs"):
        run("hypergnn", "flixster", 0, 0)


def test_local_graph_off_is_fedpergnn_only() -> None:
    load_config(None, ["local_graph=false"], protocol="fedpergnn").validate()
    with pytest.raises(ConfigError, match="local_graph"):
        load_config(None, ["local_graph=false"], protocol="central")


def test_fedrec_trains_through_the_trainer_as_federated_mf(tmp_path) -> None:
    from fedgraphrec.data.types import Interactions
    from fedgraphrec.training.trainer import Trainer

    train = random_train(20, 15, density=0.3)
    data = Interactions(name="tiny", n_users=20, n_items=15, train=train, test=random_train(20, 15, seed=9))
    settings = FedPerGNNSettings(
        dim=4, lr=0.05, local_graph=False, ldp_clip=0.1, ldp_scale=laplace_scale_for(1.0, 0.1),
        clients_per_round=20, local_steps=1, n_negatives=4,
    )  # fmt: skip
    cfg = TrainConfig(
        protocol="fedpergnn", dataset="tiny", epochs=2, seed=0, checkpoint_every=0,
        eval=EvalSettings(select="last"), settings=settings,
    )  # fmt: skip
    trainer = Trainer(cfg, tmp_path, progress=False, data=data)
    result = trainer.fit()
    assert "recall@20" in result.summary["test"]
    U, V = trainer.learner.embeddings()
    assert U.shape == (20, 4) and V.shape == (15, 4)
    assert trainer.learner.ledger is not None
    assert trainer.learner.ledger.bytes_between("client", "third-party") == 0


def test_summarize_gives_mean_and_sample_std_over_seeds(tmp_path) -> None:
    import json

    from fedgraphrec.reproduce.dgrec_central import summarize

    for seed, rec in enumerate((0.10, 0.20)):
        run_json = {"dataset": "d", "method": "hypergnn", "epochs": 5, "seed": seed, "seconds": 3.0 + seed,
                    "metrics": {"recall@20": rec, "ndcg@20": rec / 2}}  # fmt: skip
        (tmp_path / f"d_hypergnn_s{seed}.json").write_text(json.dumps(run_json))
    table = summarize(tmp_path)
    assert "| d | hypergnn | 5 | 2 | 15.00 ± 7.07 | 7.50 ± 3.54 | 3–4 |" in table
