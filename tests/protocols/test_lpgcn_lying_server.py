"""An LP-GCN node refuses what a lying server sends it, checked against its own expectation (issue 30 §1).

Real crypto, two nodes, both backbones. A :class:`Liar` stands in for the server's transport: it
logs every request the honest server program sends and, at a chosen ``(stage, run in the step)``,
stops before delivering it, so the nodes wait right before that stage. The test then plays the
lying server by calling the node's public handler (:meth:`NodeEndpoint.handle`) with a forged
request, as a transport would:

(a) a sealed (or asymmetric) part relabelled ``plain`` and filled with the server's own rows;
(b) a ciphertext of another phase of the same step (a deeper layer's gradients at a shallower
    layer, a shallower layer's rows at a deeper one), under its own label or relabelled;
(c) the same stage run twice in a step (the final backward, LightGCN+'s update);
(d) a stage out of order (a loss after too few layers, a final in a training cycle, a new cycle
    before the last one finished, an aggregate right after layer 0, the key-client's set-up
    stage at another node);
(e) a field the node knows itself forged (the layer ``k``, the key-client);
(f) a triple naming an item outside the catalogue, or a positive item its user does not hold.

Each is an :class:`IntegrityError` whose message names what was refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pytest
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.protocols.lpgcn.roles import (
    AGGREGATE,
    BACKWARD,
    FINAL,
    FORWARD,
    LAYER0,
    LOSS,
    SETUP_INIT,
    SETUP_TOKENS,
    SETUP_VERIFY,
    SETUP_WRAP,
    UPDATE,
)
from fedgraphrec.runtime.local import LocalTransport
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.sealing import party
from fedgraphrec.training.sampler import BPRSampler
from tests.helpers import random_train
from tests.protocols.lpgcn_world import World, oracle, world

L = 3
DIM = 4


class Stop(Exception):
    """The liar stopped before delivering a stage."""


@dataclass
class Liar:
    """Logs the honest server's requests per ``(stage, run in the step)``; stops at :attr:`stop_at`."""

    stop_at: tuple[str, int] | None = None
    log: dict[tuple[str, int], dict[int, Message]] = field(default_factory=dict)
    runs: dict[tuple[int, str], int] = field(default_factory=dict)
    transport: LocalTransport | None = None

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        honest = LocalTransport.round
        liar = self

        def round(transport: LocalTransport, stage: str, requests: Any, **kw: Any) -> dict[int, Message]:
            liar.transport = transport
            key = (transport.net.step, stage)
            run = liar.runs[key] = liar.runs.get(key, -1) + 1
            liar.log[(stage, run)] = dict(requests)
            if liar.stop_at == (stage, run):
                raise Stop
            return honest(transport, stage, requests, **kw)

        monkeypatch.setattr(LocalTransport, "round", round)

    def deliver(self, node: int, stage: str, request: Message, step: int | None = None) -> Message:
        """What a transport does with a request: the node's public handler (at the current step)."""
        t = self.transport
        assert t is not None
        return t.endpoints[node].handle(
            t.programs[node], stage, t.net.step if step is None else step, request
        )

    def holder(self, stage: str, run: int, part: str) -> tuple[int, Message]:
        """A node whose logged request of ``(stage, run)`` holds messages in ``part``."""
        for node, request in sorted(self.log[(stage, run)].items()):
            if part in request and request[part].n_messages:
                return node, request
        raise AssertionError(f"no node receives {part!r} in {stage} run {run}")


@dataclass
class Scene:
    """A two-node LP-GCN world with real crypto, the liar, and the minibatches left."""

    w: World
    liar: Liar
    batches: Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]

    def stop(self, stage: str, run: int, predict: bool = False) -> None:
        """Run a minibatch (or a prediction pass) until just before ``stage``'s ``run``-th run."""
        self.liar.stop_at = (stage, run)
        with pytest.raises(Stop):
            if predict:
                self.w.server.predict()
            else:
                self.w.step(*next(self.batches))
        self.liar.stop_at = None


def _build(
    monkeypatch: pytest.MonkeyPatch, model: str = "lightgcn", stop_at: tuple[str, int] | None = None
) -> Any:
    """A :class:`Scene`, or the :class:`Liar` holding the set-up it stopped at ``stop_at``."""
    train = random_train(n_users=24, n_items=20, density=0.25, seed=4)
    tables = dict(oracle(train, plus=model == "lightgcn+", n_layers=L, dim=DIM).named_parameters())
    liar = Liar(stop_at)
    liar.install(monkeypatch)
    if stop_at is not None:
        with pytest.raises(Stop):
            world(train, tables, 2, model=model, n_layers=L, alpha=2, crypto="real")
        return liar
    w = world(train, tables, 2, model=model, n_layers=L, alpha=2, crypto="real")
    return Scene(w, liar, BPRSampler(train, seed=0).batches(0, 8))


def _with(request: Message, fields: dict[str, Any] | None = None, **parts: Any) -> Message:
    return Message({**request.parts, **parts}, {**request.fields, **(fields or {})})


def _plain(part: Any, width: int) -> Any:
    """``part`` relabelled plain, carrying the server's own content of the right shape and dtype."""
    if part.shape == "blobs":
        return replace(part, protection="plain", value=[bytes(8)] * part.n_messages, sealed=None)
    n_rows = part.n_messages if part.counts is None else int(part.counts.sum())
    rows = torch.full((n_rows, width), 0.5, dtype=torch.float64)
    return replace(part, protection="plain", value=rows, sealed=None, index=None, batched=False)


# ---------------------------------------------------------------------- the honest server passes
def test_the_honest_server_passes_every_check_and_cycles_have_steps_of_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = _build(monkeypatch, "lightgcn+")
    s.w.step(*next(s.batches))
    s.w.server.predict()
    s.w.step(*next(s.batches))  # a prediction pass between minibatches runs in a step of its own
    s.w.server.predict()
    s.w.server.predict()  # and so do two in a row
    steps = sorted({step for step, _ in s.liar.runs})
    assert steps == [-1, 0, 1, 2, 3, 4]
    s.stop(FORWARD, 1)
    node, request = s.liar.holder(FORWARD, 1, "users")
    s.liar.deliver(node, FORWARD, request)  # the very request the liar held back is accepted


# ---------------------------------------------------------------------- (a) protection downgrade
@pytest.mark.parametrize(
    ("model", "stage", "run", "name", "width", "predict"),
    [
        ("lightgcn", SETUP_TOKENS, 0, "wrapped", 0, False),
        ("lightgcn", SETUP_INIT, 0, "answers", 0, False),
        ("lightgcn", SETUP_INIT, 0, "degrees", 0, False),
        ("lightgcn", SETUP_VERIFY, 0, "unheld-list", 0, False),
        ("lightgcn", FORWARD, 0, "users", DIM, False),
        ("lightgcn", FORWARD, 2, "users", DIM, False),
        ("lightgcn", FORWARD, 1, "users", DIM, True),
        ("lightgcn", AGGREGATE, 0, "grads", 2 * DIM + 2, False),
        ("lightgcn", BACKWARD, 0, "users", DIM, False),
        ("lightgcn", BACKWARD, 2, "users", DIM, False),
        ("lightgcn+", UPDATE, 0, "users", DIM, False),
    ],
)
def test_a_protected_part_relabelled_plain_with_the_servers_rows_is_refused(
    monkeypatch: pytest.MonkeyPatch, model: str, stage: str, run: int, name: str, width: int, predict: bool
) -> None:
    if stage.startswith("setup/"):
        liar = _build(monkeypatch, model, stop_at=(stage, run))
    else:
        s = _build(monkeypatch, model)
        s.stop(stage, run, predict)
        liar = s.liar
    node, request = liar.holder(stage, run, name)
    forged = _with(request, **{name: _plain(request[name], width)})
    with pytest.raises(IntegrityError, match=rf"part '{name}' arrived with protection 'plain'"):
        liar.deliver(node, stage, forged)


# ---------------------------------------------------------------------- (b) cross-phase replay
@pytest.mark.parametrize("relabel", [False, True], ids=["own-label", "relabelled"])
@pytest.mark.parametrize(
    ("stage", "replayed", "at"),
    [(BACKWARD, 0, 1), (BACKWARD, 1, 2), (FORWARD, 0, 2)],
    ids=["layer3-gradients-at-layer2", "layer2-gradients-at-layer1", "layer0-rows-at-layer2"],
)
def test_a_ciphertext_of_another_phase_of_the_step_is_refused(
    monkeypatch: pytest.MonkeyPatch, stage: str, replayed: int, at: int, relabel: bool
) -> None:
    s = _build(monkeypatch)
    s.stop(stage, at)
    node, request = s.liar.holder(stage, at, "users")
    old = s.liar.log[(stage, replayed)][node]["users"]
    expected = request["users"].phase
    assert old.phase != expected
    part = replace(old, phase=expected) if relabel else old
    match = "failed authentication" if relabel else rf"phase '{old.phase}'; this node expects '{expected}'"
    with pytest.raises(IntegrityError, match=match):
        s.liar.deliver(node, stage, _with(request, users=part))


# ---------------------------------------------------------------------- (c) a stage run twice
@pytest.mark.parametrize(
    ("model", "stage", "runs", "why"),
    [
        ("lightgcn", BACKWARD, L, f"stage '{BACKWARD}' already ran {L} time"),
        ("lightgcn+", UPDATE, 1, f"stage '{UPDATE}' may not follow '{UPDATE}'"),
    ],
)
def test_the_last_stage_of_a_step_run_again_is_refused(
    monkeypatch: pytest.MonkeyPatch, model: str, stage: str, runs: int, why: str
) -> None:
    s = _build(monkeypatch, model)
    s.w.step(*next(s.batches))
    before = {n: p.state.steps for n, p in s.w.programs.items()}
    for node, request in s.liar.log[(stage, runs - 1)].items():
        with pytest.raises(IntegrityError, match=why):
            s.liar.deliver(node, stage, request)
    assert {n: p.state.steps for n, p in s.w.programs.items()} == before  # no second Adam step


def test_a_training_stage_in_a_prediction_step_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    s = _build(monkeypatch)
    s.w.step(*next(s.batches))
    layer0 = s.liar.log[(LAYER0, 0)]
    s.w.server.predict()
    for node, request in layer0.items():  # the old numbering: a minibatch in the prediction's step
        with pytest.raises(
            IntegrityError, match=rf"stage '{LAYER0}' may not follow 'predict/final'|already ran"
        ):
            s.liar.deliver(node, LAYER0, request)


# ---------------------------------------------------------------------- (d) out of order
def test_a_loss_after_too_few_layers_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    s = _build(monkeypatch)
    s.stop(FORWARD, 1)
    node = min(s.liar.log[(FORWARD, 1)])
    with pytest.raises(IntegrityError, match=r"'train/loss'.*after 1 of 3 forward layer"):
        s.liar.deliver(node, LOSS, Message(fields={}))


def test_a_final_in_a_training_cycle_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    s = _build(monkeypatch)
    s.stop(LOSS, 0)
    node = min(s.liar.log[(LOSS, 0)])
    with pytest.raises(
        IntegrityError, match=r"'predict/final'.*belongs to a predict cycle; this node is in a train"
    ):
        s.liar.deliver(node, FINAL, Message())


def test_an_aggregate_right_after_layer0_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    s = _build(monkeypatch)
    s.stop(FORWARD, 0)
    node = min(s.liar.log[(FORWARD, 0)])
    with pytest.raises(IntegrityError, match=r"'train/aggregate' may not follow 'train/layer0'"):
        s.liar.deliver(node, AGGREGATE, Message())


def test_a_new_cycle_before_the_last_one_finished_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    s = _build(monkeypatch)
    s.stop(BACKWARD, 1)  # two of three backward layers left: no Adam step yet
    node = min(s.liar.log[(BACKWARD, 1)])
    step = s.liar.transport.net.step + 1
    with pytest.raises(
        IntegrityError, match=r"'train/layer0'.*opens a cycle; this node is still in a train cycle"
    ):
        s.liar.deliver(node, LAYER0, Message(fields={"predict": True}), step=step)


def test_the_key_clients_setup_stage_at_another_node_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    liar = _build(monkeypatch, stop_at=(SETUP_WRAP, 0))
    ((kc_node, request),) = liar.log[(SETUP_WRAP, 0)].items()
    other = next(n for n in liar.transport.programs if n != kc_node)
    with pytest.raises(IntegrityError, match=r"only the key-client's node runs it"):
        liar.deliver(other, SETUP_WRAP, request)


# ---------------------------------------------------------------------- (e) fields the node knows
@pytest.mark.parametrize(("stage", "run", "forged"), [(FORWARD, 1, 3), (FORWARD, 0, 0), (BACKWARD, 1, 2)])
def test_a_forged_layer_is_refused(
    monkeypatch: pytest.MonkeyPatch, stage: str, run: int, forged: int
) -> None:
    s = _build(monkeypatch)
    s.stop(stage, run)
    node, request = s.liar.holder(stage, run, "users")
    own = request.fields["k"]
    assert own != forged
    with pytest.raises(IntegrityError, match=rf"field 'k' = {forged}; this node expects {own}"):
        s.liar.deliver(node, stage, _with(request, {"k": forged}))


@pytest.mark.parametrize("name", ["key_client", "n_clients", "n_items"])
def test_a_forged_key_client_or_roster_is_refused(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    liar = _build(monkeypatch, stop_at=(SETUP_WRAP, 0))
    ((node, request),) = liar.log[(SETUP_WRAP, 0)].items()
    forged = int(request.fields[name]) + 1
    with pytest.raises(IntegrityError, match=rf"field '{name}' = {forged}"):
        liar.deliver(node, SETUP_WRAP, _with(request, {name: forged}))


def test_rows_swapped_under_forged_sender_names_on_a_checked_route_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fast path (a route checked before, same read-only arrays) is no way around the checks.

    The server swaps two senders' ciphertexts and names each one's true sender in ``bound_senders``
    (so every opening authenticates) while keeping the very ``senders`` array the node checked at
    the previous layer: without a check, one neighbour's row would stand in for another's.
    """
    s = _build(monkeypatch)
    s.stop(FORWARD, 1)
    node, request = s.liar.holder(FORWARD, 1, "users")
    part = request["users"]
    senders = np.asarray(part.senders)
    a, b = 0, int(np.flatnonzero(senders != senders[0])[0])
    sealed, names = list(part.sealed), [party("client", int(u)) for u in senders]
    sealed[a], sealed[b] = sealed[b], sealed[a]
    names[a], names[b] = names[b], names[a]
    forged = replace(part, sealed=sealed, bound_senders=names)
    assert forged.senders is part.senders  # the route the node already checked, by identity
    with pytest.raises(IntegrityError, match=r"sender names|name senders other than their ids"):
        s.liar.deliver(node, FORWARD, _with(request, users=forged))


@pytest.mark.parametrize(
    ("stage", "run", "name"),
    [(FORWARD, 1, "items"), (FORWARD, 1, "users"), (LOSS, 0, "negatives"), (BACKWARD, 0, "users")],
)
def test_a_part_the_nodes_routing_needs_is_missing_and_refused(
    monkeypatch: pytest.MonkeyPatch, stage: str, run: int, name: str
) -> None:
    """Parts are expected exactly when the node's own routing says so: dropping one is refused."""
    s = _build(monkeypatch)
    s.stop(stage, run)
    node, request = s.liar.holder(stage, run, name)
    dropped = Message({k: v for k, v in request.parts.items() if k != name}, dict(request.fields))
    with pytest.raises(IntegrityError, match=rf"part '{name}' .* is missing"):
        s.liar.deliver(node, stage, dropped)


# ---------------------------------------------------------------------- (f) triples the node checks
@pytest.mark.parametrize("field_name", ["pos", "neg"])
def test_a_triple_naming_an_item_outside_the_catalogue_is_refused(
    monkeypatch: pytest.MonkeyPatch, field_name: str
) -> None:
    s = _build(monkeypatch)
    s.stop(LAYER0, 0)
    node, request = next((n, r) for n, r in sorted(s.liar.log[(LAYER0, 0)].items()) if len(r.fields["users"]))
    forged = np.asarray(request.fields[field_name]).copy()
    forged[0] = -1 if field_name == "pos" else 20  # 20 items: ids 0..19
    with pytest.raises(IntegrityError, match=rf"field '{field_name}': .* item ids in \[0, 20\)"):
        s.liar.deliver(node, LAYER0, _with(request, {field_name: forged}))


def _an_item_on_the_node_its_user_does_not_hold(w: World, users: torch.Tensor) -> tuple[int, int]:
    """A triple ``t`` and an item its user's node holds a row of, which the user does not hold."""
    for t, u in enumerate(users.tolist()):
        prog = next(p for p in w.programs.values() if u in p.clients.tolist())
        row = np.full(20, prog.position(np.array([u]))[0])
        on_node = prog.local_position(np.arange(20)) >= 0  # a row the node holds: layer 0 accepts it
        not_held = prog.held_entry(row, np.arange(20)) < 0  # neither a real nor a virtual item of u
        candidates = np.flatnonzero(on_node & not_held)
        if len(candidates):
            return t, int(candidates[0])
    raise AssertionError("no node holds an item one of its batch users does not")


def test_a_positive_item_its_user_does_not_hold_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    s = _build(monkeypatch)
    train = random_train(n_users=24, n_items=20, density=0.25, seed=4)
    users, pos, neg = next(s.batches)
    t, item = _an_item_on_the_node_its_user_does_not_hold(s.w, users)
    assert train[int(users[t]), item] == 0
    forged = pos.clone()
    forged[t] = item
    with pytest.raises(IntegrityError, match=r"positive item \(sent at layer 0\) is not held by its user"):
        s.w.step(users, forged, neg)
