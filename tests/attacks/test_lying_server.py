"""The lying server's attacks really happen: the node gets the forged part, stage, hello or record.

These tests check the attack machinery (the transports' adversary hooks in both engines, and what
each attack delivers), not the nodes' defences: on a node without the defences the forged input is
simply accepted, which is what some of them observe.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from fedgraphrec.attacks.lying_server import LyingServer, forge_plain
from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.protocols.registry import REGISTRY
from fedgraphrec.runtime import endpoint
from fedgraphrec.runtime.local import LocalTransport
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.network import LyingAdversary, Network
from fedgraphrec.runtime.part import Part
from fedgraphrec.runtime.sealing import Binding, GroupChannel, party_names
from fedgraphrec.training.data import prepare_interactions
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.protocol_learner import ProtocolLearner
from tests import ring_protocol
from tests.ring_protocol import NAME

SETTINGS = [
    "dataset_options.n_users=10", "dataset_options.n_items=12", "dataset_options.mean_degree=4.0",
    "dim=4", "dtype='float64'", "batch_size=64", "checkpoint_every=0",
]  # fmt: skip


class _Recorder:
    """A node that answers everything and remembers what it got (no defences at all)."""

    def __init__(self) -> None:
        self.got: list[tuple[str, int, Message]] = []

    def handle(self, stage: str, step: int, request: Message) -> Message:
        self.got.append((stage, step, request))
        return Message()

    def group_key(self) -> SharedKey | None:
        return None


@pytest.fixture(autouse=True)
def no_defences(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """These tests check what the lying server delivers, so the node side has no defences (they are
    tested in tests/runtime, tests/protocols and by the integrity audit): the recording nodes get
    requests straight, the ring's node does not check the labels it reads."""
    if "ring" in request.fixturenames:
        monkeypatch.setattr(endpoint, "check_parts", lambda *args: None)
    else:
        monkeypatch.setattr(
            endpoint.NodeEndpoint,
            "handle",
            lambda self, node, stage, step, req: node.handle(stage, step, req),
        )


def _local(nodes: int = 2) -> tuple[LocalTransport, dict[int, _Recorder]]:
    programs = {k: _Recorder() for k in range(nodes)}
    return LocalTransport(Network(8, protocol="toy"), programs), programs  # type: ignore[arg-type]


def test_the_lying_server_is_a_lying_adversary() -> None:
    assert isinstance(LyingServer("rerun", "s"), LyingAdversary)


def test_rerun_delivers_the_stage_twice_and_reset_resends_the_first_stage() -> None:
    transport, nodes = _local()
    transport.net.adversary = LyingServer("rerun", "work")
    transport.begin_step(0)
    transport.round("setup", {n: Message(fields={"x": 1}) for n in nodes})
    transport.round("work", {n: Message() for n in nodes})
    assert [(s, t) for s, t, _ in nodes[1].got] == [("setup", 0), ("work", 0), ("work", 0)]

    transport, nodes = _local()
    adv = LyingServer("reset", reset_step=1)
    transport.net.adversary = adv
    transport.begin_step(0)
    transport.round("setup", {n: Message(fields={"x": n}) for n in nodes})
    transport.round("work", {n: Message() for n in nodes})
    transport.begin_step(1)
    transport.round("work", {n: Message() for n in nodes})
    seen = [(s, t) for s, t, _ in nodes[0].got]
    assert seen == [("setup", 0), ("work", 0), ("setup", 1), ("work", 1)] and adv.fired
    assert nodes[1].got[2][2].fields == {"x": 1}  # the original set-up request, sent again


def test_threshold_is_lowered_in_every_request_of_the_target_aggregation() -> None:
    transport, nodes = _local()
    adv = LyingServer("threshold", "agg")
    transport.net.adversary = adv
    fields = {"threshold": 5, "phase": "agg", "session": "s"}
    transport.round("secagg/advertise", {n: Message(fields=dict(fields)) for n in nodes})
    transport.round("secagg/share", {n: Message(fields={**fields, "phase": "other"}) for n in nodes})
    got = [req.fields["threshold"] for node in nodes.values() for _, _, req in node.got]
    assert got == [2, 5, 2, 5] and adv.fired and adv.secagg_phases == ["agg", "other"]


def _sealed_rows(phase: str, rows: torch.Tensor, receivers: list[int], step: int = 0) -> Part:
    """A sealed part in transit (ciphertexts only), as a node seals it: one row per message."""
    channel = GroupChannel(SharedKey.generate(), "toy")
    binding = Binding("toy", phase, step)
    senders = party_names("client", list(range(len(receivers))))
    to = party_names("client", receivers)
    from fedgraphrec.runtime.codec import encode_tensor

    plain = [encode_tensor(rows[k : k + 1]) for k in range(len(receivers))]
    blobs = channel.seal(binding, plain, binding.aads(senders, to))
    part = Part(phase, "user_gradient", "client", "server", rows, protection="sealed",
                senders=np.arange(len(receivers)), seal_to_role="client", seal_to=receivers)  # fmt: skip
    sizes = part.sizes()
    return Part(phase, "user_gradient", "server", "client", None, protection="sealed",
                senders=np.arange(len(receivers)), receivers=receivers, seal_to_role="client",
                seal_to=receivers, sealed=list(blobs), _sizes=sizes)  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_downgrade_forges_plain_rows_of_the_plaintext_shape_and_dtype(dtype: torch.dtype) -> None:
    rows = torch.randn(3, 5, dtype=torch.float64).to(dtype)
    forged = forge_plain(_sealed_rows("p", rows, [4, 5, 6]))
    assert forged is not None and forged.protection == "plain" and forged.sealed is None
    assert forged.value.shape == rows.shape and forged.value.dtype == dtype
    assert not torch.equal(forged.value, rows)  # the server's own rows
    blobs = Part("k", "share", "server", "client", [b"x" * 40, b"y" * 41], "blobs", "sealed",
                 receivers=[1, 2], presealed=True)  # fmt: skip
    forged_blobs = forge_plain(blobs)
    assert forged_blobs is not None and [len(b) for b in forged_blobs.value] == [40, 41]
    assert forged_blobs.protection == "plain" and not forged_blobs.presealed


def test_relabel_and_cross_phase_deliver_forged_parts() -> None:
    deep = _sealed_rows("backward/l=2", torch.ones(2, 3, dtype=torch.float64), [1, 2])
    shallow = _sealed_rows("backward/l=1", torch.zeros(2, 3, dtype=torch.float64), [1, 2])
    relabel = LyingServer("relabel", "backward/l=1", known={"backward/l=1": "g", "backward/l=2": "g"})
    out = relabel.tamper("s", 0, "grads", shallow, 0)
    assert out.phase == "backward/l=2" and out.sealed == shallow.sealed and relabel.fired
    cross = LyingServer("cross-phase", "backward/l=1")
    assert cross.tamper("a", 0, "grads", deep, 3) is deep
    assert cross.tamper("b", 1, "grads", shallow, 3) is shallow  # another node: no donor there
    assert cross.tamper("b", 0, "grads", shallow, 3) is deep and cross.detail == "backward/l=2"
    late = LyingServer("cross-phase", "backward/l=1")
    late.tamper("a", 0, "grads", deep, 3)
    assert late.tamper("b", 0, "grads", shallow, 4) is shallow and not late.fired  # not this step


# ---------------------------------------------------------------------------- a real protocol
@pytest.fixture
def ring(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(REGISTRY, NAME, ring_protocol.ENTRY)


def _ring_cfg() -> Any:
    return load_config(None, SETTINGS, protocol=NAME, dataset="synthetic", epochs=1, crypto="real")


def test_downgrade_reaches_the_node_in_process(ring: None) -> None:
    """A node without defences computes on the server's rows: a plain part of the sealed rows' shape."""
    cfg = _ring_cfg()
    adv = LyingServer("downgrade", "ring/rows")
    learner = ProtocolLearner(cfg, prepare_interactions(cfg), nodes=2, adversary=adv)
    learner.server.step(0)
    assert adv.fired_at is not None
    got = learner.programs[adv.fired_at[1]].state.got
    assert got.dtype == torch.float64 and got.shape[1] == 4 and bool((got == 0.25).all())
