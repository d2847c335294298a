"""FedPerGNN and FedNCF on Flower's simulation runtime: 3 SuperNodes, synthetic data, float64, ``real``
crypto — the same model, losses, metrics and training ledger as the in-process run on 3 nodes. What the
ServerApp received: FedNCF's uploads only as masked vectors and presealed shares; FedPerGNN's third party
item tokens, not item ids (by FedPerGNN's design the server sees the users' LDP-noised plain uploads and
the third party their embeddings)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("flwr", reason="the Flower engine needs the extra fedgraphrec[flower]")

from fedgraphrec.engines.flower.party_app import simulate
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.protocol_learner import ProtocolLearner
from fedgraphrec.training.trainer import Trainer

SETTINGS = [
    "dataset_options.n_users=12", "dataset_options.n_items=15", "dataset_options.mean_degree=4.0",
    "dim=4", "dtype='float64'", "ks=[5]", "metric='recall@5'", "transcripts=true", "checkpoint_every=0",
    "clients_per_round=6", "local_steps=2", "n_negatives=4", "lr=0.05", "reproducible=true",
]  # fmt: skip


def _cfg(protocol: str, *extra: str, **values: Any) -> TrainConfig:
    return load_config(
        None,
        [*extra],
        shared=SETTINGS,
        protocol=protocol,
        dataset="synthetic",
        epochs=2,
        crypto="real",
        **values,
    )


def _in_process(cfg: TrainConfig, out: Path) -> tuple[Trainer, Any]:
    trainer = Trainer(cfg, out, progress=False, learner=lambda c, d: ProtocolLearner(c, d, nodes=3))
    return trainer, trainer.fit()


def _same_history(got: Any, ref: Any) -> None:
    assert len(got.history) == len(ref.history)
    for a, b in zip(got.history, ref.history, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-10)
        for name, value in b.get("test", {}).items():
            assert a["test"][name] == pytest.approx(value, rel=1e-10, abs=1e-12)


def _training_rows(learner: Any) -> list[Any]:
    skip = ("evaluate/", "export/", "predict/")  # evaluation traffic differs by design (module docstring)
    return sorted((r for r in learner.net.ledger.rows() if not r.phase.startswith(skip)), key=repr)


def test_fedpergnn_in_flower_simulation_equals_in_process(tmp_path: Path) -> None:
    cfg = _cfg("fedpergnn", "n_pseudo=2", "ldp_clip=0.05", "ldp_scale=0.01")  # seeded noise on
    run = simulate(cfg, tmp_path / "flower", 3, export=True)
    ref_trainer, ref = _in_process(cfg, tmp_path / "local")
    assert run.learner is not None and run.embeddings is not None
    _same_history(run.result, ref)
    U, V = run.embeddings
    U0, V0 = ref_trainer.learner.embeddings()  # type: ignore[union-attr]
    assert float((U - U0).norm() / U0.norm()) <= 1e-10 and float((V - V0).norm() / V0.norm()) <= 1e-10
    assert _training_rows(run.learner) == _training_rows(ref_trainer.learner)
    # the ServerApp saw item tokens (pseudonymous), public and wrapped keys, and the users' noisy uploads
    # (FedPerGNN's design); never the token key S
    seen = run.learner.net.transcript.of("third-party")
    tokens = [e for e in seen if e.phase == "setup/expand-upload"]
    assert tokens and all(e.protection == "pseudonymous" for e in tokens)
    everything = b"".join(b for e in tokens for b in e.payloads)
    assert all(int(i).to_bytes(8, "little") + bytes(8) not in everything for i in range(15))


def test_fedncf_in_flower_simulation_equals_in_process(tmp_path: Path) -> None:
    cfg = _cfg("fedncf", "ncf_hidden=[6, 3]", "secagg_threshold=0.6", model="ncf")
    run = simulate(cfg, tmp_path / "flower", 3)
    ref_trainer, ref = _in_process(cfg, tmp_path / "local")
    assert run.learner is not None
    _same_history(run.result, ref)
    got, want = run.learner.server, ref_trainer.learner.server  # type: ignore[union-attr]
    for a, b in zip([got.item_gmf, got.item_mlp, *got.weights], [want.item_gmf, want.item_mlp, *want.weights],
                    strict=True):  # fmt: skip
        assert float((a - b).norm() / b.norm()) <= 1e-10
    assert _training_rows(run.learner) == _training_rows(ref_trainer.learner)
    # the uploads the ServerApp received are masked vectors, the shares presealed ciphertexts
    entries = run.learner.net.transcript.of("server")
    masked = [e for e in entries if e.phase == "train/upload/secagg-masked-input"]
    assert masked and all(e.protection == "masked" for e in masked)
    shares = [e for e in entries if e.phase == "train/upload/secagg-share-keys"]
    assert shares and all(e.protected for e in shares)
    assert not any(e.kind == "plain-upload" for e in entries)
