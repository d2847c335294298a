"""GNN4FR on Flower equals the in-process run: Flower's simulation engine (3 SuperNodes) and, with the
``deploy`` marker (``make test-deploy``), a loopback SuperLink with two SuperNodes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fedgraphrec.engines.flower.local import APP_DIR
from fedgraphrec.engines.flower.party_app import simulate
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.protocol_learner import ProtocolLearner, initial_tables
from fedgraphrec.training.trainer import Trainer
from tests.engines.deploy_check import assert_deploy_equals_in_process

SETTINGS = [
    "dataset_options.n_users=12", "dataset_options.n_items=14", "dataset_options.mean_degree=4.0",
    "dim=4", "n_layers=2", "dtype='float64'", "batch_size=16", "ks=[5]", "metric='recall@5'",
    "transcripts=true", "checkpoint_every=0", "lr=0.05", "reproducible=true",
]  # fmt: skip
PRIVATE = {"user_embedding", "user_gradient", "item_gradient", "item_embedding"}


@pytest.mark.parametrize("paper_literal", [False, True])
def test_gnn4fr_in_flower_simulation_equals_in_process(tmp_path: Path, paper_literal: bool) -> None:
    cfg = load_config(
        None, [*SETTINGS, f"paper_literal={str(paper_literal).lower()}"],
        protocol="gnn4fr", dataset="synthetic", epochs=1, crypto="real",
    )  # fmt: skip
    run = simulate(cfg, tmp_path / "flower", 3, export=True)
    trainer = Trainer(
        cfg, tmp_path / "local", progress=False, learner=lambda c, d: ProtocolLearner(c, d, nodes=3)
    )
    ref = trainer.fit()
    assert run.embeddings is not None and run.learner is not None
    U, V = run.embeddings
    U0, V0 = trainer.learner.embeddings()  # type: ignore[union-attr]
    assert float((U - U0).abs().max() / U0.abs().max()) <= 1e-10
    assert float((V - V0).abs().max() / V0.abs().max()) <= 1e-10
    for a, b in zip(run.result.history, ref.history, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-10)
        for name, value in b["test"].items():
            assert a["test"][name] == pytest.approx(value, rel=1e-10, abs=1e-12)
    ledger, ref_ledger = run.learner.net.ledger, trainer.learner.net.ledger  # type: ignore[union-attr]
    training = [r for r in ledger.rows() if not r.phase.startswith(("evaluate/", "export/"))]
    assert sorted(training, key=repr) == sorted(ref_ledger.rows(), key=repr)
    # what the ServerApp received: every embedding or gradient of a client sealed (or masked shares)
    got = run.learner.net.transcript.of("server")
    private = [e for e in got if e.kind in PRIVATE and e.sender != "server"]
    assert private and all(e.protection == "sealed" for e in private)
    first = initial_tables(cfg, trainer.data)["user_emb"]  # what step 0 sealed
    blobs = [b for e in got for b in e.payloads if isinstance(b, bytes)]
    assert not any(first[u].numpy().tobytes() in b for u in range(first.shape[0]) for b in blobs)
    assert not torch.equal(U, torch.zeros_like(U))


@pytest.mark.deploy
@pytest.mark.skipif(not APP_DIR.exists(), reason="deploy/flower is part of a source checkout")
def test_gnn4fr_deploy_on_superlink_and_supernodes_writes_the_same_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = load_config(None, SETTINGS, protocol="gnn4fr", dataset="synthetic", epochs=1, crypto="real")
    assert_deploy_equals_in_process(cfg, tmp_path, monkeypatch)
