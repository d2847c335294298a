"""A node checks every request against its own expectation and stage order, never the wire's labels.

The toy ring protocol (``tests/ring_protocol.py``) declares its stage order and the parts it expects;
the tests drive a node's public handler (:meth:`NodeEndpoint.handle`) as a lying server would:
relabel a sealed part as plain with the server's own rows, deliver it under another phase, run a
stage twice or out of order, or go back a step. Each must raise :class:`IntegrityError`.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.runtime.endpoint import NodeEndpoint
from fedgraphrec.runtime.expect import FlowState, flow
from fedgraphrec.runtime.message import Message
from tests.runtime.test_transport import _ring


def _relayed(crypto: str) -> tuple[NodeEndpoint, object, Message, int]:
    """A ring node at step 0, the rows the server relays to it, and its step."""
    server, programs, _ = _ring(crypto)
    transport = server.transport
    node = transport.nodes[0]
    ups = transport.round("send", {n: Message() for n in transport.nodes})
    clients = programs[node].clients
    picks = []
    for up in ups.values():
        part = up["rows"]
        k = np.flatnonzero(np.isin(part.seal_to, clients))
        picks.append(part.forward(k, part.seal_to[k]))
    from fedgraphrec.runtime.part import Part

    request = Message({"rows": Part.concat(picks)})
    return transport.endpoints[node], programs[node], request, transport.net.step  # type: ignore[attr-defined]


@pytest.mark.parametrize("crypto", ["accounted", "real"])
def test_the_honest_relay_is_accepted(crypto: str) -> None:
    endpoint, program, request, step = _relayed(crypto)
    endpoint.handle(program, "receive", step, request)  # type: ignore[arg-type]


@pytest.mark.parametrize("crypto", ["accounted", "real"])
def test_a_sealed_part_relabelled_plain_with_the_servers_rows_is_refused(crypto: str) -> None:
    endpoint, program, request, step = _relayed(crypto)
    part = request["rows"]
    own = torch.zeros(part.n_messages, 3, dtype=torch.float64)
    forged = replace(part, protection="plain", value=own, sealed=None, index=None, batched=False)
    with pytest.raises(IntegrityError, match=r"protection 'plain'.*expects 'sealed'"):
        endpoint.handle(program, "receive", step, Message({"rows": forged}))  # type: ignore[arg-type]
    assert not torch.equal(program.state.got, own)  # type: ignore[attr-defined]


@pytest.mark.parametrize("crypto", ["accounted", "real"])
def test_a_part_under_another_phase_is_refused(crypto: str) -> None:
    endpoint, program, request, step = _relayed(crypto)
    forged = replace(request["rows"], phase="ring/other")
    with pytest.raises(IntegrityError, match=r"phase 'ring/other'.*expects 'ring/rows'"):
        endpoint.handle(program, "receive", step, Message({"rows": forged}))  # type: ignore[arg-type]


def test_an_unexpected_or_missing_part_is_refused() -> None:
    endpoint, program, request, step = _relayed("real")
    with pytest.raises(IntegrityError, match="unexpected part 'extra'"):
        endpoint.handle(program, "receive", step, Message({**request.parts, "extra": request["rows"]}))  # type: ignore[arg-type]
    endpoint, program, request, step = _relayed("real")
    with pytest.raises(IntegrityError, match=r"part 'rows' .* is missing"):
        endpoint.handle(program, "receive", step, Message())  # type: ignore[arg-type]


def test_a_stage_run_twice_in_a_step_is_refused() -> None:
    endpoint, program, request, step = _relayed("real")
    endpoint.handle(program, "receive", step, request)  # type: ignore[arg-type]
    with pytest.raises(IntegrityError, match="'receive' may not follow 'receive'"):
        endpoint.handle(program, "receive", step, request)  # type: ignore[arg-type]


def test_a_stage_out_of_order_or_from_an_earlier_step_is_refused() -> None:
    endpoint, program, request, step = _relayed("real")
    with pytest.raises(IntegrityError, match="'setup' may not follow 'send'"):
        endpoint.handle(program, "setup", step, Message(fields={"key": b""}))  # type: ignore[arg-type]
    endpoint.handle(program, "receive", step, request)  # type: ignore[arg-type]
    with pytest.raises(IntegrityError, match=r"step 0 after step 1|returns to an earlier step"):
        endpoint.handle(program, "send", step - 1, Message())  # type: ignore[arg-type]


def test_the_flow_counts_repeats_and_survives_a_record_round_trip() -> None:
    rules = flow(
        first=["a"], after={"a": ["b"], "b": ["b", "c"], "c": ["a", "b"]}, new_step=["a"], repeats={"b": 3}
    )
    state = FlowState()
    assert state.advance("p", rules, "a", 0) == 0
    assert [state.advance("p", rules, "b", 0) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(IntegrityError, match="already ran 3 time"):
        state.advance("p", rules, "b", 0)
    state = FlowState.from_record(state.to_record())
    assert state.advance("p", rules, "c", 0) == 0
    with pytest.raises(IntegrityError, match="cannot open a new step"):
        FlowState.from_record(state.to_record()).advance("p", rules, "b", 1)
    with pytest.raises(IntegrityError, match="must begin with"):
        FlowState().advance("p", rules, "b", 0)
    with pytest.raises(IntegrityError, match="no such stage"):
        state.advance("p", rules, "zzz", 1)


def test_a_part_naming_its_senders_where_the_node_expects_none_is_refused() -> None:
    endpoint, program, request, step = _relayed("real")
    part = request["rows"]
    named = replace(part, bound_senders=[f"client:{int(u)}" for u in part.senders])  # type: ignore[union-attr]
    with pytest.raises(IntegrityError, match="sender names"):
        endpoint.handle(program, "receive", step, Message({"rows": named}))  # type: ignore[arg-type]


def test_a_broadcast_of_another_shape_than_the_node_knows_is_refused() -> None:
    from fedgraphrec.runtime.expect import Expect, check_content
    from fedgraphrec.runtime.part import Part

    exp = Expect("sync/W", kind="item_embedding", shape="broadcast", dtype=torch.float64, dims=(30, 4))
    good = Part(
        "sync/W", "item_embedding", "server", "client", torch.zeros(30, 4, dtype=torch.float64), "broadcast"
    )
    check_content("p", "s", "W", exp, good)
    for bad in (torch.zeros(29, 4, dtype=torch.float64), torch.zeros(30, 4, 1, dtype=torch.float64)):
        with pytest.raises(IntegrityError, match=r"has shape .* this node expects \(30, 4\)"):
            check_content("p", "s", "W", exp, replace(good, value=bad))
