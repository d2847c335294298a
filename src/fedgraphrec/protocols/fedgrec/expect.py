"""What a FedGRec node accepts: its stage order, each stage's parts, and the fields it knows itself.

The server drives Algorithm 1 (:mod:`.server`); a node checks every request against its own
expectation (:mod:`fedgraphrec.runtime.expect`), never the wire's labels:

* :func:`stage_flow` — set-up (``setup/enroll``), the warm-up in the same step (the secure sum of
  Eq. 9, the degree broadcast, then ``K`` times a table download and the secure sum of Eq. 7), then
  per round ``train/query`` → ``train/download`` → the secure sum of Step 4, and the evaluation
  stages (``predict``, ``evaluate``) after any of them. Which secure sums are in the flow (the four
  stages of secure aggregation, or ``plain`` uploads) follows the node's own
  ``secure_aggregation`` setting. A node hosting no user with training items takes part in none of
  it (the server never samples or sums its users): its flow is set-up and evaluation only.
* :func:`expectation` — every part the server sends, with its phase, protection, kind, shape, the
  run's dtype and the embedding width.
* :func:`site` — which secure sum runs now (Eq. 9, Eq. 7 of order ``k``, or the round's Step 4)
  from the node's state and the number of sums already run in this step; the sum's session, input
  length and participants are this node's own.
* :func:`check_request` — the fields the node knows: the warm-up order ``k`` (the number of
  downloads before), the round (the step), the round's sampled users (the public stream over the
  users with training items), whether the download is the whole table, and the shapes of the
  tables it receives.

Each refusal is an :class:`~fedgraphrec.crypto.errors.IntegrityError` naming the stage.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

import numpy as np
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.protocols.base import EVALUATE_ITEMS
from fedgraphrec.protocols.fedgrec import roles
from fedgraphrec.protocols.fedgrec.sampling import sample_clients
from fedgraphrec.protocols.fedgrec.settings import FedGRecSettings
from fedgraphrec.protocols.fedgrec.state import FedGRecState
from fedgraphrec.protocols.secagg.expect import (
    SECURE_STAGES,
    SumSite,
    merge_edges,
    sum_edges,
    sum_expectation,
    sum_repeats,
)
from fedgraphrec.protocols.secagg.roles import PLAIN
from fedgraphrec.runtime.expect import Expect, Expectation, NodeView, StageFlow, flow
from fedgraphrec.runtime.message import Message

__all__ = ["EVALUATE", "PREDICT_REPEATS", "check_request", "expectation", "site", "stage_flow"]

EVALUATE = "evaluate"
"""The generic evaluation stage (:meth:`~fedgraphrec.protocols.base.ServerProgram.evaluate`)."""
PREDICT_REPEATS = 3
"""Prediction runs at most this often in one step: the trainer's evaluation (prediction, then the
nodes' evaluation on Flower), and a caller's own look at the final representations afterwards.
It sends nothing back; each run only recomputes the users' representations."""
_SUMS = (*SECURE_STAGES, PLAIN)


class FedGRecNode(NodeView[FedGRecSettings, FedGRecState], Protocol):
    """What this module reads of a node's program (:class:`~.client.FedGRecClient` has it all).

    The common view (:class:`~fedgraphrec.runtime.expect.NodeView`) and the degrees FedGRec's
    expectations are sized by.
    """

    @property
    def deg_u(self) -> np.ndarray: ...
    @property
    def degrees(self) -> np.ndarray: ...


def _refuse(stage: str, why: str) -> IntegrityError:
    return IntegrityError(f"fedgrec stage {stage!r}: {why}")


def stage_flow(program: FedGRecNode) -> StageFlow:
    """The node's stage order (module docstring), from its settings and its own users."""
    s = program.settings
    evaluation = {roles.PREDICT: [EVALUATE, roles.PREDICT], EVALUATE: [roles.PREDICT]}
    if not (program.deg_u > 0).any():  # none of its users has a training item
        edges = merge_edges({roles.ENROLL: [roles.PREDICT]}, evaluation)
        return flow(
            first=[roles.ENROLL],
            after=edges,
            new_step=[roles.PREDICT],
            repeats={roles.PREDICT: PREDICT_REPEATS},
        )
    secure = s.secure_aggregation
    ready = [roles.QUERY, roles.PREDICT]  # after the warm-up, or after a round
    edges = merge_edges(
        sum_edges([roles.ENROLL], [roles.DEGREES], secure=secure),  # Eq. 9
        {roles.DEGREES: [roles.WARMUP_DOWNLOAD] if s.K else ready},
        sum_edges([roles.WARMUP_DOWNLOAD], [roles.WARMUP_DOWNLOAD, *ready], secure=secure),  # Eq. 7, k = 1..K
        {roles.QUERY: [roles.ROUND_DOWNLOAD]},
        sum_edges([roles.ROUND_DOWNLOAD], ready, secure=secure),  # Step 4
        evaluation,
        {roles.PREDICT: [roles.QUERY], EVALUATE: [roles.QUERY]},
    )
    repeats = {
        **sum_repeats(s.K + 1, secure=secure),
        roles.WARMUP_DOWNLOAD: s.K,
        roles.PREDICT: PREDICT_REPEATS,
    }
    return flow(first=[roles.ENROLL], after=edges, new_step=[roles.QUERY, roles.PREDICT], repeats=repeats)


def site(program: FedGRecNode, stage: str, step: int | None = None) -> SumSite:
    """The secure sum this node expects now (Eq. 9, Eq. 7 of order ``k``, or Step 4).

    Before its first round a node is in the warm-up: the first sum of the step is Eq. 9's (its
    degrees not yet known), the ``k``-th after it Eq. 7's of order ``k ≤ K``. In a round, one sum:
    Step 4's, of the users the node trained this round.

    Raises:
        IntegrityError: no secure sum may run here.
    """
    s, st, j = program.settings, program.state, program.occurrence
    n, frac = program.n_items, s.frac_bits
    if st.sample is None:  # the warm-up (the node has not been in a round yet)
        users = program.clients[program.deg_u > 0]
        if j == 0:
            if len(st.deg_t):
                raise _refuse(stage, "the item degrees (Eq. 9) were already summed and broadcast")
            return SumSite(roles.DEGREES, roles.session("warmup/degrees"), n, users, frac)
        if j > s.K or not len(st.deg_t):
            raise _refuse(
                stage, f"no secure sum {j} of the warm-up (K = {s.K}, degrees known: {len(st.deg_t) > 0})"
            )
        d = int(st.user.shape[2])
        return SumSite(roles.PROPAGATE, roles.session("warmup", j), n * d, users, frac)
    if j > 0:
        raise _refuse(stage, "a round has one secure sum (Step 4)")
    if st.pending is None:
        raise _refuse(stage, "Step 4's secure sum before this round's local training")
    K, d = s.K, int(st.user.shape[2])
    length = (K + 1) * n * d + (n if s.item_agg == "mean_touched" else 0)
    label = None if step is None else roles.session("round", step)
    return SumSite(roles.UPLOAD, label, length, st.sample.clients, frac)


def _check_state(program: FedGRecNode, stage: str) -> None:
    """Refuse a stage the node's own state rules out (warm-up stages in a round, a round before it)."""
    st = program.state
    warm = st.sample is None  # the node has not been in a round yet
    if stage == roles.DEGREES and (not warm or len(st.deg_t)):
        raise _refuse(stage, "the item degrees arrive once, in the warm-up")
    if stage == roles.WARMUP_DOWNLOAD and (not warm or not len(st.deg_t)):
        raise _refuse(stage, "a warm-up download outside the warm-up (or before the item degrees)")
    if stage == roles.QUERY and not len(st.deg_t):
        raise _refuse(stage, "a round before the warm-up's item degrees")
    if stage == roles.ROUND_DOWNLOAD and (st.sample is None or st.pending is not None):
        raise _refuse(stage, "a download without this round's query")
    if stage in (roles.PREDICT, EVALUATE) and not len(st.deg_t) and (program.deg_u > 0).any():
        raise _refuse(stage, "evaluation before the item degrees of the warm-up")


def expectation(program: FedGRecNode, stage: str) -> Expectation:
    """The parts the node expects in ``stage`` (module docstring), once its state allows the stage.

    Raises:
        IntegrityError: the node's state rules the stage out (a warm-up stage in a round, ...).
    """
    _check_state(program, stage)
    s, st = program.settings, program.state
    dtype, d = st.user.dtype, int(st.user.shape[2])
    if stage in _SUMS:
        return sum_expectation(stage, site(program, stage).prefix)
    if stage == roles.DEGREES:
        return {"degrees": Expect(roles.DEGREES, kind="degrees", shape="broadcast", dtype=torch.int32)}
    if stage == roles.WARMUP_DOWNLOAD:
        return {
            "items": Expect(roles.WARMUP_DOWNLOAD, kind="item-table", shape="broadcast", dtype=dtype, width=d)
        }
    if stage == roles.ROUND_DOWNLOAD:
        return {
            "rows": Expect(
                roles.ROUND_DOWNLOAD, kind="item-embeddings", shape="broadcast", dtype=dtype, width=d
            )
        }
    if stage == roles.PREDICT:
        if s.eval_latents != "refresh" or not s.K:
            return {}
        return {
            "items": Expect(roles.PREDICT_PHASE, kind="item-table", shape="broadcast", dtype=dtype, width=d)
        }
    if stage == EVALUATE:
        width = (s.K + 1) * d if s.aggregation == "concat" else d
        return {"items": replace(EVALUATE_ITEMS, dtype=dtype, width=width, optional=False)}
    return {}  # set-up, queries: nothing from the server but fields


def check_request(program: FedGRecNode, stage: str, step: int, request: Message) -> None:
    """Check the fields (and table shapes) of ``request`` the node knows itself (module docstring).

    Raises:
        IntegrityError: naming the stage and the field.
    """
    s, st, f = program.settings, program.state, request.fields
    n, d = program.n_items, int(st.user.shape[2])

    def shape(name: str, want: tuple[int, ...]) -> None:
        got = tuple(request[name].value.shape)
        if got != want:
            raise _refuse(stage, f"part {name!r} has shape {got}; this node expects {want}")

    _check_state(program, stage)
    if stage == roles.DEGREES:
        shape("degrees", (n,))
    elif stage == roles.WARMUP_DOWNLOAD:
        k = program.occurrence + 1
        if f.get("k") != k:
            raise _refuse(stage, f"field 'k' is {f.get('k')!r}; this node expects order {k}")
        shape("items", (n, d))
    elif stage == roles.QUERY:
        _check_query(program, step, f)
    elif stage == roles.ROUND_DOWNLOAD:
        rs = st.sample
        assert rs is not None  # _check_state
        union = len(np.unique(rs.queries()[1]))
        if f.get("full") != (union == n):
            raise _refuse(stage, f"field 'full' is {f.get('full')!r}; this node queried {union} of {n} items")
        shape("rows", (s.K + 1, union, d))
    elif stage == roles.PREDICT and "items" in request:
        shape("items", (s.K + 1, n, d))
    elif stage == EVALUATE:
        shape("items", (n, (s.K + 1) * d if s.aggregation == "concat" else d))


def _check_query(program: FedGRecNode, step: int, f: Any) -> None:
    """Step 1's fields: the round is the step, the sampled users are the public stream's draw."""
    s = program.settings
    if f.get("round") != step:
        raise _refuse(roles.QUERY, f"field 'round' is {f.get('round')!r}; this node is at step {step}")
    active = np.flatnonzero(program.degrees > 0)  # every user with training items (the data's public shape)
    want = sample_clients(active, step, seed=s.seed, clients_per_round=s.clients_per_round)
    sampled = np.asarray(f.get("sampled", []), dtype=np.int64)
    if not np.array_equal(sampled, want):
        raise _refuse(roles.QUERY, f"field 'sampled' names {len(sampled)} user(s), not round {step}'s draw")
    own = want[np.isin(want, program.clients)]
    clients = np.asarray(f.get("clients", []), dtype=np.int64)
    if not len(own) or not np.array_equal(clients, own):
        raise _refuse(
            roles.QUERY, f"field 'clients' names {len(clients)} user(s), not this node's sampled users"
        )
