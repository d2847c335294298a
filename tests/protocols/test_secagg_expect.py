"""A node running secure aggregation checks every request against its own expectation and flow.

A toy protocol declares one secure sum per step (``start`` → the sum → ``finish``) with the pieces
of :mod:`fedgraphrec.protocols.secagg.expect`. The honest server's rounds pass in both crypto modes
(with dropouts on three nodes); a lying server, driving the nodes' public handler through the
transport, is refused with :class:`IntegrityError`: a relabelled or downgraded part, a stage out of
order or repeated, a field the node knows (phase prefix, session, length, its clients) forged, and
a secure sum downgraded to plain uploads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import pytest
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.protocols.base import ClientProgram, NodeData, shard_of
from fedgraphrec.protocols.secagg.client import SecAggState
from fedgraphrec.protocols.secagg.expect import (
    SECURE_STAGES,
    CheckedSecureSumClient,
    SumSite,
    merge_edges,
    sum_edges,
    sum_expectation,
    sum_repeats,
)
from fedgraphrec.protocols.secagg.server import plain_sum, secure_sum
from fedgraphrec.protocols.secagg.upload import SparseUpload
from fedgraphrec.runtime.expect import Expectation, StageFlow, flow
from fedgraphrec.runtime.local import LocalTransport
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.network import Network

N, L, FRAC = 9, 6, 40
Tamper = Callable[[str, int, Message], Message]


@dataclass
class ToyState:
    secagg: SecAggState = field(default_factory=SecAggState)
    included: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


class ToyClient(CheckedSecureSumClient, ClientProgram[ToyState]):
    """Client u's input is row u of ``settings["x"]``; one secure sum per step, ``toy/up`` at step s."""

    def __init__(self, settings: Any, clients: np.ndarray, data: NodeData | None) -> None:
        super().__init__(settings, clients, data)
        self.state = ToyState()

    def stage_flow(self) -> StageFlow:
        secure = self.settings.get("secure", True)
        edges = merge_edges({"finish": ["start"]}, sum_edges(["start"], ["finish"], secure=secure))
        return flow(first=["start"], after=edges, new_step=["start"], repeats=sum_repeats(1, secure=secure))

    def expect(self, stage: str) -> Expectation:
        if stage in (*SECURE_STAGES, "secagg/plain"):
            return self.secagg_expect(stage)
        return {}

    def secagg_site(self, stage: str, step: int | None = None) -> SumSite:
        return SumSite("toy/up", None if step is None else f"toy/{step}", L, self.clients, FRAC)

    def stage_start(self, step: int, request: Message) -> Message:
        return Message()

    def stage_finish(self, step: int, request: Message) -> Message:
        return Message()

    def secagg_input(self, session: str) -> SparseUpload:
        x = self.settings["x"][torch.from_numpy(self.clients)]
        pos, idx = torch.nonzero(x, as_tuple=True)
        up = SparseUpload(self.clients, L)
        up.add(pos, idx, x[pos, idx])
        return up

    def secagg_offline(self, session: str, when: Literal["before", "after"]) -> np.ndarray:
        return np.intersect1d(self.clients, self.settings.get(when, []))

    def secagg_included(self, session: str, included: np.ndarray) -> None:
        self.state.included = included


class LyingTransport(LocalTransport):
    """Delivers what :attr:`tamper` makes of each request (the server's side of the wire)."""

    tamper: Tamper | None = None

    def round(self, stage: str, requests: Any, *, allow_loss: bool = False) -> dict[int, Message]:
        if self.tamper is not None:
            requests = {n: self.tamper(stage, n, r) for n, r in requests.items()}
        return super().round(stage, requests, allow_loss=allow_loss)


def _world(crypto: str, nodes: int = 3, **settings: Any) -> tuple[LyingTransport, dict[int, np.ndarray]]:
    net = Network(N, crypto=crypto, protocol="toy")  # type: ignore[arg-type]
    x = torch.randn(N, L, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    shards = shard_of(N, list(range(nodes)))
    own = {"x": x, "secagg_threshold": 0.55, **settings}  # its policy accepts the t = 5 of n = 9 used here
    programs = {k: ToyClient(own, ids, None) for k, ids in shards.items()}
    return LyingTransport(net, programs), shards


def _step(transport: LyingTransport, shards: dict[int, np.ndarray], step: int, secure: bool = True) -> Any:
    transport.begin_step(step)
    transport.round("start", {n: Message() for n in shards})
    kw: dict[str, Any] = {"phase": "toy/up", "session": f"toy/{step}", "participants": shards, "length": L}
    if secure:
        result = secure_sum(transport, threshold=5, frac_bits=FRAC, **kw)
    else:
        result = plain_sum(transport, **kw)
    transport.round("finish", {n: Message() for n in shards})
    return result


@pytest.mark.parametrize("crypto", ["accounted", "real"])
def test_the_honest_server_passes_with_dropouts(crypto: str) -> None:
    transport, shards = _world(crypto, before=[2], after=[5, 7])
    for step in range(2):
        result = _step(transport, shards, step)
        assert result.included.tolist() == [u for u in range(N) if u != 2]


def test_the_plain_baseline_passes_when_the_node_runs_without_protection() -> None:
    transport, shards = _world("accounted", secure=False)
    assert _step(transport, shards, 0, secure=False).included.tolist() == list(range(N))


def test_a_secure_sum_downgraded_to_plain_uploads_is_refused() -> None:
    transport, shards = _world("real")
    with pytest.raises(IntegrityError, match=r"'secagg/plain'.*no such stage"):
        _step(transport, shards, 0, secure=False)


def _on(stage: str, change: Callable[[Message], Message]) -> Tamper:
    def tamper(at: str, node: int, request: Message) -> Message:
        return change(request) if at == stage else request

    return tamper


def _part(name: str, **kw: Any) -> Callable[[Message], Message]:
    def change(request: Message) -> Message:
        if name not in request:
            return request
        return Message({**request.parts, name: replace(request[name], **kw)}, request.fields)

    return change


def _field(name: str, value: Any) -> Callable[[Message], Message]:
    return lambda request: Message(request.parts, {**request.fields, name: value})


@pytest.mark.parametrize("crypto", ["accounted", "real"])
@pytest.mark.parametrize(
    ("stage", "change", "match"),
    [
        ("secagg/mask", _part("shares", protection="plain", presealed=False), "protection 'plain'"),
        ("secagg/mask", _part("shares", phase="toy/other/secagg-share-keys"), "phase 'toy/other"),
        ("secagg/mask", _part("shares", from_role="server"), "origin role 'server'"),
        ("secagg/share", _part("roster", phase="toy/other/secagg-advertise-keys"), "phase 'toy/other"),
        ("secagg/unmask", _part("survivors", kind="secagg-advertise-keys"), "kind"),
        ("secagg/advertise", _field("phase", "toy/other"), "field 'phase'"),
        ("secagg/advertise", _field("session", "toy/7"), "field 'session'"),
        ("secagg/share", _field("length", L + 1), "field 'length'"),
        ("secagg/mask", _field("frac_bits", 8), "field 'frac_bits'"),
        ("secagg/advertise", _field("clients", [0]), "field 'clients'"),
        ("secagg/mask", _field("clients", list(range(N))), "field 'clients'"),
    ],
)
def test_a_forged_part_or_field_is_refused(
    crypto: str, stage: str, change: Callable[[Message], Message], match: str
) -> None:
    transport, shards = _world(crypto)
    transport.tamper = _on(stage, change)
    with pytest.raises(IntegrityError, match=match):
        _step(transport, shards, 0)


def test_a_secure_sum_stage_out_of_order_or_twice_is_refused() -> None:
    transport, shards = _world("real")
    _step(transport, shards, 0)
    transport.begin_step(1)
    transport.round("start", {n: Message() for n in shards})
    with pytest.raises(IntegrityError, match="'secagg/mask' may not follow 'start'"):
        transport.round("secagg/mask", {0: Message()})
    transport, shards = _world("real")
    _step(transport, shards, 0)
    with pytest.raises(IntegrityError, match="'secagg/advertise' may not follow 'finish'"):
        transport.round("secagg/advertise", {0: Message()})


def test_sum_edges_and_repeats() -> None:
    edges = sum_edges(["x"], ["y", "z"])
    assert edges["x"] == {"secagg/advertise"} and edges["secagg/mask"] == {"secagg/unmask", "y", "z"}
    assert sum_edges(["x"], ["y"], secure=False) == {"x": {"secagg/plain"}, "secagg/plain": {"y"}}
    assert sum_repeats(3)["secagg/unmask"] == 3 and sum_repeats(2, secure=False) == {"secagg/plain": 2}
    assert sum_expectation("secagg/mask", "p")["shares"].phase == "p/secagg-share-keys"
    with pytest.raises(ValueError, match="not a stage"):
        sum_expectation("start", "p")
