"""What a P-GCN node accepts: its stage order, each stage's parts, and the secure sums it expects.

A node declares from its own configuration and state (DESIGN.md, "Threat model"; issue 30 §1):

* the order of its stages (:func:`stage_flow`): enrolment and the degrees' secure sum, then per step
  either a training step (``L`` forward layers, each followed by its secure sum, then
  ``train/local`` and the gradients' secure sum) or a prediction (``L`` forward layers with their
  sums, then ``predict``, then ``evaluate``). Every training step and every prediction has a step
  of its own (the server opens one for each), so the forward stage runs at most ``L`` times in a
  step and secure aggregation's stages ``L + 1`` times; the node counts them itself, and the count
  is the layer (``occurrence``), never the server's field ``k``.
* every part it expects (:func:`expectation`): the whole tables of each layer (the run's dtype,
  ``d`` wide; the last training layer's only for the nodes with triples), ``W`` at layer 0, the
  degrees (``int32``), the evaluation's item table, secure aggregation's parts under the phase of
  the sum that comes next;
* which secure sum comes next (:func:`sum_site`), from the stage that preceded it (the node's
  ``pending``) and the number of sums already run in the step: the degrees once at set-up, layer
  ``k``'s propagation after forward layer ``k``, the gradients after ``train/local``. Session labels
  name the protocol step, so the node computes them and a sum cannot be replayed in another step.

:func:`check_stage` makes the node refuse a stage whose preconditions its own state does not meet
(the degrees twice, a forward before the degrees, ``train/local`` or ``predict`` before every layer
arrived). Every violation is an :class:`~fedgraphrec.crypto.errors.IntegrityError` naming the stage.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.protocols.base import EVALUATE_ITEMS
from fedgraphrec.protocols.baselines.pgcn import roles as R
from fedgraphrec.protocols.secagg.expect import SumSite, merge_edges, sum_edges, sum_repeats
from fedgraphrec.runtime.expect import Expect, Expectation, StageFlow, flow

__all__ = [
    "ST_EVALUATE",
    "check_degrees",
    "check_layer_fields",
    "check_stage",
    "expectation",
    "stage_flow",
    "sum_site",
]

ST_EVALUATE = "evaluate"
"""The generic federated-evaluation stage (:meth:`~fedgraphrec.protocols.base.ServerProgram.evaluate`)."""
DEGREES, GRADIENTS, EVALUATE = "degrees", "gradients", "evaluate"
"""Values of the node's ``pending`` besides ``"train"`` and ``"predict"`` (a forward's prefix)."""


def stage_flow(n_layers: int) -> StageFlow:
    """The node's stage order for ``n_layers`` forward layers (module docstring)."""
    L = n_layers
    F, PF, LOC, P, EV = R.ST_FORWARD, R.ST_PREDICT_FORWARD, R.ST_LOCAL, R.ST_PREDICT, ST_EVALUATE
    starts = [F, PF] if L else [LOC, P]
    own: dict[str, list[str]] = {
        R.ST_ENROLL: [EV],  # a node without training items takes no part until evaluation
        R.ST_DEGREES: starts,
        P: [EV, *starts],
        EV: [EV, *starts],
    }
    sites = [sum_edges([R.ST_ENROLL], [R.ST_DEGREES]), sum_edges([LOC], starts)]
    if L:
        sites += [sum_edges([F], [F, LOC, *starts]), sum_edges([PF], [PF, P])]
    repeats = {**sum_repeats(L + 1), F: max(L, 1), PF: max(L, 1)}
    return flow(first=[R.ST_ENROLL], after=merge_edges(own, *sites), new_step=[*starts, EV], repeats=repeats)


def expectation(stage: str, k: int, n_layers: int, item0: torch.Tensor) -> Expectation:
    """The plain parts a node expects in ``stage`` at layer ``k`` (``item0``: for dtype and ``d``)."""
    dtype, m, d, L = item0.dtype, int(item0.shape[0]), int(item0.shape[1]), n_layers

    def table(phase: str, kind: str, optional: bool = False) -> Expect:
        dims = (m, d) if kind == R.K_ITEM_TABLE else None  # the item table: one row per item
        return Expect(phase, kind=kind, shape="broadcast", dtype=dtype, width=d, dims=dims, optional=optional)

    if stage == R.ST_DEGREES:
        degrees = Expect(R.PH_DEGREES, kind=R.K_DEGREES, shape="broadcast", dtype=torch.int32, dims=(m,))
        return {R.P_DEGREES: degrees}
    if stage in (R.ST_FORWARD, R.ST_PREDICT_FORWARD):
        download, _ = R.forward_phases("train" if stage == R.ST_FORWARD else "predict")
        # the last training layer goes only to the nodes whose users have triples this step
        last_optional = stage == R.ST_FORWARD and k == L - 1
        out = {R.P_ITEMS: table(download, R.K_ITEM_TABLE, last_optional)}
        if k == 0:
            out[R.P_W] = table(download, R.K_W_TABLE)
        return out
    if stage == R.ST_LOCAL:
        out = {R.P_ITEMS: table(R.PH_LOCAL_DOWNLOAD, R.K_ITEM_TABLE)}
        if L == 0:
            out[R.P_W] = table(R.PH_LOCAL_DOWNLOAD, R.K_W_TABLE)
        return out
    if stage == R.ST_PREDICT:
        return {R.P_W: table(R.PH_PREDICT, R.K_W_TABLE)} if L == 0 else {}
    if stage == ST_EVALUATE:  # the combined item table of the last prediction
        return {"items": replace(EVALUATE_ITEMS, dtype=dtype, width=d, optional=False)}
    return {}  # setup/enroll


def sum_site(stage: str, step: int | None, occurrence: int, st: Any, n_layers: int, node: Any) -> SumSite:
    """The secure sum this node expects now, from its ``pending`` stage and the sums run in the step.

    Args:
        stage: the secure-aggregation stage asked for.
        step: the request's step (``None``: only the phase prefix is asked for).
        occurrence: how many sums of this stage ran before in the step.
        st: the node's :class:`~.client.PGCNState`.
        n_layers: ``L``.
        node: the client program (its clients, items, active users, settings).

    Raises:
        IntegrityError: no secure sum may run here, or not this one.
    """
    active = node.clients[node._active()]
    N, d, bits = node.n_items, int(st.layers.shape[2]), node.settings.frac_bits
    where = f"pgcn: secure aggregation stage {stage!r}"
    if st.pending == DEGREES and occurrence == 0 and not len(st.deg_items):
        return SumSite(R.PH_DEGREES, R.session("setup", "degrees"), N, active, bits)
    if st.pending in ("train", "predict") and occurrence == st.layers_done - 1:
        _, propagate = R.forward_phases(st.pending)
        label = None if step is None else f"{R.session(st.pending, step)}/layer/{occurrence}"
        return SumSite(propagate, label, N * d, active, bits)
    if st.pending == GRADIENTS and occurrence == n_layers and (step is None or st.step == step):
        label = None if step is None else R.session("step", step)
        return SumSite(R.PH_GRADIENTS, label, 2 * N * d, st.up_users, bits)
    raise IntegrityError(
        f"{where}: this node expects no secure sum now (after {st.pending or 'nothing'!r}, "
        f"{occurrence} sum(s) this step)"
    )


def check_layer_fields(stage: str, step: int, k: int, fields: dict[str, Any]) -> str:
    """The forward's fields must be the node's own: layer ``k`` (its count) and this step's session.

    Returns the session label (``pgcn/train/<step>`` or ``pgcn/predict/<step>``).

    Raises:
        IntegrityError: naming the stage and the field.
    """
    label = R.session("train" if stage == R.ST_FORWARD else "predict", step)
    for name, want in ((R.F_LAYER, k), (R.F_SESSION, label)):
        if fields.get(name) != want:
            raise IntegrityError(
                f"pgcn stage {stage!r}: field {name!r} is {fields.get(name)!r}; this node expects {want!r}"
            )
    return label


def check_stage(
    stage: str, step: int | None, k: int, st: Any, n_layers: int, n_items: int, has_users: bool
) -> None:
    """Refuse a stage whose preconditions the node's own state does not meet (module docstring).

    ``step`` is ``None`` when asked before the request's parts are checked (the forward's session
    is then not compared; the stage itself asks again with its step).

    Raises:
        IntegrityError: naming the stage and what is missing.
    """
    where = f"pgcn stage {stage!r}" + ("" if step is None else f" at step {step}")
    L = n_layers
    if stage == ST_EVALUATE and has_users and st.pending != EVALUATE:
        raise IntegrityError(f"{where}: this node's users have no prediction to evaluate")
    if stage == R.ST_DEGREES and (st.pending != DEGREES or len(st.deg_items)):
        raise IntegrityError(f"{where}: the degrees come once, after their secure sum")
    if stage not in (R.ST_ENROLL, R.ST_DEGREES, ST_EVALUATE) and len(st.deg_items) != n_items:
        raise IntegrityError(f"{where}: this node has no item degrees yet")
    if stage in (R.ST_FORWARD, R.ST_PREDICT_FORWARD) and k > 0:
        prefix = "train" if stage == R.ST_FORWARD else "predict"
        same = step is None or st.forward == R.session(prefix, step)
        if st.pending != prefix or not same or st.layers_done != k:
            raise IntegrityError(f"{where}: layer {k} does not continue this step's forward")
    if stage in (R.ST_LOCAL, R.ST_PREDICT) and L:
        prefix = "train" if stage == R.ST_LOCAL else "predict"
        same = step is None or st.forward == R.session(prefix, step)
        done = st.pending == prefix and same and st.layers_done == L
        if not done or st.received != L:
            raise IntegrityError(f"{where}: this node did not receive every layer of this step's forward")


def check_degrees(value: Any, n_items: int) -> np.ndarray:
    """The broadcast degrees: one non-negative count per item.

    Raises:
        IntegrityError: another length, or a negative count.
    """
    deg = np.asarray(value, dtype=np.int64).reshape(-1)
    if len(deg) != n_items or (len(deg) and deg.min() < 0):
        raise IntegrityError(f"pgcn stage {R.ST_DEGREES!r}: {len(deg)} degrees; the run has {n_items} items")
    return deg
