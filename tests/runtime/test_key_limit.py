"""The per-key message limit counts every message a node sealed under a key during the run.

On Flower a SuperNode rebuilds its endpoint (and channel) for every message; the count must survive
in the node's state, or a server could have a node seal without bound under one step key by asking
in many small requests. Driven through the node's public handler, as a server would.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch
from flwr.app import ConfigRecord, RecordDict

from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.engines.flower.node import handle_party
from fedgraphrec.protocols.registry import REGISTRY
from fedgraphrec.runtime import sealing
from fedgraphrec.runtime.endpoint import NodeEndpoint
from fedgraphrec.runtime.expect import Expectation, StageFlow, flow
from fedgraphrec.runtime.flower.parts import decode_message, encode_message
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part
from fedgraphrec.runtime.sealing import Binding, GroupChannel, KeyUsage
from fedgraphrec.training.loading import load_config
from tests import ring_protocol
from tests.ring_protocol import NAME

SETTINGS = [
    "dataset_options.n_users=10",
    "dataset_options.n_items=12",
    "dataset_options.mean_degree=4.0",
    "dim=4",
]
CLIENTS = 10  # one node hosting every client: each "send" seals 10 messages


def _request(stage: str, step: int, fields: dict[str, object] | None = None) -> RecordDict:
    return encode_message(Message(fields=fields or {}), {"protocol": NAME, "stage": stage, "step": step})


REPEATING = flow(
    first=["setup"], after={"setup": ["send"], "send": ["send"]}, new_step=["send"], repeats={"send": 3}
)
"""The ring's order, but ``send`` may run three times in a step: many small requests under one key."""


def _node(monkeypatch: pytest.MonkeyPatch) -> RecordDict:
    """A SuperNode's state after its hello and the ring's key set-up (real crypto)."""
    monkeypatch.setitem(REGISTRY, NAME, ring_protocol.ENTRY)
    monkeypatch.setattr(ring_protocol, "FLOW", REPEATING)
    cfg = load_config(None, SETTINGS, protocol=NAME, dataset="synthetic", crypto="real")
    state = RecordDict()
    hello = _request("setup", 0, {"key": SharedKey.generate().to_bytes()})
    hello["hello"] = ConfigRecord(
        {
            "config": json.dumps(cfg.to_dict()),
            "clients": list(range(CLIENTS)),
            "init_key": os.urandom(32).hex(),
        }
    )
    handle_party(hello, state)
    return state


def _send(state: RecordDict, step: int) -> int:
    reply = handle_party(_request("send", step), state)  # a fresh endpoint and channel every time
    return decode_message(reply)[1]["rows"].n_messages


def test_a_run_of_requests_cannot_exceed_the_limit_of_one_key(monkeypatch: pytest.MonkeyPatch) -> None:
    state = _node(monkeypatch)
    monkeypatch.setattr(sealing, "MAX_MESSAGES_PER_KEY", 25)
    assert _send(state, 1) + _send(state, 1) == 20  # 20 messages under step 1's key
    with pytest.raises(RuntimeError, match="would seal 30 messages under one key"):
        _send(state, 1)


def test_the_same_messages_over_different_step_keys_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    state = _node(monkeypatch)
    monkeypatch.setattr(sealing, "MAX_MESSAGES_PER_KEY", 25)
    assert sum(_send(state, step) for step in (1, 2, 3)) == 30


def test_the_in_process_endpoint_keeps_its_count_across_channels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sealing, "MAX_MESSAGES_PER_KEY", 5)
    usage = KeyUsage()
    key, binding = SharedKey.generate(), Binding("p", "ph", 4)
    GroupChannel(key, "p", usage=usage).seal(binding, [b"x"] * 3, [b""] * 3)
    with pytest.raises(RuntimeError, match="would seal 6 messages"):
        GroupChannel(key, "p", usage=usage).seal(binding, [b"x"] * 3, [b""] * 3)
    with pytest.raises(RuntimeError, match="earlier step"):
        GroupChannel(key, "p", usage=usage).seal(Binding("p", "ph", 3), [b"x"], [b""])

    class _Node:
        def handle(self, stage: str, step: int, request: Message) -> Message:
            rows = torch.zeros(3, 2)
            part = Part("ph", "k", "client", "server", rows, protection="sealed", senders=np.arange(3))
            return Message({"rows": part})

        def group_key(self) -> SharedKey:
            return key

        def stage_flow(self) -> StageFlow:
            return flow(first=["s"], after={"s": ["s"]}, new_step=["s"], repeats={"s": 2})

        def begin_stage(self, stage: str, occurrence: int) -> Expectation:
            return {}

    endpoint = NodeEndpoint("p", "real")
    endpoint.handle(_Node(), "s", 0, Message())
    with pytest.raises(RuntimeError, match="would seal 6 messages"):
        endpoint.handle(_Node(), "s", 0, Message())
    endpoint.handle(_Node(), "s", 1, Message())  # a fresh step key
