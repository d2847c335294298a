"""Any party-program protocol on Flower: the records codec, the transport, the node handler, the engine.

The toy ring protocol (``tests/ring_protocol.py``, registered in the protocol registry for the test) trains
through ``fedgraphrec train``'s loop in process (3 nodes) and on Flower (3 SuperNodes), ``real``
crypto, float64: same embeddings, metrics and ledger, and the ServerApp received only ciphertexts of
the sealed rows. Fast tests drive the transport over a stand-in grid whose nodes run the real node
handler on ``RecordDict`` states (no processes); one test runs Flower's simulation runtime (Ray) and
one the CLI ``flower simulate``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("flwr", reason="the Flower engine needs the extra fedgraphrec[flower]")

from flwr.app import RecordDict
from typer.testing import CliRunner

from fedgraphrec.cli._app import app
from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.engines.flower.learner import FlowerLearner
from fedgraphrec.engines.flower.local import APP_DIR, local_federation
from fedgraphrec.engines.flower.node import handle_party
from fedgraphrec.engines.flower.party_app import deploy, simulate
from fedgraphrec.protocols.registry import REGISTRY
from fedgraphrec.runtime.expect import flow
from fedgraphrec.runtime.flower.parts import decode_message, encode_message
from fedgraphrec.runtime.flower.transport import FlowerTransport, NodeError
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part
from fedgraphrec.runtime.transport import LostNodeError
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.protocol_learner import ProtocolLearner, initial_tables
from fedgraphrec.training.trainer import Trainer
from tests import ring_protocol
from tests.ring_protocol import NAME, REF

SETTINGS = [
    "dataset_options.n_users=10", "dataset_options.n_items=12", "dataset_options.mean_degree=4.0",
    "dim=4", "dtype='float64'", "batch_size=64", "ks=[5]", "metric='recall@5'", "transcripts=true", "checkpoint_every=0",
    "reproducible=true",
]  # fmt: skip


@pytest.fixture
def ring(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(REGISTRY, NAME, ring_protocol.ENTRY)


def _cfg(**values: Any) -> TrainConfig:
    return load_config(
        None, SETTINGS, **{"protocol": NAME, "dataset": "synthetic", "epochs": 2, "crypto": "real", **values}
    )


# ---------------------------------------------------------------------------- the records codec
def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    return type(a) is type(b) and a == b


def test_messages_round_trip_through_records_in_every_shape() -> None:
    rows = torch.arange(12, dtype=torch.float64).reshape(6, 2)
    fwd = Part(
        "p/f", "k", "client", "server", rows, senders=[4, 5, 6], counts=[1, 3, 2], seal_to_role="client"
    )
    fwd = fwd.forward(np.array([2, 0]), np.array([9, 8]))  # sizes kept from the original part
    one = Part("p/o", "k", "client", "server", rows, senders=np.arange(6), seal_to_role="client")
    shared = one.forward(np.array([5, 5, 1]), np.array([7, 8, 9]))  # copies share rows
    parts = {
        "rows": Part("p/r", "user_embedding", "client", "server", rows, senders=np.arange(3), counts=[2, 0, 4]),
        "np": Part("p/n", "count", "server", "client", np.arange(5, dtype=np.int32), receivers=np.arange(5)),
        "bc": Part("p/b", "item_embedding", "server", "client", rows.float(), "broadcast", receivers=[1, 2]),
        "blobs": Part("p/t", "token", "client", "server", [b"ab", b"", b"xyz"], "blobs", "pseudonymous",
                      senders=[1, 2, 3], meta={"round": 2, "name": "x"}),
        "sealed": Part("p/s", "user_embedding", "client", "server", None, protection="sealed", senders=[0, 1],
                       seal_to_role="client", seal_to=[1, 0], sealed=[b"\x00c1", None],
                       bound_senders=["client:0", "client:1"]).with_sizes(np.array([40, 41])),
        "empty": Part("p/e", "k", "server", "client", torch.zeros((0, 3)), receivers=np.zeros(0, dtype=np.int64)),
        "fwd": fwd,
        "shared": shared,
        "shares": Part("p/k", "share", "client", "server", [b"ct1", b"ct2"], "blobs", "sealed", senders=[3, 4],
                       seal_to_role="client", seal_to=[4, 3], presealed=True),
        "stand-in": Part("p/m", "masked_input", "client", "server", np.ones((1, 2)), protection="masked",
                         senders=[0], counts=[1], repeat=3, summed=True),
    }  # fmt: skip
    fields = {"i": 3, "f": 0.5, "s": "x", "b": b"\x01", "ints": [1, 2], "none": None, "empty": [],
              "nested": {"a": [1, [2]]}, "np": np.int64(7), "mixed": [1, "a"], "bools": [True, False]}  # fmt: skip
    header, back = decode_message(encode_message(Message(parts, fields), {"stage": "s", "step": 4}))
    assert header == {"stage": "s", "step": 4}
    want = {**fields, "np": 7, "nested": {"a": [1, [2]]}}
    assert back.fields == want and type(back.fields["np"]) is int
    assert list(back.parts) == list(parts)
    for name, part in parts.items():  # every field of Part, so a new field the codec drops fails here
        got = back[name]
        for f in dataclasses.fields(Part):
            want_v, got_v = getattr(part, f.name), getattr(got, f.name)
            if part.index is not None and f.name in ("value", "index"):
                # a view travels as the rows it picks: a node never gets the rows routed to others
                assert got.index is None and _same(part.rows(), got.value), name
            elif f.name == "value" and part.shape != "blobs" and want_v is not None:
                assert _same(want_v, got_v), name
            elif isinstance(want_v, np.ndarray) or isinstance(got_v, np.ndarray):
                assert want_v is not None and got_v is not None and np.array_equal(want_v, got_v), (
                    name,
                    f.name,
                )
            else:
                assert got_v == want_v, (name, f.name)
        assert np.array_equal(got.sizes(), part.sizes()), name
    assert back["fwd"].bound_senders is None and back["sealed"].bound_senders == ["client:0", "client:1"]


# ---------------------------------------------------------------------------- a stand-in grid
@dataclass
class _Meta:
    dst_node_id: int
    src_node_id: int = 0


@dataclass
class _Error:
    reason: str


@dataclass
class _Msg:
    content: Any
    metadata: _Meta
    error: _Error | None = None

    def has_error(self) -> bool:
        return self.error is not None

    def has_content(self) -> bool:
        return self.error is None


class _Grid:
    """Each node is a ``RecordDict`` state and the real node handler; ``dead`` nodes never answer."""

    def __init__(
        self, nodes: list[int], allow_export: bool = True, node_config: dict[str, Any] | None = None
    ) -> None:
        self.states = {n: RecordDict() for n in nodes}
        self.allow_export = allow_export
        self.node_config = dict(node_config or {})  # every node's own --node-config
        self.dead: set[int] = set()

    def get_node_ids(self) -> list[int]:
        return list(self.states)

    def send_and_receive(self, messages: list[_Msg], timeout: float | None = None) -> list[_Msg]:
        out = []
        for m in messages:
            node = m.metadata.dst_node_id
            if node in self.dead:
                continue
            try:
                reply = handle_party(
                    m.content, self.states[node], {NAME: REF}, self.allow_export, self.node_config
                )
            except Exception as exc:  # Flower answers with the exception's type and text
                out.append(_Msg(None, _Meta(0, node), _Error(f"{type(exc)}:<'{exc}'>")))
                continue
            out.append(_Msg(reply, _Meta(0, node)))
        return out


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch, ring: None) -> None:
    monkeypatch.setattr(
        FlowerTransport, "make_message", staticmethod(lambda c, node, g: _Msg(c, _Meta(node)))
    )
    monkeypatch.setattr(FlowerTransport, "measure", staticmethod(lambda m: 0))


NODES = [7, 2**63 + 5, 2**64 - 1]  # Flower's node ids are unsigned 64-bit


def _in_process(cfg: TrainConfig, out: Path) -> tuple[Trainer, Any]:
    trainer = Trainer(cfg, out, progress=False, learner=lambda c, d: ProtocolLearner(c, d, nodes=3))
    return trainer, trainer.fit()


def _assert_same_run(got: Any, ref: Any, got_learner: Any, ref_trainer: Trainer) -> None:
    ref_learner: Any = ref_trainer.learner
    U, V = got_learner.embeddings()
    U0, V0 = ref_learner.embeddings()
    assert float((U - U0).norm() / U0.norm()) <= 1e-10 and torch.equal(V, V0)
    for a, b in zip(got.history, ref.history, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-10)
        for name, value in b["test"].items():
            assert a["test"][name] == pytest.approx(value, rel=1e-10, abs=1e-12)
    ledger, ref_ledger = got_learner.net.ledger, ref_learner.net.ledger
    # the same training traffic; Flower's run also books its federated evaluation (and the export)
    training = [r for r in ledger.rows() if not r.phase.startswith(("evaluate/", "export/"))]
    assert sorted(training, key=repr) == sorted(ref_ledger.rows(), key=repr)
    assert {r.phase for r in ledger.rows()} - {r.phase for r in training} >= {"evaluate/items"}
    assert np.array_equal(ledger.client_received, ref_ledger.client_received)
    # what the ServerApp received of the sealed rows: ciphertexts only, no client row in the clear
    entries = [e for e in got_learner.net.transcript.of("server") if e.phase == "ring/rows"]
    blobs = [b for e in entries for b in e.payloads]
    assert entries and all(e.protected and e.protection == "sealed" for e in entries)
    assert len(blobs) == 10 * ref_learner.server.steps and all(isinstance(b, bytes) for b in blobs)
    first = initial_tables(ref_trainer.cfg, ref_trainer.data)["user_emb"]  # what step 0 sealed
    assert not any(first[u].numpy().tobytes() in b for u in range(10) for b in blobs)


def test_ring_over_stand_in_grid_equals_in_process(stand_in: None, tmp_path: Path) -> None:
    cfg = _cfg()
    grid = _Grid(NODES)
    made: list[FlowerLearner] = []

    def flower(c: TrainConfig, d: Any) -> FlowerLearner:
        made.append(FlowerLearner(c, d, grid, NODES, timeout=5.0))  # type: ignore[arg-type]
        return made[0]

    got = Trainer(cfg, tmp_path / "flower", progress=False, learner=flower).fit()
    ref_trainer, ref = _in_process(cfg, tmp_path / "local")
    _assert_same_run(got, ref, made[0], ref_trainer)
    assert got.summary["engine"] == "flower" and got.summary["flower"]["traffic"]["rounds"] > 0
    assert "engine" not in ref.summary


LENIENT = flow(
    first=["setup"], after={"setup": ["send"], "send": ["send", "receive"], "receive": ["send"]},
    new_step=["send"], repeats={"send": 3},
)  # fmt: skip
"""The ring's order, but ``send`` may be asked again in a step (after a refused step, a lost node)."""


def test_lost_and_failing_nodes_are_named(stand_in: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ring_protocol, "FLOW", LENIENT)
    cfg = _cfg()
    from fedgraphrec.training.data import prepare_interactions

    data = prepare_interactions(cfg)
    grid = _Grid(NODES, allow_export=False)
    learner = FlowerLearner(cfg, data, grid, NODES, timeout=5.0)  # type: ignore[arg-type]
    with pytest.raises(NodeError, match="does not export"):
        learner.embeddings()
    learner.net.adversary = _Swap()
    with pytest.raises(IntegrityError, match=r"rejected a message.*failed authentication"):
        learner.server.train_step(*[torch.zeros(1, dtype=torch.long)] * 3)
    learner.net.adversary = None
    grid.dead.add(NODES[1])
    transport = learner.transport
    with pytest.raises(LostNodeError, match=str(NODES[1])):
        transport.round("send", {n: Message() for n in NODES})
    replies = transport.round("send", {n: Message() for n in NODES}, allow_loss=True)
    assert list(replies) == [NODES[0], NODES[2]] and transport.lost == {NODES[1]}


class _Swap:
    """An active server that swaps the first two messages it forwards."""

    def forward(self, phase: str, step: int, payloads: list[Any], receivers: Any) -> list[Any]:
        out = list(payloads)
        if len(out) > 1:
            out[0], out[1] = out[1], out[0]
        return out


def test_a_request_before_the_hello_is_refused(ring: None) -> None:
    content = encode_message(Message(), {"protocol": NAME, "stage": "send", "step": 0})
    with pytest.raises(RuntimeError, match="never got the run's hello"):
        handle_party(content, RecordDict())


# ---------------------------------------------------------------------------- Flower's simulation runtime
def test_ring_in_flower_simulation_equals_in_process(ring: None, tmp_path: Path) -> None:
    cfg = _cfg(epochs=1)
    run = simulate(cfg, tmp_path / "flower", 3, specs={NAME: REF}, export=True)
    ref_trainer, ref = _in_process(cfg, tmp_path / "local")
    assert run.learner is not None and run.embeddings is not None
    learner = run.learner
    learner.embeddings = lambda: run.embeddings  # type: ignore[method-assign,assignment,return-value]
    _assert_same_run(run.result, ref, learner, ref_trainer)
    flower = run.result.summary["flower"]
    assert flower["nodes"] == 3 and flower["traffic"]["sent_bytes"] > 0 and flower["lost_nodes"] == []


def test_cli_flower_simulate_writes_the_run_folder(ring: None, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["flower", "simulate", NAME, "--supernodes", "2", "--dataset", "synthetic", "--epochs", "1",
            "--crypto", "real", "--out", str(out)] + [a for s in SETTINGS for a in ("--set", s)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    for name in ("config.toml", "metrics.jsonl", "summary.json", "curves.png", "ledger.csv", "ledger.json",
                 "flower.json", "transcripts/server.jsonl", "transcripts/client.jsonl"):  # fmt: skip
        assert (out / name).exists(), name
    summary = json.loads((out / "summary.json").read_text())
    assert summary["protocol"] == NAME and summary["engine"] == "flower" and summary["test"]
    assert summary["flower"]["nodes"] == 2 and summary["flower"]["traffic"]["rounds"] >= 4
    trace = json.loads((out / "flower.json").read_text())
    assert len(trace["rounds"]) == summary["flower"]["traffic"]["rounds"]


# ---------------------------------------------------------------------------- a real SuperLink and SuperNodes
def _ledger_rows(run: Path) -> list[str]:
    lines = (run / "ledger.csv").read_text().splitlines()[1:]
    return sorted(ln for ln in lines if not ln.startswith("evaluate/"))


@pytest.mark.deploy
@pytest.mark.skipif(not APP_DIR.exists(), reason="deploy/flower is part of a source checkout")
def test_deploy_on_superlink_and_supernodes_writes_the_same_run(
    ring: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the SuperNodes and the ServerApp are processes of their own: register the toy there too
    monkeypatch.setenv("FEDGRAPHREC_PROTOCOLS", f"{NAME}={REF}")
    root = Path(__file__).resolve().parents[2]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    cfg = _cfg()
    with local_federation(tmp_path / "fed", 3) as fed:
        summary = deploy(cfg, tmp_path / "flower", 3, fed.connection, env=fed.env, timeout=120, limit_s=900)
    _, ref = _in_process(cfg, tmp_path / "local")
    assert summary["engine"] == "flower" and summary["flower"]["nodes"] == 3
    for name, value in ref.summary["test"].items():
        assert summary["test"][name] == pytest.approx(value, rel=1e-10, abs=1e-12)
    assert _ledger_rows(tmp_path / "flower") == _ledger_rows(tmp_path / "local")
    for name in ("config.toml", "metrics.jsonl", "curves.png", "flower.json", "transcripts/server.jsonl"):
        assert (tmp_path / "flower" / name).exists(), name
