"""A server that lies about labels, stages, parameters and the session, not only about payloads.

:class:`~fedgraphrec.attacks.active_server.ActiveServer` alters the ciphertexts a server relays;
the AEAD catches that. :class:`LyingServer` attacks what the AEAD does not cover: what the server
*says* about a message and when it asks a node to act. It plugs into either engine's transport as a
:class:`~fedgraphrec.runtime.network.LyingAdversary` and carries out one attack, once:

- ``downgrade`` (label forgery) — a sealed part of the target phase is relabelled ``plain`` and
  filled with the server's own rows of the right shape and dtype (solved from the ciphertext sizes),
  so that only a node checking the protection it expects can tell;
- ``relabel`` (label forgery) — the part is delivered under another phase name of the same kind
  (another sealed phase, or a made-up name, when the protocol seals one phase only);
- ``cross-phase`` (cross-phase replay) — in place of the target phase's part, the node gets the
  ciphertexts of another phase of the *same step* that the server sent it earlier (e.g. a deeper
  layer's gradients at a shallower layer), under their own, valid, label;
- ``rerun`` (same-stage re-run) — the target stage is delivered twice in its step;
- ``reset`` (session reset) — at a later step, the first stage the run ever sent (set-up) is sent
  again with its original requests; on Flower with a fresh hello, which resets the node's session;
- ``reset-accounted`` (session reset, Flower) — a hello whose configuration says crypto
  ``accounted`` is attached to a later request; the attack has succeeded when a node then replies
  with a sealed part unsealed (:attr:`LyingServer.leaked`);
- ``threshold`` (lowered parameters) — every secure-aggregation request of the target aggregation
  (``fields["phase"]``) asks for a threshold of 2 (1 if it was 2);
- ``truncate``, ``dtype``, ``shape``, ``count`` (malformed records, Flower):
  :mod:`fedgraphrec.attacks.malformed_records` on the encoded request.

Whatever the attack, the adversary also records what it saw (stages per step, sealed and plain
phases with their kinds, secure-aggregation phases), which the integrity audit reads from a clean
run to know what to attack. An attack with no instance in a run (e.g. no other phase sent earlier
in the step for ``cross-phase``) leaves :attr:`LyingServer.fired` false.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch

from fedgraphrec.attacks.malformed_records import MALFORMED, malform
from fedgraphrec.crypto.aead import ciphertext_size
from fedgraphrec.runtime.codec import encode_tensor, encoded_size
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part

__all__ = ["LIES", "LyingServer", "forge_plain"]

LIES = ("downgrade", "relabel", "cross-phase", "rerun", "reset", "reset-accounted", "threshold", *MALFORMED)
"""The attacks of :class:`LyingServer`, in report order."""

_SEALED = ("sealed", "asymmetric")
_DTYPES = (torch.float64, torch.float32, torch.int64, torch.int32)


@dataclass
class LyingServer:
    """One lie (module docstring) on ``target``: a phase, a stage, or a secure-aggregation phase.

    Args:
        attack: one of :data:`LIES`, or ``"observe"`` (record only; for clean runs).
        target: the phase (part attacks, malformed records), the stage (``rerun``) or the
            secure-aggregation phase (``threshold``); unused by the session attacks.
        known: phase → kind of the sealed phases of a clean run (``relabel`` picks another phase
            of the same kind from it).
        reset_step: the session attacks fire at the first eligible stage of this step or later.
    """

    attack: str
    target: str | None = None
    known: Mapping[str, str] = field(default_factory=dict)
    reset_step: int = 1
    fired_at: tuple[str, int, int] | None = None
    """(stage, node, step) where the attack was carried out (node -1: every node of the round)."""
    detail: str = ""
    """What was forged: the donor phase, the new label, the lowered threshold, ..."""
    leaked: bool = False
    """``reset-accounted``: a node replied with a sealed part in the clear after the forged hello."""
    stages: list[tuple[int, str]] = field(default_factory=list)
    sealed_kinds: dict[str, str] = field(default_factory=dict)
    sealed_steps: dict[str, list[int]] = field(default_factory=dict)
    plain_kinds: dict[str, str] = field(default_factory=dict)
    secagg_phases: list[str] = field(default_factory=list)
    _step: int = -(1 << 62)
    _sent: dict[int, list[Part]] = field(default_factory=dict)
    _with_sealed: set[tuple[str, int, int]] = field(default_factory=set)
    _first: tuple[str, int, dict[int, Message]] | None = None
    _hello_to: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.attack not in (*LIES, "observe"):
            raise ValueError(f"attack must be one of {LIES} or 'observe', got {self.attack!r}")

    @property
    def fired(self) -> bool:
        """Whether the attack was carried out."""
        return self.fired_at is not None

    def _fire(self, stage: str, node: int, step: int, detail: str = "") -> None:
        self.fired_at = (stage, node, step)
        self.detail = detail

    # ------------------------------------------------------------------ Adversary
    def forward(self, phase: str, step: int, payloads: list[Any], receivers: np.ndarray | None) -> list[Any]:
        """Payloads pass unchanged (this server lies about everything but the bytes)."""
        return payloads

    # ------------------------------------------------------------------ stages
    def schedule(
        self, stage: str, step: int, requests: Mapping[int, Message]
    ) -> list[tuple[str, Mapping[int, Message]]]:
        """``rerun``: the stage twice; ``reset``: the run's first stage again, then this one."""
        self.stages.append((step, stage))
        if self._first is None:
            self._first = (stage, step, dict(requests))
        if self.fired:
            return [(stage, requests)]
        if self.attack == "rerun" and stage == self.target:
            self._fire(stage, -1, step, "delivered twice")
            return [(stage, requests), (stage, requests)]
        first = self._first
        if self.attack == "reset" and step >= self.reset_step and step > first[1] and stage != first[0]:
            self._fire(first[0], -1, step, f"{first[0]} of step {first[1]} sent again before {stage}")
            return [(first[0], first[2]), (stage, requests)]
        return [(stage, requests)]

    # ------------------------------------------------------------------ parts and fields
    def tamper(self, stage: str, node: int, name: str, part: Part, step: int) -> Part:
        """The part as delivered: forged for ``downgrade``, ``relabel`` and ``cross-phase``."""
        if step != self._step:
            self._step, self._sent = step, {}
        sealed = part.protection in _SEALED
        if sealed and part.n_messages:
            self.sealed_kinds.setdefault(part.phase, part.kind)
            steps = self.sealed_steps.setdefault(part.phase, [])
            if step not in steps:
                steps.append(step)
            self._with_sealed.add((stage, node, step))
        elif part.value is not None and part.n_messages:
            self.plain_kinds.setdefault(part.phase, part.kind)
        out = part
        if sealed and not self.fired and part.phase == self.target:
            if self.attack == "downgrade":
                forged = forge_plain(part)
                if forged is not None:
                    out = forged
                    self._fire(stage, node, step, f"{part.phase} delivered as plain rows of the server's")
            elif self.attack == "relabel":
                other = self._other_phase(part)
                out = replace(part, phase=other)
                self._fire(stage, node, step, other)
            elif self.attack == "cross-phase":
                donor = self._donor(node, part)
                if donor is not None:
                    out = donor
                    self._fire(stage, node, step, donor.phase)
        if sealed:
            self._sent.setdefault(node, []).append(part)
        return out

    def _other_phase(self, part: Part) -> str:
        """Another sealed phase of the same kind; else any other sealed phase; else a made-up name."""
        names = sorted(p for p in self.known if p != part.phase)
        same = [p for p in names if self.known[p] == part.kind]
        return (same or names or [f"{part.phase}~relabelled"])[0]

    def _donor(self, node: int, part: Part) -> Part | None:
        """A sealed part of another phase sent to ``node`` earlier in this step (the most alike first)."""
        pool = [p for p in self._sent.get(node, []) if p.phase != part.phase]
        best = sorted(
            pool,
            key=lambda p: (
                p.protection != part.protection,
                p.kind != part.kind,
                p.n_messages != part.n_messages,
            ),
        )
        return best[0] if best else None

    def tamper_fields(self, stage: str, node: int, fields: dict[str, Any], step: int) -> dict[str, Any]:
        """``threshold``: a lower secure-aggregation threshold in every request of the target phase."""
        if "threshold" not in fields:
            return fields
        phase = str(fields.get("phase", stage))
        if phase not in self.secagg_phases:
            self.secagg_phases.append(phase)
        if self.attack != "threshold" or phase != self.target:
            return fields
        asked = int(fields["threshold"])
        lowered = 2 if asked > 2 else 1
        if lowered >= asked:
            return fields
        if not self.fired:
            self._fire(stage, node, step, f"threshold {asked} -> {lowered}")
        return {**fields, "threshold": lowered}

    def observe_reply(self, stage: str, node: int, reply: Message, step: int) -> None:
        """Notes a sealed part that a node sent in the clear (after a forged session)."""
        if not self.fired:
            return
        for part in reply.parts.values():
            clear = part.sealed is None and part.value is not None and part.n_messages > 0
            if part.protection == "sealed" and not part.presealed and clear:
                self.leaked = True

    # ------------------------------------------------------------------ Flower only
    def hello(
        self,
        stage: str,
        node: int,
        step: int,
        pending: Mapping[str, Any] | None,
        original: Mapping[str, Any] | None,
    ) -> Mapping[str, Any] | None:
        """``reset``: a fresh hello with the re-sent first stage; ``reset-accounted``: a forged one."""
        if original is None:
            return pending
        injected = self.fired_at is not None and self._first is not None and stage == self._first[0]
        if self.attack == "reset" and injected and step == self.fired_at[2] and node not in self._hello_to:  # type: ignore[index]
            self._hello_to.add(node)
            return original
        if (
            self.attack == "reset-accounted"
            and not self.fired
            and step >= self.reset_step
            and (stage, node, step) not in self._with_sealed
        ):
            config = json.loads(str(original["config"]))
            config["crypto"] = "accounted"
            self._fire(stage, node, step, "hello with crypto 'accounted'")
            return {**original, "config": json.dumps(config, sort_keys=True)}
        return pending

    def tamper_records(self, stage: str, node: int, content: Any, step: int) -> Any:
        """Malformed records: the target phase's arrays altered in the encoded request."""
        if self.attack in MALFORMED and not self.fired and self.target is not None:
            what = malform(content, self.attack, self.target)
            if what:
                self._fire(stage, node, step, what)
        return content


def forge_plain(part: Part) -> Part | None:
    """A plain part standing in for sealed ``part``: the server's own content, shaped as the plaintext.

    Blobs keep their lengths; rows get the shape and dtype whose encoding has the plaintext's size
    (the ciphertext's minus the AEAD overhead), so a receiver that trusts the label computes on them.
    ``None`` when no shape fits.
    """
    if part.shape == "blobs":
        travels_as_value = part.presealed or part.protection == "asymmetric"
        blobs = part.value if travels_as_value else part.sealed
        if blobs is None:
            return None
        cut = 0 if travels_as_value else ciphertext_size(0)  # the group key's AEAD adds it on the wire
        value = [_filler(max(len(b or b"") - cut, 1)) for b in blobs]
        return replace(part, protection="plain", presealed=False, value=value, sealed=None, _sizes=None)
    if part.sealed is None or part.shape != "rows":
        return None
    overhead = ciphertext_size(0)
    counts = np.ones(part.n_messages, dtype=np.int64) if part.counts is None else part.counts
    plain = [len(b) - overhead for b in part.sealed if b is not None]
    rich = [k for k, c in enumerate(counts.tolist()) if c > 0]
    if len(plain) != len(counts) or not rich:
        return None
    for dtype in _DTYPES:
        width = _width(plain[rich[0]], int(counts[rich[0]]), dtype)
        if width is not None and all(
            encoded_size((int(c), width), dtype) == n for c, n in zip(counts.tolist(), plain, strict=False)
        ):
            rows = torch.full((int(counts.sum()), width), 0.25, dtype=torch.float64).to(dtype)
            return replace(
                part, protection="plain", value=rows, sealed=None, index=None, batched=False, _sizes=None
            )
    return None


def _filler(n: int) -> bytes:
    """``n`` bytes of the server's, in the format a blob of that length most likely has.

    An encoded tensor (:mod:`~fedgraphrec.runtime.codec`) of one row of floats when that length
    fits one, else a small little-endian integer (1): what protocols put in blobs (degrees, counts).
    """
    for dtype in _DTYPES[:2]:
        for rows in (1, 0):  # a (1, w) row, else a (w,) vector
            shape = (1, 0) if rows else (0,)
            item = torch.empty((), dtype=dtype).element_size()
            data = n - encoded_size(shape, dtype)
            if data >= item and data % item == 0 and n > 8:
                width = data // item
                return encode_tensor(torch.full((1, width) if rows else (width,), 0.25, dtype=dtype))
    return b"\x01" + bytes(n - 1)


def _width(size: int, rows: int, dtype: torch.dtype) -> int | None:
    """The row width ``w`` with ``encoded_size((rows, w), dtype) == size``, if any."""
    item = torch.empty((), dtype=dtype).element_size()
    data = size - encoded_size((rows, 0), dtype)
    if rows < 1 or data < 0 or data % (rows * item):
        return None
    return data // (rows * item)
