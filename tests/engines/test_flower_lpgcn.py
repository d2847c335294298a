"""LP-GCN on the generic Flower engine equals LP-GCN in process (3 nodes, float64, ``real`` crypto).

A fast test drives the Flower transport over a stand-in grid whose nodes run the real node handler
on ``RecordDict`` states (every message encoded to Flower records and back); one test runs Flower's
simulation runtime (Ray), and a slow one a loopback SuperLink with SuperNodes. Each compares the
embeddings and metrics (<= 1e-10 relative), the training ledger, and checks that what the ServerApp
received of every protected kind was ciphertext only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("flwr", reason="the Flower engine needs the extra fedgraphrec[flower]")

from fedgraphrec.engines.flower.learner import FlowerLearner
from fedgraphrec.engines.flower.local import APP_DIR
from fedgraphrec.engines.flower.party_app import simulate
from fedgraphrec.runtime.flower.transport import FlowerTransport
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.data import prepare_interactions
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.protocol_learner import ProtocolLearner, initial_tables
from fedgraphrec.training.sampler import BPRSampler
from fedgraphrec.training.trainer import Trainer
from tests.engines.deploy_check import assert_deploy_equals_in_process
from tests.engines.test_flower_party import NODES, _Grid, _Meta, _Msg

SETTINGS = [
    "dataset_options.n_users=12", "dataset_options.n_items=15", "dataset_options.mean_degree=4.0",
    "dim=4", "n_layers=2", "alpha=2", "dtype='float64'", "batch_size=16", "ks=[5]", "metric='recall@5'",
    "transcripts=true", "checkpoint_every=0", "lr=0.01", "reproducible=true",
]  # fmt: skip
PROTECTED = {"user_embedding", "user_gradient", "user_degree", "virtual_flag", "wrapped_key"}


def _cfg(**values: Any) -> TrainConfig:
    return load_config(
        None,
        SETTINGS,
        **{"protocol": "lpgcn", "dataset": "synthetic", "epochs": 1, "crypto": "real", **values},
    )


def _in_process(cfg: TrainConfig, out: Path) -> tuple[Trainer, Any]:
    trainer = Trainer(cfg, out, progress=False, learner=lambda c, d: ProtocolLearner(c, d, nodes=3))
    return trainer, trainer.fit()


def _assert_same_run(got: Any, ref: Any, learner: Any, ref_trainer: Trainer) -> None:
    ref_learner: Any = ref_trainer.learner
    U, V = learner.embeddings()
    U0, V0 = ref_learner.embeddings()
    assert float((U - U0).norm() / U0.norm()) <= 1e-10 and float((V - V0).norm() / V0.norm()) <= 1e-10
    for a, b in zip(got.history, ref.history, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-10)
        for name, value in b["test"].items():
            assert a["test"][name] == pytest.approx(value, rel=1e-10, abs=1e-12)
    ledger, ref_ledger = learner.net.ledger, ref_learner.net.ledger
    training = [r for r in ledger.rows() if not r.phase.startswith(("evaluate/", "export/"))]
    assert sorted(training, key=repr) == sorted(ref_ledger.rows(), key=repr)
    # the ServerApp got user rows, user gradients, degrees, answers and wrapped keys as ciphertexts only
    got_kinds = set()
    for e in learner.net.transcript.of("server"):
        if e.kind in PROTECTED:
            got_kinds.add(e.kind)
            assert e.protected and all(isinstance(b, bytes) for b in e.payloads), e.phase
    assert got_kinds == PROTECTED
    first = initial_tables(ref_trainer.cfg, ref_trainer.data)["user_emb"]  # what step 0 sealed
    blobs = [b for e in learner.net.transcript.of("server") for b in e.payloads if isinstance(b, bytes)]
    assert not any(first[u].numpy().tobytes() in b for u in range(first.shape[0]) for b in blobs)


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        FlowerTransport, "make_message", staticmethod(lambda c, node, g: _Msg(c, _Meta(node)))
    )
    monkeypatch.setattr(FlowerTransport, "measure", staticmethod(lambda m: 0))


def test_lpgcn_over_stand_in_grid_equals_in_process(stand_in: None, tmp_path: Path) -> None:
    cfg = _cfg()
    grid = _Grid(NODES)
    made: list[FlowerLearner] = []

    def flower(c: TrainConfig, d: Any) -> FlowerLearner:
        made.append(FlowerLearner(c, d, grid, NODES, timeout=5.0))  # type: ignore[arg-type]
        return made[0]

    got = Trainer(cfg, tmp_path / "flower", progress=False, learner=flower).fit()
    ref_trainer, ref = _in_process(cfg, tmp_path / "local")
    _assert_same_run(got, ref, made[0], ref_trainer)
    assert got.summary["engine"] == "flower"


def test_lpgcn_plus_over_stand_in_grid_equals_in_process(stand_in: None) -> None:
    cfg = _cfg(model="lightgcn+", crypto="accounted")
    data = prepare_interactions(cfg)
    flower = FlowerLearner(cfg, data, _Grid(NODES), NODES, timeout=5.0)  # type: ignore[arg-type]
    ref = ProtocolLearner(cfg, data, nodes=3)
    for users, pos, neg in list(BPRSampler(data.train, seed=cfg.seed).batches(0, 16))[:3]:
        assert flower.train_batch(users, pos, neg).loss == pytest.approx(
            ref.train_batch(users, pos, neg).loss, rel=1e-10
        )
    (U, V), (U0, V0) = flower.embeddings(), ref.embeddings()
    assert float((U - U0).norm() / U0.norm()) <= 1e-10 and float((V - V0).norm() / V0.norm()) <= 1e-10
    rows = [r for r in flower.net.ledger.rows() if not r.phase.startswith(("export/", "evaluate/"))]
    assert sorted(rows, key=repr) == sorted(ref.net.ledger.rows(), key=repr)


def test_lpgcn_in_flower_simulation_equals_in_process(tmp_path: Path) -> None:
    cfg = _cfg()
    run = simulate(cfg, tmp_path / "flower", 3, export=True)
    ref_trainer, ref = _in_process(cfg, tmp_path / "local")
    assert run.learner is not None and run.embeddings is not None
    learner = run.learner
    learner.embeddings = lambda: run.embeddings  # type: ignore[method-assign,assignment,return-value]
    _assert_same_run(run.result, ref, learner, ref_trainer)


@pytest.mark.deploy
@pytest.mark.skipif(not APP_DIR.exists(), reason="deploy/flower is part of a source checkout")
def test_lpgcn_deploy_on_superlink_and_supernodes_writes_the_same_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_deploy_equals_in_process(_cfg(), tmp_path, monkeypatch)
