"""What a node accepts: per-stage expectations of incoming parts, and the order of stages.

The server relays and labels every message, and an active server may lie about all of it: a part's
phase, its protection, its sender role, the stage it asks for, the step. A node therefore never takes
a label from the wire as truth (DESIGN.md, "Threat model"). Each client program declares

* per stage, what it expects to receive (:class:`Expect` per part name: phase, protection, sender
  role, kind, shape, dtype, width, whether it is optional), computed from the program's *own* state
  (e.g. which layer comes next), never from the request; and
* the order of its stages (:class:`StageFlow`): which stage may open the run, which may follow which,
  which may open a new step, and how many times a stage may run in one step (e.g. one per layer).

:class:`NodeEndpoint <fedgraphrec.runtime.endpoint.NodeEndpoint>` runs :class:`FlowState` (the stage
state machine, kept per node for the whole run) and :func:`check_parts` on every request before the
program sees it, and opens sealed parts with the associated data of the *expected* phase, so a
ciphertext delivered at another phase, a sealed part relabelled ``plain``, a stage run twice, out of
order or from an earlier step are all :class:`~fedgraphrec.crypto.errors.IntegrityError` naming the
stage and the parties.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.runtime.part import Part, Protection, Shape
from fedgraphrec.runtime.sealing import SERVER

__all__ = [
    "Expect",
    "Expectation",
    "FlowState",
    "NodeView",
    "StageFlow",
    "check_content",
    "check_parts",
    "flow",
]

SettingsT = TypeVar("SettingsT", covariant=True)
StateT = TypeVar("StateT", covariant=True)


class NodeView(Protocol[SettingsT, StateT]):
    """What a protocol's expectations read of a node's program: its settings, state and clients.

    A structural type rather than the program class, because the program calls the protocol's
    expectation module: what a node accepts depends on its view (its own settings, its state, the
    stage's occurrence, the clients it hosts, the catalogue's size), not on the program that answers
    the stages. A protocol's view adds what else its expectations read.
    """

    @property
    def settings(self) -> SettingsT:
        """The node's own settings of the protocol."""
        ...

    @property
    def state(self) -> StateT:
        """The program's typed state."""
        ...

    @property
    def occurrence(self) -> int:
        """How many times the current stage ran before in this step (0 the first time)."""
        ...

    @property
    def clients(self) -> np.ndarray:
        """The clients this node hosts."""
        ...

    @property
    def n_items(self) -> int:
        """The size of the item catalogue."""
        ...


@dataclass(frozen=True)
class Expect:
    """One part a node expects in a stage's request (fields left ``None`` are not constrained).

    Attributes:
        phase: the phase the part must carry; sealed parts are opened with this phase bound in
            their associated data, whatever the wire says.
        protection: the protection the part must have (a sealed part relabelled ``plain`` is refused).
        sender_role: the role that sends this hop (``"server"`` for what the server sends or relays).
        kind: the payload kind (``"user_embedding"``, ...).
        shape: ``"rows"``, ``"broadcast"`` or ``"blobs"``.
        dtype: the tensor dtype of rows or a broadcast once opened (never cast).
        width: the number of columns of rows or a broadcast once opened.
        dims: the whole shape of rows or a broadcast once opened, where the node knows it (``None``
            in a position: any size there), e.g. ``(n_items, d)`` for a table the server sends.
        from_role: for a relayed part, the role of the parties that first sent it.
        presealed: a sub-protocol's own ciphertexts (secure aggregation's shares).
        named_senders: the part's sealed messages are bound to sender *names* the server lists
            (:attr:`Part.bound_senders`, e.g. an item's holder known by the item); the program must
            then check those names itself. Otherwise a part listing names is refused: the server
            could swap two senders' ciphertexts and name each one's true sender, so every opening
            and every check of :attr:`Part.senders` would pass.
        optional: the part may be absent (e.g. nothing to relay to this node this step).
    """

    phase: str
    protection: Protection = "plain"
    sender_role: str = SERVER
    kind: str | None = None
    shape: Shape | None = None
    dtype: torch.dtype | None = None
    width: int | None = None
    dims: tuple[int | None, ...] | None = None
    from_role: str | None = None
    presealed: bool = False
    named_senders: bool = False
    optional: bool = False


Expectation = Mapping[str, Expect]
"""A stage's expected parts, by part name."""


@dataclass(frozen=True)
class StageFlow:
    """The order of a protocol's stages on a node: a state machine checked before every request.

    Attributes:
        first: the stages that may open the run (the first request a node ever answers).
        after: for each stage, the stages that may follow it (within a step or across steps).
        new_step: the stages that may open a new step (a request whose step is larger than the last).
        repeats: the most times a stage may run in one step (default 1); the node counts the
            runs itself (:attr:`FlowState.counts`) and tells the program how many came before
            (e.g. the layer), so a stage repeats only where the protocol says (a layer per run, a
            secure sum per layer) and never once more than it says.
    """

    first: frozenset[str]
    after: Mapping[str, frozenset[str]]
    new_step: frozenset[str]
    repeats: Mapping[str, int] = field(default_factory=dict)

    def stages(self) -> frozenset[str]:
        """Every stage the flow names (computed once: the flow is immutable)."""
        hit: frozenset[str] | None = self.__dict__.get("_stages")
        if hit is None:
            named: set[str] = set(self.first) | set(self.new_step) | set(self.after)
            for nxt in self.after.values():
                named |= nxt
            hit = frozenset(named)
            object.__setattr__(self, "_stages", hit)
        return hit


def flow(
    first: Iterable[str],
    after: Mapping[str, Iterable[str]],
    new_step: Iterable[str],
    repeats: Mapping[str, int] | None = None,
) -> StageFlow:
    """A :class:`StageFlow` from plain iterables (the way protocols declare it in ``roles.py``)."""
    return StageFlow(
        frozenset(first),
        {k: frozenset(v) for k, v in after.items()},
        frozenset(new_step),
        dict(repeats or {}),
    )


@dataclass
class FlowState:
    """Where a node is in its :class:`StageFlow` (kept for the whole run; on Flower in the node's state).

    Attributes:
        step: the step of the last request (``None`` before the first).
        stage: the last stage answered (``""`` before the first).
        counts: how many times each stage ran in :attr:`step`.
    """

    step: int | None = None
    stage: str = ""
    counts: dict[str, int] = field(default_factory=dict)

    def advance(self, protocol: str, rules: StageFlow, stage: str, step: int) -> int:
        """Accept ``stage`` at ``step`` or raise; returns how many times it ran before in this step.

        A stage may follow the last one only if :attr:`StageFlow.after` allows it, may open a new
        step only if it is in :attr:`StageFlow.new_step`, and may run at most
        :attr:`StageFlow.repeats` times in one step (once by default).

        Raises:
            IntegrityError: the stage is unknown, out of order, run too often in a step, or the
                step went back; the message names the protocol, the stage and the step.
        """
        if stage not in rules.stages():
            raise IntegrityError(f"{_at(protocol, stage, step)}: this node's protocol has no such stage")
        if self.step is None:
            if stage not in rules.first:
                raise IntegrityError(
                    f"{_at(protocol, stage, step)}: a run must begin with {sorted(rules.first)}"
                )
        elif step < self.step:
            raise IntegrityError(
                f"{_at(protocol, stage, step)}: the server asked for step {step} after step {self.step}; "
                "a node never returns to an earlier step"
            )
        elif stage not in rules.after.get(self.stage, frozenset()):
            raise IntegrityError(
                f"{_at(protocol, stage, step)}: stage {stage!r} may not follow {self.stage!r} on this node"
            )
        elif step > self.step and stage not in rules.new_step:
            raise IntegrityError(f"{_at(protocol, stage, step)}: stage {stage!r} cannot open a new step")
        if self.step is None or step > self.step:
            self.step, self.counts = step, {}
        before = self.counts.get(stage, 0)
        if before >= rules.repeats.get(stage, 1):
            raise IntegrityError(
                f"{_at(protocol, stage, step)}: stage {stage!r} already ran {before} time(s) this step"
            )
        self.stage = stage
        self.counts[stage] = before + 1
        return before

    def to_record(self) -> dict[str, Any]:
        """Plain values for a node's stored state (Flower ``context.state``)."""
        return {
            "flow.step": -(1 << 62) if self.step is None else int(self.step),
            "flow.stage": self.stage,
            "flow.counts": json.dumps(self.counts, sort_keys=True),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> FlowState:
        """The state :meth:`to_record` stored (a fresh state when nothing was stored)."""
        if "flow.step" not in record:
            return cls()
        step = int(record["flow.step"])
        counts = {str(k): int(v) for k, v in json.loads(str(record["flow.counts"])).items()}
        return cls(None if step == -(1 << 62) else step, str(record["flow.stage"]), counts)


def _at(protocol: str, stage: str, step: int) -> str:
    """Where a refused stage was (built only when refusing: the accepted path formats nothing)."""
    return f"{protocol} stage {stage!r} at step {step}"


def check_parts(protocol: str, stage: str, expected: Expectation, parts: Mapping[str, Part]) -> None:
    """Check a request's parts against what the node expects (before opening anything).

    Every part must be expected, every expected part (not optional) present, and each must carry
    the expected phase, protection, sender role and, where declared, kind, shape and origin role.

    Raises:
        IntegrityError: naming the stage, the part and what differs.
    """
    for name in parts:
        if name not in expected:
            raise IntegrityError(
                f"{protocol} stage {stage!r}: unexpected part {name!r} (expected {sorted(expected)})"
            )
    for name, exp in expected.items():
        part = parts.get(name)
        if part is None:
            if exp.optional:
                continue
            raise IntegrityError(f"{protocol} stage {stage!r}: part {name!r} ({exp.phase}) is missing")
        got = (part.phase, part.protection, part.sender_role, part.presealed, part.kind, part.shape,
               part.origin_role, part.bound_senders)  # fmt: skip
        if got != _wanted(exp, got):  # one comparison in the common case; the first difference named
            for what, have, want in zip(_LABELS, got, _wanted(exp, got), strict=True):
                if have != want:
                    raise IntegrityError(
                        f"{protocol} stage {stage!r}: part {name!r} arrived with {what} {have!r}; "
                        f"this node expects {want!r} (phase {exp.phase}, from {exp.sender_role})"
                    )


_LABELS = ("phase", "protection", "sender role", "presealed", "kind", "shape", "origin role", "sender names")


def _wanted(exp: Expect, got: tuple[Any, ...]) -> tuple[Any, ...]:
    """What :func:`check_parts` wants of each field of ``got``; an undeclared field wants what it got."""
    return (
        exp.phase,
        exp.protection,
        exp.sender_role,
        exp.presealed,
        got[4] if exp.kind is None else exp.kind,
        got[5] if exp.shape is None else exp.shape,
        got[6] if exp.from_role is None else exp.from_role,
        got[7] if exp.named_senders else None,
    )


def check_content(protocol: str, stage: str, name: str, exp: Expect, part: Part) -> None:
    """Check an opened part's content against the expected dtype and width (never cast).

    Raises:
        IntegrityError: naming the stage, the part and what differs.
    """
    if (
        part.shape == "blobs"
        or part.value is None
        or (exp.dtype is None and exp.width is None and exp.dims is None)
    ):
        return
    value = part.value
    if isinstance(value, torch.Tensor):
        dtype = value.dtype
    else:
        dtype = torch.from_numpy(np.zeros(0, np.asarray(value).dtype)).dtype
    shape = tuple(value.shape)
    if exp.dtype is not None and dtype != exp.dtype:
        raise IntegrityError(
            f"{_where(protocol, stage, name, exp)} holds {dtype}; this node expects {exp.dtype}"
        )
    if exp.width is not None and (len(shape) < 2 or shape[-1] != exp.width):
        raise IntegrityError(
            f"{_where(protocol, stage, name, exp)} has shape {shape}; "
            f"this node expects rows of width {exp.width}"
        )
    if exp.dims is not None and (
        len(shape) != len(exp.dims)
        or any(w is not None and g != w for g, w in zip(shape, exp.dims, strict=True))
    ):
        raise IntegrityError(
            f"{_where(protocol, stage, name, exp)} has shape {shape}; this node expects {exp.dims}"
        )


def _where(protocol: str, stage: str, name: str, exp: Expect) -> str:
    return f"{protocol} stage {stage!r}: part {name!r} ({exp.phase})"
