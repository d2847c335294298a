"""A SuperNode's session is fixed once per run by its own configuration, not by what the server says.

Driven through the node's public handler (:func:`handle_party`) with real encoded records, as the
ServerApp's messages reach it: a second hello mid-run (which used to reset the node's stage order and
crypto mode), a hello asking for another crypto mode than the node operator configured, and a hello
lowering the secure-aggregation threshold are all refused.
"""

from __future__ import annotations

import json

import pytest
from flwr.app import ConfigRecord, RecordDict

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.engines.flower.node import handle_party
from fedgraphrec.protocols.registry import REGISTRY
from fedgraphrec.runtime.flower.parts import encode_message
from fedgraphrec.runtime.message import Message
from fedgraphrec.training.config import TrainConfig
from tests import ring_protocol
from tests.engines.test_flower_party import _cfg
from tests.ring_protocol import NAME, REF

SPEC = {NAME: REF}


@pytest.fixture(autouse=True)
def ring(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(REGISTRY, NAME, ring_protocol.ENTRY)


def _request(stage: str, step: int, cfg: TrainConfig | None = None, **fields: object) -> RecordDict:
    content = encode_message(Message(fields=dict(fields)), {"protocol": NAME, "stage": stage, "step": step})
    if cfg is not None:
        config = json.dumps(cfg.to_dict())
        content["hello"] = ConfigRecord({"config": config, "clients": [0, 1, 2]})
    return content


def test_a_second_hello_mid_run_is_refused() -> None:
    state = RecordDict()
    handle_party(_request("setup", 0, _cfg(), key=b"k" * 32), state, SPEC)
    handle_party(_request("send", 0), state, SPEC)
    accounted = _cfg(crypto="accounted")
    with pytest.raises(IntegrityError, match="a second hello"):
        handle_party(_request("setup", 1, accounted, key=b""), state, SPEC)
    with pytest.raises(IntegrityError, match="'send' may not follow 'send'"):  # the session was not reset
        handle_party(_request("send", 0), state, SPEC)


def test_a_hello_with_another_crypto_mode_than_the_node_requires_is_refused() -> None:
    with pytest.raises(IntegrityError, match=r"crypto = 'accounted'.*requires 'real'"):
        handle_party(
            _request("setup", 0, _cfg(crypto="accounted"), key=b""),
            RecordDict(),
            SPEC,
            node_config={"crypto": "real"},
        )
    handle_party(
        _request("setup", 0, _cfg(), key=b"k" * 32), RecordDict(), SPEC, node_config={"crypto": "real"}
    )


def test_a_hello_lowering_the_secure_aggregation_threshold_is_refused() -> None:
    low = _cfg(secagg_threshold=0.4, secagg_semi_honest=True)
    with pytest.raises(IntegrityError, match=r"secagg_threshold = 0.4.*at least 0.6"):
        handle_party(_request("setup", 0, low, key=b"k" * 32), RecordDict(), SPEC)
    own = {"secagg-threshold": 0.4, "secagg-semi-honest": True}  # the node's operator opted in
    handle_party(_request("setup", 0, low, key=b"k" * 32), RecordDict(), SPEC, node_config=own)


@pytest.mark.parametrize(("setting", "weaker"), [("secagg_min_clients", 2), ("ldp_scale", 0.0001)])
def test_a_hello_asking_for_a_smaller_sum_or_less_noise_is_refused(setting: str, weaker: object) -> None:
    with pytest.raises(IntegrityError, match=f"{setting} = {weaker}"):
        handle_party(_request("setup", 0, _cfg(**{setting: weaker}), key=b"k" * 32), RecordDict(), SPEC)
