"""A FedMF node refuses a lying server: it checks every request against its own expectation.

Two nodes, real crypto; the server's requests pass through a transport that lets a test rewrite
what each node receives (:class:`~tests.protocols.test_fedgrec_lying_server.LyingTransport`), so
every attack reaches the nodes through their public handler: the relayed shares downgraded to
plain or relabelled, a sealed share of the previous minibatch replayed, a stage run twice or out of
order, and the fields the node knows (its users, the catalogue, the session, the participants)
forged. Each is an :class:`IntegrityError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.models.mf import BPRMF
from fedgraphrec.models.propagation import NormalizedBipartite
from fedgraphrec.protocols.baselines.fedmf import SPEC
from fedgraphrec.protocols.baselines.fedmf.settings import FedMFSettings
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part
from tests.helpers import ProgramsRun, random_train
from tests.protocols.test_fedgrec_lying_server import LyingTransport, Tamper, _field, _own_bytes, _part, _when

USERS, ITEMS, D = 12, 15, 4


def _world(tamper: Tamper | None = None) -> Any:
    train = random_train(USERS, ITEMS, seed=0)
    oracle = BPRMF(NormalizedBipartite.from_train(train, torch.float64), D, 0.5, torch.Generator().manual_seed(0),
                   torch.float64)  # fmt: skip
    params = {k: v.detach().clone() for k, v in oracle.named_parameters()}
    settings = FedMFSettings(lr=0.05, reg=1e-2, frac_bits=40)
    fed = ProgramsRun(SPEC, settings, train, params, nodes=2, crypto="real")
    fed.transport.__class__ = LyingTransport
    fed.transport.tamper = tamper  # type: ignore[attr-defined]
    return fed


def _batch(seed: int, users: list[int] | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(seed)
    u = np.asarray(users) if users is not None else rng.integers(0, USERS, 9)
    return (torch.from_numpy(u), torch.from_numpy(rng.integers(0, ITEMS, len(u))),
            torch.from_numpy(rng.integers(0, ITEMS, len(u))))  # fmt: skip


def test_the_honest_server_passes_also_when_a_node_has_no_user_in_the_minibatch() -> None:
    fed = _world()
    fed.server.train_step(*_batch(0))
    fed.server.train_step(*_batch(1, users=[0, 2, 4, 6, 8, 10]))  # node 1 hosts the odd users
    fed.server.train_step(*_batch(2))


def test_relayed_shares_downgraded_to_plain_with_the_servers_bytes_are_refused() -> None:
    fed = _world(_when("secagg/mask", _own_bytes))
    with pytest.raises(IntegrityError, match=r"part 'shares' arrived with protection 'plain'"):
        fed.server.train_step(*_batch(0))


@pytest.mark.parametrize(
    ("stage", "name", "phase"),
    [
        ("secagg/mask", "shares", "train/other/secagg-share-keys"),
        ("secagg/share", "roster", "train/item-gradients/secagg-unmask"),
        ("train/local", "items", "evaluate/items"),
    ],
)
def test_a_part_relabelled_to_another_phase_is_refused(stage: str, name: str, phase: str) -> None:
    fed = _world(_when(stage, _part(name, phase=phase)))
    with pytest.raises(IntegrityError, match=rf"part '{name}' arrived with phase '{phase}'"):
        fed.server.train_step(*_batch(0))


def test_shares_of_the_previous_minibatch_replayed_are_refused() -> None:
    seen: dict[int, Part] = {}

    def replay(stage: str, step: int, node: int, request: Message) -> Message:
        if stage != "secagg/mask" or "shares" not in request:
            return request
        if step == 0:
            seen[node] = request["shares"]
            return request
        return Message({**request.parts, "shares": seen[node]}, request.fields)

    fed = _world(replay)
    fed.server.train_step(*_batch(0))
    with pytest.raises(IntegrityError, match="secagg share"):
        fed.server.train_step(*_batch(0))


def test_a_second_sum_or_unmask_in_a_step_is_refused() -> None:
    fed = _world()
    fed.server.train_step(*_batch(0))
    for stage in ("secagg/unmask", "secagg/advertise"):
        with pytest.raises(IntegrityError, match=f"'{stage}' may not follow 'secagg/unmask'"):
            fed.transport.round(stage, {0: Message()})


def test_a_stage_out_of_order_is_refused() -> None:
    fed = _world()
    fed.server.train_step(*_batch(0))
    fed.transport.begin_step(1)
    for stage in ("secagg/mask", "secagg/advertise"):
        with pytest.raises(IntegrityError, match=f"'{stage}' may not follow 'secagg/unmask'"):
            fed.transport.round(stage, {0: Message()})
    fed.transport.round("train/local", {0: Message(fields={"users": [], "pos": [], "neg": [], "batch": 1})})
    with pytest.raises(IntegrityError, match="no item gradients of this node's users to sum"):
        fed.transport.round("secagg/advertise", {0: Message()})


def _drop_items(r: Message) -> Message:
    return Message({k: p for k, p in r.parts.items() if k != "items"}, r.fields)


@pytest.mark.parametrize(
    ("stage", "change", "match"),
    [
        ("train/local", lambda r: _field("users", [1] * len(r.fields["users"]))(r), "does not host"),
        ("train/local", lambda r: _field("pos", [ITEMS] * len(r.fields["pos"]))(r), "outside the catalogue"),
        ("train/local", _drop_items, "item table must come exactly when"),
        ("train/local", _part("items", value=torch.zeros(ITEMS - 1, D, dtype=torch.float64)), "shape"),
        ("secagg/advertise", _field("session", "fedmf/step/7"), "field 'session'"),
        ("secagg/advertise", _field("clients", [0]), "field 'clients'"),
        ("secagg/mask", _field("length", ITEMS), "field 'length'"),
    ],
)
def test_a_forged_field_the_node_knows_is_refused(
    stage: str, change: Callable[[Message], Message], match: str
) -> None:
    fed = _world(_when(stage, change))
    with pytest.raises(IntegrityError, match=match):
        fed.server.train_step(*_batch(0))


def test_an_item_table_in_another_dtype_is_refused() -> None:
    fed = _world(_when("train/local", lambda r: _part("items", value=r["items"].value.float())(r)))
    with pytest.raises(IntegrityError, match=r"holds torch.float32; this node expects torch.float64"):
        fed.server.train_step(*_batch(0))
