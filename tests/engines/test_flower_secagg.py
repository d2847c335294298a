"""FedGRec and FedMF on the Flower engine: their client programs (local training, the client side of
secure aggregation) on the nodes; same embeddings, metrics and training ledger as in process.

Fast tests drive the Flower transport over a stand-in grid whose nodes run the real node handler on
``RecordDict`` states (every stage's state goes through arrays); one test per protocol runs Flower's
simulation runtime (Ray); a slow one deploys FedGRec on a loopback SuperLink with three SuperNodes
and kills one in the middle of a round's secure aggregation.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower engine needs the extra fedgraphrec[flower]")

from flwr.common.constant import ErrorCode

from fedgraphrec.engines.flower.learner import FlowerLearner
from fedgraphrec.engines.flower.local import APP_DIR, local_federation
from fedgraphrec.engines.flower.party_app import deploy, simulate
from fedgraphrec.runtime.flower.transport import FlowerTransport
from fedgraphrec.runtime.local import LocalTransport
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.protocol_learner import ProtocolLearner, initial_tables
from fedgraphrec.training.trainer import Trainer
from tests.engines.test_flower_party import _Grid, _Meta, _Msg

BASE = [
    "dataset_options.n_users=18", "dataset_options.n_items=22", "dataset_options.mean_degree=4.0",
    "dim=4", "dtype='float64'", "ks=[5]", "metric='recall@5'", "transcripts=true", "checkpoint_every=0",
    "frac_bits=40", "reproducible=true",
]  # fmt: skip
FEDGREC = ["n_layers=2", "clients_per_round=8", "n_negatives=6", "local_steps=2", "dropout_before=0.15",
           "dropout_after=0.15", "lr=0.05", "reproducible=true"]  # fmt: skip
FEDMF = ["batch_size=32", "lr=0.05"]
NODES = [11, 2**63 + 3, 2**64 - 2]
LOSS = ["dropout_before=0", "dropout_after=0", "secagg_threshold=0.4", "secagg_semi_honest=true"]
"""Losing one of three nodes loses about a third of every later round: below the malicious-server
threshold, so these runs accept an honest-but-curious server's threshold."""
LOSS_NODE = "secagg-threshold=0.4 secagg-semi-honest=true"
"""Each node's own ``--node-config`` opting into that threshold (a node refuses a lower one by default)."""


def _cfg(protocol: str, crypto: str = "real", epochs: int = 2, extra: list[str] | None = None) -> TrainConfig:
    settings = BASE + (FEDGREC if protocol == "fedgrec" else FEDMF) + (extra or [])
    model = {"fedmf": "mf"}.get(protocol, "lightgcn")
    return load_config(None, [], shared=settings, protocol=protocol, dataset="synthetic", epochs=epochs,
                       crypto=crypto, model=model)  # fmt: skip


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        FlowerTransport, "make_message", staticmethod(lambda c, node, g: _Msg(c, _Meta(node)))
    )
    monkeypatch.setattr(FlowerTransport, "measure", staticmethod(lambda m: 0))


def _in_process(cfg: TrainConfig, out: Path) -> tuple[Trainer, Any]:
    trainer = Trainer(cfg, out, progress=False, learner=lambda c, d: ProtocolLearner(c, d, nodes=3))
    return trainer, trainer.fit()


def _training_rows(learner: Any) -> list[Any]:
    skip = ("evaluate/", "export/", "predict/")  # evaluation traffic differs between engines by design
    return sorted((r for r in learner.net.ledger.rows() if not r.phase.startswith(skip)), key=repr)


def _assert_same_run(got: Any, ref: Any, got_learner: Any, ref_trainer: Trainer, embeddings: Any) -> None:
    U, V = embeddings
    U0, V0 = ref_trainer.learner.embeddings()
    assert float((U - U0).norm() / U0.norm()) <= 1e-10 and float((V - V0).norm() / V0.norm()) <= 1e-10
    for a, b in zip(got.history, ref.history, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-10)
        for name, value in b["test"].items():
            assert a["test"][name] == pytest.approx(value, rel=1e-10, abs=1e-12)
    assert _training_rows(got_learner) == _training_rows(ref_trainer.learner)


def _assert_server_holds_no_private_rows(learner: Any, cfg: TrainConfig, data: Any) -> None:
    """What the ServerApp received of the protected kinds: masked ring vectors and ciphertexts only."""
    received = learner.net.transcript.of("server")
    masked = [e for e in received if e.kind == "secagg-masked-input"]
    assert masked and all(e.protected and e.protection == "masked" for e in masked)
    values = np.concatenate([np.asarray(y).ravel() for e in masked for y in e.payloads])
    assert values.dtype == np.uint64
    near_zero = np.minimum(values, np.uint64(0) - values) < np.uint64(2**40 * 100)
    assert near_zero.mean() < 0.01  # a plain fixed-point gradient would sit near 0 (mod 2^64)
    shares = [e for e in received if e.kind == "secagg-share-keys"]
    assert shares and all(e.protection == "sealed" for e in shares)
    assert all(isinstance(b, bytes) for e in shares for b in e.payloads)
    users = initial_tables(cfg, data)["user_emb"].numpy()
    floats = [e for e in received if e.kind not in ("secagg-masked-input", "secagg-share-keys")]
    for entry in floats:  # nothing else carries a user's embedding (queries are item ids, reveals shares)
        for payload in entry.payloads:
            blob = payload if isinstance(payload, bytes) else np.asarray(payload).tobytes()
            assert not any(users[u].tobytes() in blob for u in range(len(users)))


@pytest.mark.parametrize("protocol", ["fedgrec", "fedmf"])
def test_over_stand_in_grid_equals_in_process(stand_in: None, tmp_path: Path, protocol: str) -> None:
    cfg = _cfg(protocol)
    grid = _Grid(NODES)
    made: list[FlowerLearner] = []

    def flower(c: TrainConfig, d: Any) -> FlowerLearner:
        made.append(FlowerLearner(c, d, grid, NODES, timeout=5.0))  # type: ignore[arg-type]
        return made[0]

    trainer = Trainer(cfg, tmp_path / "flower", progress=False, learner=flower)
    got = trainer.fit()
    ref_trainer, ref = _in_process(cfg, tmp_path / "local")
    _assert_same_run(got, ref, made[0], ref_trainer, made[0].embeddings())
    _assert_server_holds_no_private_rows(made[0], cfg, trainer.data)


@pytest.mark.parametrize("protocol", ["fedgrec", "fedmf"])
def test_in_flower_simulation_equals_in_process(tmp_path: Path, protocol: str) -> None:
    cfg = _cfg(protocol, crypto="accounted", epochs=1)
    run = simulate(cfg, tmp_path / "flower", 3, export=True)
    ref_trainer, ref = _in_process(cfg, tmp_path / "local")
    assert run.learner is not None and run.embeddings is not None
    _assert_same_run(run.result, ref, run.learner, ref_trainer, run.embeddings)
    assert run.result.summary["flower"]["nodes"] == 3


class _LoseNode(LocalTransport):
    """In process: a node dies when ``stage`` of ``step`` arrives (its request sent, never answered)."""

    at: tuple[str, int, int] = ("", -1, -1)

    def round(self, stage: str, requests: Any, *, allow_loss: bool = False) -> Any:
        node = self.at[2]
        if (stage, self.net.step) == self.at[:2] and node not in self.lost:
            if node in requests:
                self._sent(requests[node])  # sent (and booked), as a real server sends it
            self.lost.add(node)
        return super().round(stage, requests, allow_loss=allow_loss)


class _FederatedEval(ProtocolLearner):
    """In process, evaluated as the Flower engine evaluates: on the nodes still online."""

    def evaluate_federated(self, ks: list[int]) -> dict[str, dict[str, float]]:
        self.server.predict()
        return self.server.evaluate(ks)


def _lose(cfg: TrainConfig, out: Path, position: int, stage: str, step: int) -> Any:
    def make(c: TrainConfig, d: Any) -> ProtocolLearner:
        learner = _FederatedEval(c, d, nodes=3)
        learner.transport.__class__ = _LoseNode
        learner.transport.at = (stage, step, position)  # type: ignore[attr-defined]
        return learner

    return Trainer(cfg, out, progress=False, learner=make).fit()


def test_a_node_lost_mid_aggregation_in_process_is_recovered_exactly(tmp_path: Path) -> None:
    """The in-process twin of the deployment test: the round goes on, its sum is exact."""
    cfg = _cfg("fedgrec", crypto="real", epochs=3, extra=LOSS)
    got = _lose(cfg, tmp_path / "lost", 1, "secagg/mask", 1)
    plain = Trainer(cfg, tmp_path / "plain", progress=False,
                    learner=lambda c, d: ProtocolLearner(c, d, nodes=3)).fit()  # fmt: skip
    assert got.history[0]["loss"] == plain.history[0]["loss"]  # the same until the failure
    assert got.history[1]["clients_lost"] > 0 and got.history[2]["loss"] != plain.history[2]["loss"]


@pytest.mark.deploy
@pytest.mark.skipif(not APP_DIR.exists(), reason="deploy/flower is part of a source checkout")
def test_fedgrec_recovers_when_a_supernode_dies_mid_aggregation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real crypto on a loopback SuperLink: one of three SuperNodes dies when round 0's masked inputs
    are requested; secure aggregation drops its users and sums the others' uploads exactly, so the
    model, and the metrics over the users still online, equal an in-process twin losing that shard."""
    root = Path(__file__).resolve().parents[2]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root / "src"), os.environ.get("PYTHONPATH", "")]))
    cfg = _cfg("fedgrec", crypto="real", epochs=1, extra=[*LOSS, "n_layers=1"])
    crash = [LOSS_NODE, f'crash-at="secagg/mask|0" {LOSS_NODE}', LOSS_NODE]
    with local_federation(tmp_path / "fed", 3, crash) as fed:
        summary = deploy(cfg, tmp_path / "flower", 3, fed.connection, env=fed.env, timeout=60, limit_s=2400)
    assert summary["flower"]["nodes"] == 3 and len(summary["flower"]["lost_nodes"]) == 1
    assert _history(tmp_path / "flower")[0]["clients_lost"] > 0
    # which shard died depends on Flower's node ids: exactly one in-process twin losing a shard at the
    # same stage gives the same metrics (hence the same exact sum) and the same training ledger
    matches = []
    for k in range(3):
        twin = _lose(cfg, tmp_path / f"twin{k}", k, "secagg/mask", 0)
        same = all(
            summary["test"][name] == pytest.approx(value, rel=1e-10, abs=1e-12)
            for name, value in twin.summary["test"].items()
        )
        matches.append(same and _ledger(tmp_path / "flower") == _ledger(tmp_path / f"twin{k}"))
    assert matches.count(True) == 1, matches


def _ledger(run: Path) -> list[str]:
    lines = (run / "ledger.csv").read_text().splitlines()[1:]
    return sorted(ln for ln in lines if not ln.startswith(("evaluate/", "predict/", "export/")))


def _history(run: Path) -> list[dict[str, Any]]:
    import json

    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]


@dataclass
class _Unavailable:
    reason: str = "Node Unavailable"
    code: int = ErrorCode.NODE_UNAVAILABLE


class _HeartbeatGrid(_Grid):
    """As a SuperLink reports a SuperNode that died: an error reply saying the node is unavailable."""

    def send_and_receive(self, messages: list[_Msg], timeout: float | None = None) -> list[_Msg]:
        live = [m for m in messages if m.metadata.dst_node_id not in self.dead]
        gone = [_Msg(None, _Meta(0, m.metadata.dst_node_id), _Unavailable()) for m in messages  # type: ignore[arg-type]
                if m.metadata.dst_node_id in self.dead]  # fmt: skip
        return super().send_and_receive(live, timeout) + gone


def test_a_supernode_reported_unavailable_is_a_lost_node(stand_in: None) -> None:
    cfg = _cfg("fedgrec", crypto="real", epochs=1, extra=LOSS)
    from fedgraphrec.training.data import prepare_interactions

    data = prepare_interactions(cfg)
    grid = _HeartbeatGrid(NODES, node_config={"secagg-threshold": 0.4, "secagg-semi-honest": True})
    learner = FlowerLearner(cfg, data, grid, NODES, timeout=5.0)  # type: ignore[arg-type]
    grid.dead.add(NODES[1])
    stats = learner.train_round(0)  # the dead node's sampled users drop out; the round completes
    assert learner.transport.lost == {NODES[1]} and stats.loss > 0
    assert learner.last_round["clients_lost"] > 0
