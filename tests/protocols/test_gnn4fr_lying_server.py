"""GNN4FR against a server that lies about what it relays (issue #30 §1), both modes, real crypto.

A :class:`Liar` sits where the server calls :meth:`LocalTransport.round`: it alters the requests of
one round before the nodes' public handler (:meth:`NodeEndpoint.handle`) sees them, or runs a round
the schedule does not have. Every lie must end in an :class:`IntegrityError` on a node: a sealed
part relabelled ``plain`` and filled with the server's own rows, a ciphertext of one layer delivered
at another (label kept or relabelled), a stage run twice in a step or out of order, a field the node
knows (the layer, the prefix, the key-client, the crypto mode) forged, triples or holders that are
not the node's own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.protocols.gnn4fr.local import LocalGNN4FR, local_gnn4fr
from fedgraphrec.protocols.gnn4fr.roles import Stage, key_client_of
from fedgraphrec.protocols.gnn4fr.settings import GNN4FRSettings
from fedgraphrec.runtime.local import LocalTransport
from fedgraphrec.runtime.message import Message
from fedgraphrec.training.sampler import BPRSampler
from tests.helpers import random_train

N_USERS, N_ITEMS, DIM, LAYERS, SEED = 12, 15, 3, 2, 1
OTHER = (key_client_of(N_USERS, SEED) + 1) % N_USERS
"""A client that is not the key-client."""
Requests = dict[int, Message]
Round = Callable[..., dict[int, Message]]


class Liar:
    """Alters the ``nth`` round of ``stage`` in a step (``lie(transport, honest round, requests)``)."""

    def __init__(self, stage: str, lie: Callable[[Any, Round, Requests], dict[int, Message]], nth: int = 0):
        self.stage, self.lie, self.nth = stage, lie, nth
        self.counts: dict[tuple[int, str], int] = {}
        self.fired = False
        self.kept: Requests = {}

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        honest = LocalTransport.round
        liar = self

        def round(transport: Any, stage: str, requests: Any, **kw: Any) -> dict[int, Message]:
            def send(s: str, r: Any) -> dict[int, Message]:
                return honest(transport, s, r, **kw)

            key = (transport.net.step, stage)
            seen = liar.counts.get(key, 0)
            liar.counts[key] = seen + 1
            if stage == liar.stage and seen == liar.nth and not liar.fired:
                liar.fired = True
                return liar.lie(transport, send, dict(requests))
            if stage == liar.stage and seen < liar.nth:
                liar.kept = dict(requests)  # an earlier run of the stage in this step (a replay's source)
            return send(stage, requests)

        monkeypatch.setattr(LocalTransport, "round", round)


def _run(monkeypatch: pytest.MonkeyPatch, liar: Liar | None, paper_literal: bool = False) -> LocalGNN4FR:
    """Set-up, one minibatch and a prediction on two nodes, real crypto, with ``liar`` in the server."""
    if liar is not None:
        liar.install(monkeypatch)
    train = random_train(n_users=N_USERS, n_items=N_ITEMS, density=0.3, seed=4)
    g = torch.Generator().manual_seed(0)
    u0, v0 = (torch.randn(n, DIM, generator=g, dtype=torch.float64) for n in (N_USERS, N_ITEMS))
    settings = GNN4FRSettings(n_layers=LAYERS, seed=SEED, paper_literal=paper_literal)
    fed = local_gnn4fr(train, u0, v0, settings, nodes=2, crypto="real")
    users, pos, neg = next(BPRSampler(train, seed=0).batches(0, 16))
    fed.server.train_step(users, pos, neg)
    fed.predict()
    assert liar is None or liar.fired
    return fed


def test_the_honest_server_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    for paper_literal in (False, True):
        fed = _run(monkeypatch, None, paper_literal)
        transport = fed.server.transport
        assert isinstance(transport, LocalTransport)
        assert all(e.flow.stage == Stage.PREDICT_DELIVER for e in transport.endpoints.values())


# ---------------------------------------------------------------------- (a) protection downgrade
WIDTH = {"embeddings": (LAYERS + 1) * DIM}


def _downgrade(stage: str, name: str) -> Callable[[Any, Round, Requests], dict[int, Message]]:
    """Relabel every node's sealed ``name`` plain and fill it with the server's own content."""

    def lie(transport: Any, send: Round, requests: Requests) -> dict[int, Message]:
        for node, msg in requests.items():
            part = msg.parts.get(name)
            if part is None:
                continue
            n = len(part.receivers) if part.receivers is not None else 0
            if part.shape == "blobs":
                value: Any = [bytes(64)] * n
            else:  # the server's own rows, of the node's dtype and width
                value = torch.full((n, WIDTH.get(name, DIM)), 0.25, dtype=torch.float64)
            plain = replace(part, protection="plain", value=value, sealed=None, presealed=False, index=None)
            requests[node] = Message({**msg.parts, name: replace(plain, _sizes=None)}, msg.fields)
        return send(stage, requests)

    return lie


SEALED = [
    (False, Stage.UNWRAP_KEY, "wrapped", 0),
    (False, Stage.FORWARD, "rows", 0),
    (False, Stage.FORWARD, "rows", LAYERS - 1),
    (False, Stage.LOSS, "embeddings", 0),
    (False, Stage.GRADIENTS, "grads", 0),
    (False, Stage.BACKWARD, "rows", 0),
    (False, Stage.BACKWARD, "rows", LAYERS - 1),
    (False, Stage.PREDICT_DELIVER, "items", 0),
    (True, Stage.GRADIENTS, "grads", 0),
    (True, Stage.BACKWARD, "rows", 0),
    (True, Stage.BACKWARD, "rows", LAYERS - 1),
    (True, Stage.UPLOAD, "shares", 0),
]


@pytest.mark.parametrize(("paper_literal", "stage", "name", "nth"), SEALED)
def test_a_sealed_part_relabelled_plain_with_the_servers_rows_is_refused(
    monkeypatch: pytest.MonkeyPatch, paper_literal: bool, stage: str, name: str, nth: int
) -> None:
    liar = Liar(stage, _downgrade(stage, name), nth)
    with pytest.raises(IntegrityError, match=f"part '{name}' arrived with protection 'plain'"):
        _run(monkeypatch, liar, paper_literal)


# ---------------------------------------------------------------------- (b) cross-phase replay
@pytest.mark.parametrize("paper_literal", [False, True])
@pytest.mark.parametrize("stage", [Stage.FORWARD, Stage.BACKWARD])
@pytest.mark.parametrize("relabel", [False, True])
def test_a_ciphertext_of_another_layer_is_refused(
    monkeypatch: pytest.MonkeyPatch, paper_literal: bool, stage: str, relabel: bool
) -> None:
    """Layer 1's run gets the ciphertexts of this step's layer-0 run (backward: of the deeper layer)."""

    def lie(transport: Any, send: Round, requests: Requests) -> dict[int, Message]:
        for node, msg in requests.items():
            old = liar.kept[node]["rows"]
            rows = replace(old, phase=msg["rows"].phase) if relabel else old
            requests[node] = Message({"rows": rows}, msg.fields)
        return send(stage, requests)

    liar = Liar(stage, lie, nth=1)
    match = r"rejected|failed" if relabel else "arrived with phase"
    with pytest.raises(IntegrityError, match=match):
        _run(monkeypatch, liar, paper_literal)


# ---------------------------------------------------------------------- (c) a stage run twice
@pytest.mark.parametrize(
    ("paper_literal", "stage", "nth"),
    [(False, Stage.BACKWARD, LAYERS - 1), (True, Stage.UPDATE, 0), (False, Stage.PREDICT_DELIVER, 0)],
)
def test_the_last_stage_of_a_step_run_twice_is_refused(
    monkeypatch: pytest.MonkeyPatch, paper_literal: bool, stage: str, nth: int
) -> None:
    """The same requests again, same step (their ciphertexts open): the node's stage order refuses."""

    def lie(transport: Any, send: Round, requests: Requests) -> dict[int, Message]:
        send(stage, requests)
        return send(stage, requests)

    with pytest.raises(IntegrityError, match=r"already ran|may not follow"):
        _run(monkeypatch, Liar(stage, lie, nth), paper_literal)


# ---------------------------------------------------------------------- (d) out of order
def _instead(stage: str, fields: dict[str, Any], new_step: bool = False) -> Any:
    def lie(transport: Any, send: Round, requests: Requests) -> dict[int, Message]:
        if new_step:
            transport.begin_step(transport.net.step + 1)
        return send(stage, {n: Message(fields=dict(fields)) for n in requests})

    return lie


@pytest.mark.parametrize(
    ("at", "nth", "stage", "fields", "new_step", "match"),
    [
        (Stage.NEGATIVES, 0, Stage.LOSS, {}, False, "may not follow 'step/forward'"),
        (Stage.NEGATIVES, 0, Stage.PREDICT_ITEMS, {"holders": [], "tokens": []}, False, "belongs to a prediction"),
        (Stage.PREDICT_ITEMS, 0, Stage.NEGATIVES, {"holders": [], "requesters": [], "tokens": []}, False,
         "belongs to a minibatch"),
        (Stage.BACKWARD, LAYERS - 1, Stage.BEGIN, {"prefix": "predict/forward"}, True, "did not end"),
        (Stage.BEGIN, 0, Stage.PUBLIC_KEYS, {"real": True}, False, "may not follow"),
        (Stage.FORWARD, 1, Stage.NEGATIVES, {"holders": [], "requesters": [], "tokens": []}, False,
         "ran 1 of 2 layers"),
    ],
)  # fmt: skip
def test_a_stage_out_of_order_is_refused(
    monkeypatch: pytest.MonkeyPatch,
    at: str,
    nth: int,
    stage: str,
    fields: dict[str, Any],
    new_step: bool,
    match: str,
) -> None:
    with pytest.raises(IntegrityError, match=match):
        _run(monkeypatch, Liar(at, _instead(stage, fields, new_step), nth))


def test_the_key_wrapping_asked_of_a_node_without_the_key_client_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def lie(transport: Any, send: Round, requests: Requests) -> dict[int, Message]:
        (msg,) = requests.values()
        return send(Stage.WRAP_KEY, dict.fromkeys(transport.nodes, msg))

    with pytest.raises(IntegrityError, match="no such stage"):
        _run(monkeypatch, Liar(Stage.WRAP_KEY, lie))


# ---------------------------------------------------------------------- (e) forged fields
def _forge(stage: str, **fields: Any) -> Any:
    def lie(transport: Any, send: Round, requests: Requests) -> dict[int, Message]:
        out = {n: Message(dict(m.parts), {**m.fields, **fields}) for n, m in requests.items()}
        return send(stage, out)

    return lie


@pytest.mark.parametrize(
    ("paper_literal", "stage", "nth", "fields", "match"),
    [
        (False, Stage.FORWARD, 0, {"layer": 1}, "field 'layer' = 1; this node expects 0"),
        (False, Stage.FORWARD, 1, {"layer": 0}, "field 'layer' = 0; this node expects 1"),
        (False, Stage.FORWARD, 0, {"prefix": "predict/forward"}, "field 'prefix'"),
        (False, Stage.BACKWARD, 0, {"layer": 1}, "field 'layer' = 1; this node expects 2"),
        (True, Stage.BACKWARD, 1, {"layer": 2}, "field 'layer' = 2; this node expects 1"),
        (False, Stage.PUBLIC_KEYS, 0, {"real": False}, "field 'real'"),
        (False, Stage.WRAP_KEY, 0, {"key_client": OTHER}, "field 'key_client'"),
        (False, Stage.CATALOGUE, 0, {"key_client": OTHER}, "field 'key_client'"),
    ],
)
def test_a_forged_field_the_node_knows_is_refused(
    monkeypatch: pytest.MonkeyPatch,
    paper_literal: bool,
    stage: str,
    nth: int,
    fields: dict[str, Any],
    match: str,
) -> None:
    with pytest.raises(IntegrityError, match=match):
        _run(monkeypatch, Liar(stage, _forge(stage, **fields), nth), paper_literal)


@pytest.mark.parametrize("what", ["user", "positive", "holder"])
def test_triples_and_holders_that_are_not_the_nodes_own_are_refused(
    monkeypatch: pytest.MonkeyPatch, what: str
) -> None:
    key = "holders" if what == "holder" else "users"

    def lie(transport: Any, send: Round, requests: Requests) -> dict[int, Message]:
        node = next(n for n in transport.nodes if requests[n].fields[key])  # a node with work to do
        other = next(n for n in transport.nodes if n != node)
        msg = requests[node]
        fields = dict(msg.fields)
        if what == "positive":
            program = transport.programs[node]
            k = int(np.searchsorted(program.clients, int(fields["users"][0])))
            own = program.state.own_seq[program.state.own_ptr[k] : program.state.own_ptr[k + 1]]
            fields["pos"] = [int(np.setdiff1d(np.arange(N_ITEMS), own)[0]), *fields["pos"][1:]]
        else:  # a client of the other node
            fields[key] = [int(transport.programs[other].clients[0]), *fields[key][1:]]
        requests[node] = Message(dict(msg.parts), fields)
        return send(Stage.NEGATIVES if what == "holder" else Stage.BEGIN, requests)

    liar = Liar(Stage.NEGATIVES if what == "holder" else Stage.BEGIN, lie)
    match = "holder that does not hold" if what == "holder" else "not on this node or does not hold"
    with pytest.raises(IntegrityError, match=match):
        _run(monkeypatch, liar)


# ---------------------------------------------------------------------- (f) what the server itself writes
def _content(stage: str, name: str, make: Callable[[Any], Any]) -> Any:
    """Replace the value of the plain part ``name`` (which the server writes) with ``make(part)``."""

    def lie(transport: Any, send: Round, requests: Requests) -> dict[int, Message]:
        for node, msg in requests.items():
            if name in msg.parts:
                part = replace(msg[name], value=make(msg[name]))  # booked at the honest size
                requests[node] = Message({**msg.parts, name: part}, msg.fields)
        return send(stage, requests)

    return lie


@pytest.mark.parametrize(
    ("paper_literal", "stage", "name", "make", "match"),
    [
        (
            True,
            Stage.UPDATE,
            "sum",
            lambda p: np.asarray(p.value, dtype=np.float64),
            r"expects .* uint64 words|has shape .*this node expects",
        ),
        (
            True,
            Stage.UPDATE,
            "sum",
            lambda p: np.asarray(p.value)[:-1],
            r"expects .* uint64 words|has shape .*this node expects",
        ),
        (False, Stage.WRAP_KEY, "keys", lambda p: [p.value[0][:-32]], "bundle of 12 public keys"),
        (False, Stage.WRAP_KEY, "keys", lambda p: [bytes(32 * N_USERS)], "another public key for client"),
        (
            False,
            Stage.ROUTING,
            "routing",
            lambda p: [b[:-3] for b in p.value],
            "routing of client:.* malformed",
        ),
        (False, Stage.ROUTING, "routing", lambda p: [_self_neighbour(b) for b in p.value], "inconsistent"),
    ],
)
def test_malformed_content_the_server_writes_is_refused(
    monkeypatch: pytest.MonkeyPatch,
    paper_literal: bool,
    stage: str,
    name: str,
    make: Callable[[Any], Any],
    match: str,
) -> None:
    with pytest.raises(IntegrityError, match=match):
        _run(monkeypatch, Liar(stage, _content(stage, name, make)), paper_literal)


def _self_neighbour(blob: bytes) -> bytes:
    """A routing message whose neighbours are all replaced by one repeated id (not sorted and distinct)."""
    k = int(np.frombuffer(blob[:8], dtype=np.int64)[0])
    table = np.frombuffer(blob[8 : 8 + 16 * k], dtype=np.int64).reshape(k, 2).copy()
    table[:, 0] = 0 if k < 2 else table[0, 0]
    table[:, 1] = 0 if k < 2 else table[:, 1]
    return blob[:8] + table.tobytes() + blob[8 + 16 * k :]
