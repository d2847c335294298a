"""The lying server's Flower-only attacks reach the SuperNode's handler (``handle_party``) as records.

The loopback grid (:mod:`fedgraphrec.engines.flower.loopback`) hands every encoded request to the real
node handler in process; these tests check that a re-run, a reset with a fresh hello, a forged hello
and malformed records are what the node receives (the attack machinery, not the node's defences).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
import torch

pytest.importorskip("flwr", reason="the Flower engine needs the extra fedgraphrec[flower]")

from fedgraphrec.attacks.lying_server import LyingServer
from fedgraphrec.attacks.malformed_records import malform
from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.engines.flower.loopback import LoopbackLearner
from fedgraphrec.protocols.registry import REGISTRY
from fedgraphrec.runtime.flower.parts import encode_message
from fedgraphrec.runtime.message import Message
from fedgraphrec.training.data import prepare_interactions
from tests import ring_protocol
from tests.attacks.test_lying_server import _ring_cfg, _sealed_rows
from tests.ring_protocol import NAME


@pytest.fixture
def ring(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(REGISTRY, NAME, ring_protocol.ENTRY)


class _Spy:
    """Wraps a loopback grid: remembers every request's stage, step, node and hello."""

    def __init__(self, grid: Any) -> None:
        self.grid = grid
        self.seen: list[tuple[str, int, int, dict[str, Any] | None]] = []

    def send_and_receive(self, messages: list[Any], timeout: float | None = None) -> list[Any]:
        for m in messages:
            header = m.content.config_records["header"]
            hello = m.content.config_records.get("hello")
            self.seen.append((str(header["stage"]), int(header["step"]), m.metadata.dst_node_id,
                              None if hello is None else dict(hello)))  # fmt: skip
        return self.grid.send_and_receive(messages, timeout)


def _flower_ring(adv: LyingServer) -> tuple[Any, _Spy]:
    cfg = _ring_cfg()
    learner = LoopbackLearner(cfg, prepare_interactions(cfg), 2, adv)
    spy = _Spy(learner.grid)
    learner.transport.grid = spy  # type: ignore[attr-defined]
    return learner, spy


def test_flower_rerun_and_reset_reach_the_node_handler_which_refuses_them(ring: None) -> None:
    learner, spy = _flower_ring(LyingServer("rerun", "receive"))
    with pytest.raises(IntegrityError, match="'receive' may not follow 'receive'"):
        learner.server.step(0)
    assert [s for s, _, n, _ in spy.seen if n == 1] == ["send", "receive", "receive"]
    adv = LyingServer("reset", reset_step=1)
    learner, spy = _flower_ring(adv)
    learner.server.step(0)
    with pytest.raises(IntegrityError, match="a second hello"):
        learner.server.step(1)
    node1 = [(s, t, hello is not None) for s, t, n, hello in spy.seen if n == 1]
    assert node1[-1] == ("setup", 1, True) and adv.fired


def test_flower_forged_hello_switching_a_node_to_accounted_is_refused(ring: None) -> None:
    adv = LyingServer("reset-accounted", reset_step=1)
    learner, spy = _flower_ring(adv)
    learner.server.step(0)
    with pytest.raises(IntegrityError, match="a second hello"):
        learner.server.step(1)
    forged = [h for s, t, n, h in spy.seen if h is not None and t == 1]
    assert len(forged) == 1 and json.loads(forged[0]["config"])["crypto"] == "accounted"
    assert not adv.leaked  # the node sent nothing in the clear


@pytest.mark.parametrize("attack", ["truncate", "dtype", "shape", "count"])
def test_malformed_records_reach_the_node_handler(ring: None, attack: str) -> None:
    part = _sealed_rows("p", torch.ones(3, 2, dtype=torch.float64), [1, 2, 3])
    content = encode_message(Message({"x": part}), {"stage": "s"})
    before = {k: a.numpy() for k, a in content.array_records["a.0"].items()}
    assert malform(content, attack, "other") == "" and malform(content, attack, "p")
    after = {k: a.numpy() for k, a in content.array_records["a.0"].items()}
    changed = {k for k in before if before[k].shape != after[k].shape or before[k].dtype != after[k].dtype}
    want = {
        "truncate": {"sealed"},
        "dtype": {"sealed"},
        "shape": {"sealed"},
        "count": {"sealed", "sealed_lengths"},
    }
    assert changed == want[attack]
    adv = LyingServer(attack, "ring/rows")
    learner, _ = _flower_ring(adv)
    with contextlib.suppress(Exception):  # the node may refuse; the point here is that it was sent
        learner.server.step(0)
    assert adv.fired and adv.fired_at is not None and adv.fired_at[0] == "receive"


def test_a_share_that_fails_authentication_on_a_node_is_an_integrity_error(
    ring: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node's ``DecryptionError`` (an ``IntegrityError``) reaches the server as one, as in process."""
    from fedgraphrec.crypto.errors import DecryptionError, IntegrityError
    from fedgraphrec.engines.flower import loopback

    learner, _ = _flower_ring(LyingServer("observe"))

    def refuse(content: Any, state: Any) -> Any:
        raise DecryptionError("secagg share failed authentication")

    monkeypatch.setattr(loopback, "handle_party", refuse)
    with pytest.raises(IntegrityError, match=r"node 1 rejected a message.*DecryptionError.*secagg share"):
        learner.server.step(0)
