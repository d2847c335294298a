"""An active server: it alters one relayed, sealed message and sees whether the receiver notices.

The horizontal protocols relay clients' sealed messages through the server. A curious server can
only read what it gets; an *active* one can also change what it forwards. :class:`ActiveServer`
plugs into the runtime as its :class:`~fedgraphrec.runtime.network.Adversary` and, once, on the
first eligible batch of a chosen phase, carries out one of four attacks:

- ``flip`` — flip one byte of one message;
- ``replay`` — deliver, in place of one message, the message the same receiver got in this phase
  at an earlier step (the ciphertext the server saw then);
- ``swap`` — exchange the messages of two receivers (hand client A's message to client C);
- ``drop`` — withhold one message.

The attack *succeeds* (is ``accepted``) when the step completes anyway: the receivers computed with
altered or stale data without noticing. It is *detected* when a receiver raises
:class:`~fedgraphrec.crypto.errors.IntegrityError`. :func:`tamper_inbox` applies the same attacks
to secure aggregation's share messages (recipient → sender → message).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["ATTACKS", "ActiveServer", "tamper_inbox"]

ATTACKS = ("flip", "replay", "swap", "drop")
"""The attacks an active server tries, in report order."""


@dataclass
class ActiveServer:
    """One attack on the first eligible sealed batch of ``phase`` (any phase if ``None``).

    Args:
        attack: one of :data:`ATTACKS`.
        phase: the phase to attack (exact name), or ``None`` for the first eligible one.
        rng: which message of the batch is attacked (public randomness; nothing secret).
    """

    attack: str
    phase: str | None = None
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    fired_at: tuple[str, int] | None = None
    _seen: dict[str, dict[tuple[int, int], tuple[int, Any]]] = field(default_factory=dict)
    """Per phase, per slot (receiver, k-th message to it): the latest (step, payload) forwarded."""

    def __post_init__(self) -> None:
        if self.attack not in ATTACKS:
            raise ValueError(f"attack must be one of {ATTACKS}, got {self.attack!r}")

    @property
    def fired(self) -> bool:
        """Whether the attack was carried out."""
        return self.fired_at is not None

    def forward(self, phase: str, step: int, payloads: list[Any], receivers: np.ndarray | None) -> list[Any]:
        """The batch as the server delivers it (altered once, when eligible)."""
        recv = np.arange(len(payloads)) if receivers is None else np.asarray(receivers)
        slots = _slots(recv)
        memory = self._seen.setdefault(phase, {})
        earlier = [memory[k][1] if k in memory and memory[k][0] < step else None for k in slots]
        for k, payload in zip(slots, payloads, strict=True):
            memory[k] = (step, payload)
        if self.fired or (self.phase is not None and phase != self.phase) or not payloads:
            return payloads
        out = _apply(self.attack, payloads, recv, earlier, self.rng)
        if out is not None:
            self.fired_at = (phase, step)
            return out
        return payloads


def _slots(receivers: np.ndarray) -> list[tuple[int, int]]:
    """Each message's slot: its receiver and how many messages to that receiver came before it."""
    seen: dict[int, int] = {}
    out = []
    for r in receivers.tolist():
        out.append((int(r), seen.get(int(r), 0)))
        seen[int(r)] = seen.get(int(r), 0) + 1
    return out


def _apply(
    attack: str,
    payloads: list[Any],
    recv: np.ndarray,
    earlier: list[Any | None],
    rng: np.random.Generator,
) -> list[Any] | None:
    """The altered batch, or ``None`` when this batch offers no instance of the attack."""
    out = list(payloads)
    k = int(rng.integers(len(out)))
    if attack == "flip":
        out[k] = _flip(out[k])
        return out
    if attack == "drop":
        out[k] = None
        return out
    if attack == "replay":  # the same receiver's message of an earlier step, where it differs
        diff = [j for j in range(len(out)) if earlier[j] is not None and earlier[j] != out[j]]
        if not diff:
            return None
        j = diff[int(rng.integers(len(diff)))]
        out[j] = earlier[j]
        return out
    for j in rng.permutation(len(out)).tolist():  # swap: two receivers, two different messages
        other = [i for i in range(len(out)) if recv[i] != recv[j] and out[i] != out[j]]
        if other:
            i = other[0]
            out[i], out[j] = out[j], out[i]
            return out
    return None


def _flip(payload: Any) -> Any:
    """One payload with one byte flipped (in the first message of a bundle)."""
    if isinstance(payload, list | tuple) and payload:
        return [_flip(payload[0]), *payload[1:]]
    blob = bytearray(payload)
    blob[len(blob) // 2] ^= 0x5A
    return bytes(blob)


def tamper_inbox(
    server: ActiveServer,
) -> Callable[[str, dict[int, dict[int, bytes]]], dict[int, dict[int, bytes]]]:
    """The :class:`ActiveServer` as a secure-aggregation share-routing hook (recipient → sender → message)."""
    session = [0]

    def hook(stage: str, inbox: dict[int, dict[int, bytes]]) -> dict[int, dict[int, bytes]]:
        slots = [(v, u) for v in sorted(inbox) for u in sorted(inbox[v])]
        payloads: list[Any] = [inbox[v][u] for v, u in slots]
        out = server.forward(f"secagg/{stage}", session[0], payloads, np.array([v for v, _ in slots]))
        session[0] += 1
        result: dict[int, dict[int, bytes]] = {v: {} for v in inbox}
        for (v, u), blob in zip(slots, out, strict=True):
            if blob is not None:
                result[v][u] = blob
        return result

    return hook
