"""Which items the server owns is the key-client's sealed word, not the server's (``protocols/lpgcn/unheld.py``).

A client sends the direct gradient of an item nobody holds to the server in the clear. A lying
server that called an item some client convolves "mine" at the loss stage would get that item's
gradient rows — a user's scaled embedding — in the clear. Every node now holds the key-client's
list of unheld items, sealed under S, and refuses such a claim before it sends anything; it also
refuses a list that names an item it holds, one missing or not sent to every client, and owners
that are no client.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.tokens import TOKEN_BYTES
from fedgraphrec.protocols.common import CLIENT, KEY_HOLDER, SERVER
from fedgraphrec.protocols.lpgcn.client import LPGCNClient
from fedgraphrec.protocols.lpgcn.roles import LOSS, SETUP_VERIFY
from fedgraphrec.protocols.lpgcn.unheld import UNHELD_LIST, read_unheld_list
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part
from fedgraphrec.training.sampler import BPRSampler
from tests.helpers import random_train
from tests.protocols.lpgcn_world import oracle, world
from tests.protocols.test_lpgcn_lying_server import Scene, _build, _with

N_USERS = 24


@dataclass
class LossScene:
    """A scene stopped before the loss stage: a node whose request names owners, and its requesters."""

    scene: Scene
    node: int
    request: Message
    requester: np.ndarray

    def program(self) -> LPGCNClient:
        transport = self.scene.liar.transport
        assert transport is not None
        program = transport.programs[self.node]
        assert isinstance(program, LPGCNClient)
        return program

    def deliver(self, neg_owner: np.ndarray) -> Message:
        return self.scene.liar.deliver(self.node, LOSS, _with(self.request, {"neg_owner": neg_owner}))


def _loss_scene(monkeypatch: pytest.MonkeyPatch) -> LossScene:
    s = _build(monkeypatch)
    s.stop(LOSS, 0)
    for node, request in sorted(s.liar.log[(LOSS, 0)].items()):
        at = LossScene(s, node, request, np.zeros(0, np.int64))
        prog, ss = at.program(), at.program().state.step
        rows = np.repeat(np.arange(len(prog.clients)), np.diff(ss.req_ptr))
        if (prog.held_entry(rows, ss.req_items) < 0).any():  # a negative its requester does not hold
            at.requester = prog.clients[rows]
            return at
    raise AssertionError("no node asked for a negative its client does not hold")


def test_the_server_claiming_an_item_a_client_holds_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    at = _loss_scene(monkeypatch)
    assert not len(at.program().state.unheld_items)  # every item has a holder here
    with pytest.raises(IntegrityError, match="claimed an item some client holds"):
        at.deliver(np.full(len(at.requester), -1))


@pytest.mark.parametrize("lie", ["beyond", "below", "requester"])
def test_an_owner_that_is_no_client_or_the_requester_itself_is_refused(
    monkeypatch: pytest.MonkeyPatch, lie: str
) -> None:
    at = _loss_scene(monkeypatch)
    owners = {"beyond": np.full(len(at.requester), N_USERS), "below": np.full(len(at.requester), -2)}
    match = "owner of an item it does not hold" if lie == "requester" else "an owner that is no client"
    with pytest.raises(IntegrityError, match=match):
        at.deliver(owners.get(lie, at.requester))


@pytest.mark.parametrize("lie", ["missing", "fewer"])
def test_a_list_missing_or_not_sent_to_every_client_is_refused(
    monkeypatch: pytest.MonkeyPatch, lie: str
) -> None:
    liar = _build(monkeypatch, stop_at=(SETUP_VERIFY, 0))
    node, request = liar.holder(SETUP_VERIFY, 0, "unheld-list")
    part = request["unheld-list"]
    assert part.n_messages > 1 and part.receivers is not None
    if lie == "missing":
        forged = Message({k: v for k, v in request.parts.items() if k != "unheld-list"}, request.fields)
        match = "part 'unheld-list' .* is missing"
    else:
        forged = _with(
            request, **{"unheld-list": part.forward(np.arange(1, part.n_messages), part.receivers[1:])}
        )
        match = "every client of this node must receive"
    with pytest.raises(IntegrityError, match=match):
        liar.deliver(node, SETUP_VERIFY, forged)


def _opened(copies: list[bytes], receivers: np.ndarray, sender: int) -> Part:
    """The list as a node holds it once opened (one copy per receiving client)."""
    return Part(
        UNHELD_LIST, "item_token", SERVER, CLIENT, copies, shape="blobs", protection="sealed",
        senders=np.full(len(receivers), sender), receivers=receivers, from_role=KEY_HOLDER,
    )  # fmt: skip


def test_a_list_naming_a_held_item_or_differing_between_clients_is_refused() -> None:
    tokens = np.arange(10 * TOKEN_BYTES, dtype=np.int64).astype(np.uint8).reshape(10, TOKEN_BYTES)
    clients, held = np.array([3, 5]), np.array([0, 1, 2])
    good = tokens[[7, 4]].tobytes()
    assert read_unheld_list(_opened([good, good], clients, 9), clients, 9, tokens, held).tolist() == [4, 7]
    cases = {
        "names an item a client of this node holds": [tokens[[4, 2]].tobytes()] * 2,
        "got different lists": [good, tokens[[7]].tobytes()],
        "no catalogue item": [good + bytes(TOKEN_BYTES - 1) + b"\xff"] * 2,
        "whole number of item tokens": [good + b"\x00"] * 2,
    }
    for match, copies in cases.items():
        with pytest.raises(IntegrityError, match=match):
            read_unheld_list(_opened(copies, clients, 9), clients, 9, tokens, held)
    with pytest.raises(IntegrityError, match="unexpected sender"):
        read_unheld_list(_opened([good, good], clients, 8), clients, 9, tokens, held)


@pytest.mark.parametrize("crypto", ["accounted", "real"])
def test_items_nobody_holds_are_on_every_nodes_list_and_train_as_before(crypto: str) -> None:
    """The honest run: the list is the server's own items, and their gradients still reach it."""
    train = sp.lil_matrix(random_train(n_users=N_USERS, n_items=20, density=0.25, seed=4))
    train[:, [3, 11]] = 0  # items nobody holds (with no virtual items)
    train = sp.csr_matrix(train)
    train.eliminate_zeros()
    unheld = np.flatnonzero(np.diff(train.tocsc().indptr) == 0).tolist()
    assert {3, 11} <= set(unheld)
    tables = dict(oracle(train, plus=False, n_layers=2, dim=4).named_parameters())
    w = world(train, tables, 2, n_layers=2, alpha=0, crypto=crypto)
    assert sorted(w.server.unheld_ids.tolist()) == unheld
    for prog in w.programs.values():
        assert prog.state.unheld_items.tolist() == unheld
    before = w.server.own_rows.clone()
    for users, pos, neg in list(BPRSampler(train, seed=0).batches(0, 8))[:3]:
        neg = neg.clone()
        neg[0] = 3  # a negative nobody holds: its gradient goes to the server
        w.step(users, pos, neg)
    assert not torch.equal(w.server.own_rows, before)
