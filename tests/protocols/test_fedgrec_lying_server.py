"""A FedGRec node refuses a lying server: it checks every request against its own expectation.

Two nodes, real crypto. The server's requests pass through a transport that lets a test rewrite
what each node receives (:class:`LyingTransport`), so every attack goes through the nodes' public
handler exactly as a server would send it: a sealed part downgraded to plain and filled with the
server's own bytes, a part under another phase (relabelled, or a ciphertext of an earlier secure
sum of the same step replayed), a stage run twice or out of order, a field the node knows forged,
and a secure sum downgraded to plain uploads. Each is an :class:`IntegrityError`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.protocols.base import NodeData, ServerProgram, shard_of
from fedgraphrec.protocols.fedgrec import SPEC
from fedgraphrec.protocols.fedgrec.settings import FedGRecSettings
from fedgraphrec.runtime.local import LocalTransport
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.network import Network
from fedgraphrec.runtime.part import Part
from tests.helpers import random_train

Tamper = Callable[[str, int, int, Message], Message]
SHARES = "secagg-share-keys"


class LyingTransport(LocalTransport):
    """Delivers ``tamper(stage, step, node, request)`` instead of each request (the server's wire)."""

    tamper: Tamper | None = None

    def round(self, stage: str, requests: Any, *, allow_loss: bool = False) -> dict[int, Message]:
        if self.tamper is not None:
            requests = {n: self.tamper(stage, self.net.step, n, r) for n, r in requests.items()}
        return super().round(stage, requests, allow_loss=allow_loss)


def _world(
    tamper: Tamper | None = None, server_settings: dict[str, Any] | None = None, **kw: Any
) -> tuple[ServerProgram, LyingTransport]:
    """FedGRec (K = 2) on two nodes in real crypto mode, set up (the warm-up ran) under ``tamper``."""
    train = random_train(12, 15, density=0.3, seed=3)
    g = torch.Generator().manual_seed(0)
    tables = {
        "user_emb": torch.randn(12, 4, generator=g, dtype=torch.float64) * 0.3,
        "item_emb": torch.randn(15, 4, generator=g, dtype=torch.float64) * 0.3,
    }
    base: dict[str, Any] = dict(K=2, clients_per_round=6, local_steps=2, n_negatives=3, lr=0.05, seed=7)
    settings = FedGRecSettings(**{**base, "frac_bits": 40, **kw})
    net = Network(12, crypto="real", protocol=SPEC.name)
    data = NodeData(train, tables)
    programs = {k: SPEC.client(settings, ids, data) for k, ids in shard_of(12, [0, 1]).items()}
    transport = LyingTransport(net, programs)
    transport.tamper = tamper
    server_side = FedGRecSettings(**{**base, "frac_bits": 40, **kw, **(server_settings or {})})
    server = SPEC.server(server_side, transport, 12, 15, {k: tables[k] for k in SPEC.server_tables})
    server.setup()
    return server, transport


def _when(
    stage: str, change: Callable[[Message], Message], phase: str = "", step: int | None = None
) -> Tamper:
    """Apply ``change`` to the requests of ``stage`` (at ``step``, whose parts' phases start with ``phase``)."""

    def tamper(at: str, at_step: int, node: int, request: Message) -> Message:
        if at != stage or (step is not None and at_step != step):
            return request
        if phase and not any(p.phase.startswith(phase) for p in request.parts.values()):
            return request
        return change(request)

    return tamper


def _part(name: str, **kw: Any) -> Callable[[Message], Message]:
    return lambda r: Message({**r.parts, name: replace(r[name], **kw)}, r.fields)


def _field(name: str, value: Any) -> Callable[[Message], Message]:
    return lambda r: Message(r.parts, {**r.fields, name: value})


def _own_bytes(r: Message) -> Message:
    """The shares relabelled plain, filled with the server's own bytes of the same sizes."""
    shares = r["shares"]
    own = [bytes(len(b)) for b in shares.value]
    return Message(
        {**r.parts, "shares": replace(shares, protection="plain", presealed=False, value=own)}, r.fields
    )


VARIANTS = [dict(), dict(K=0), dict(K=0, loss="mse"), dict(aggregation="concat", item_agg="mean_touched")]
"""FedGRec, FedeRank (K = 0), FCF (K = 0, squared error), and other settings that change the shapes."""


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_honest_server_passes(variant: dict[str, Any]) -> None:
    server, _ = _world(dropout_before=0.2, dropout_after=0.2, **variant)
    for r in range(2):
        server.train_round(r)
    server.predict()


def test_a_warmup_download_is_refused_when_there_are_no_latents() -> None:
    _, transport = _world(K=0)
    with pytest.raises(IntegrityError, match=r"'warmup/download' may not follow 'warmup/degrees'"):
        transport.round("warmup/download", {0: Message()})


@pytest.mark.parametrize("phase", ["warmup/degrees", "warmup/propagate", "train/upload"])
def test_relayed_shares_downgraded_to_plain_with_the_servers_bytes_are_refused(phase: str) -> None:
    with pytest.raises(IntegrityError, match=r"part 'shares' arrived with protection 'plain'"):
        server, _ = _world(_when("secagg/mask", _own_bytes, phase))
        server.train_round(0)


@pytest.mark.parametrize(
    ("stage", "name", "phase"),
    [
        ("secagg/mask", "shares", f"warmup/propagate/{SHARES}"),  # the round's shares as the warm-up's
        ("secagg/share", "roster", "warmup/degrees/secagg-advertise-keys"),
        ("secagg/unmask", "survivors", "warmup/propagate/secagg-unmask"),
        ("train/download", "rows", "warmup/download"),
    ],
)
def test_a_part_relabelled_to_another_phase_is_refused(stage: str, name: str, phase: str) -> None:
    server, transport = _world()
    transport.tamper = _when(stage, _part(name, phase=phase))
    with pytest.raises(IntegrityError, match=rf"part '{name}' arrived with phase '{phase}'"):
        server.train_round(0)


@pytest.mark.parametrize("relabel", [False, True])
def test_shares_of_an_earlier_sum_of_the_step_replayed_at_a_later_one_are_refused(relabel: bool) -> None:
    """Eq. 9's shares (first sum of the set-up step) delivered at Eq. 7's first sum, same step."""
    seen: dict[int, Part] = {}

    def replay(stage: str, step: int, node: int, request: Message) -> Message:
        if stage != "secagg/mask" or "shares" not in request:
            return request
        shares = request["shares"]
        if shares.phase.startswith("warmup/degrees"):
            seen[node] = shares
            return request
        old = seen[node]
        return Message({**request.parts, "shares": replace(old, phase=shares.phase) if relabel else old},
                       request.fields)  # fmt: skip

    match = "secagg share|authentication" if relabel else r"phase 'warmup/degrees/secagg-share-keys'"
    with pytest.raises(IntegrityError, match=match):
        _world(replay)


def test_the_final_stages_run_twice_in_a_step_are_refused() -> None:
    server, transport = _world()
    server.train_round(0)
    for stage in ("secagg/unmask", "train/download"):
        with pytest.raises(IntegrityError, match=f"'{stage}' may not follow 'secagg/unmask'"):
            transport.round(stage, {0: Message()})
    table = Part("warmup/download", "item-table", "server", "client", server.E[0], shape="broadcast",  # type: ignore[attr-defined]
                 receivers=np.zeros(1, dtype=np.int64))  # fmt: skip
    with pytest.raises(IntegrityError, match="'warmup/download': a warm-up download outside the warm-up"):
        transport.round("warmup/download", {0: Message({"items": table}, {"k": 1})})


def test_a_warmup_download_beyond_k_is_refused() -> None:
    _, transport = _world()
    with pytest.raises(IntegrityError, match=r"'warmup/download' already ran 2 time\(s\)"):
        transport.round("warmup/download", {0: Message()})


@pytest.mark.parametrize(
    ("stage", "match"),
    [
        ("train/download", "'train/download' may not follow 'secagg/unmask'"),
        ("secagg/mask", "'secagg/mask' may not follow 'secagg/unmask'"),
        ("warmup/degrees", "'warmup/degrees' cannot open a new step"),
    ],
)
def test_a_stage_out_of_order_is_refused(stage: str, match: str) -> None:
    server, transport = _world()
    server.train_round(0)
    transport.begin_step(1)
    with pytest.raises(IntegrityError, match=match):
        transport.round(stage, {0: Message()})


@pytest.mark.parametrize(
    ("stage", "change", "match", "step"),
    [
        ("warmup/download", _field("k", 2), "field 'k' is 2; this node expects order 1", -1),
        ("train/query", _field("round", 5), "field 'round' is 5", 0),
        ("train/query", _field("sampled", [1]), "field 'sampled'", 0),
        ("train/query", _field("clients", []), "field 'clients'", 0),
        ("train/download", lambda r: _field("full", not r.fields["full"])(r), "field 'full'", 0),
        ("secagg/advertise", _field("session", "fedgrec/round/9"), "field 'session'", 0),
        ("secagg/advertise", _field("phase", "warmup/degrees"), "field 'phase'", 0),
        ("secagg/share", _field("length", 15), "field 'length'", 0),
        ("secagg/mask", _field("frac_bits", 8), "field 'frac_bits'", 0),
        ("secagg/advertise", _field("clients", [0, 1, 2, 3]), "field 'clients'", -1),
    ],
)
def test_a_forged_field_the_node_knows_is_refused(
    stage: str, change: Callable[[Message], Message], match: str, step: int
) -> None:
    with pytest.raises(IntegrityError, match=match):
        server, _ = _world(_when(stage, change, step=step))
        server.train_round(0)


def test_a_real_node_refuses_a_secure_sum_run_accounted() -> None:
    """``real = False`` would make the node upload its shard's sum of encodings unmasked."""
    with pytest.raises(IntegrityError, match="field 'real' is False; this node expects True"):
        _world(_when("secagg/advertise", _field("real", False)), crypto="real")


def test_tables_of_the_wrong_shape_or_dtype_are_refused() -> None:
    wrong = _part("degrees", value=np.zeros(14, dtype=np.int32))
    with pytest.raises(IntegrityError, match=r"part 'degrees' has shape \(14,\)"):
        _world(_when("warmup/degrees", wrong))
    server, transport = _world()
    transport.tamper = _when("predict", lambda r: _part("items", value=r["items"].value.float())(r))
    with pytest.raises(IntegrityError, match=r"part 'items' \(predict/items\) holds torch.float32"):
        server.predict()


def test_a_secure_sum_downgraded_to_plain_uploads_is_refused() -> None:
    with pytest.raises(IntegrityError, match=r"'secagg/plain'.*no such stage"):
        _world(server_settings={"secure_aggregation": False})


def test_the_plain_baseline_runs_when_the_node_itself_turns_protection_off() -> None:
    server, _ = _world(secure_aggregation=False)
    server.train_round(0)
