"""Transcripts: what each party actually received, for privacy audits.

When enabled, every delivery through the runtime appends a :class:`Received` entry to the
receiving role's transcript, holding the payload objects exactly as that party got them
(ciphertext ``bytes`` for protected payloads, tensors for plaintext ones) and a ``kind`` label
that names what the payload *is* (e.g. ``"user_embedding"``), which audits compare with the bytes.
Disabled transcripts cost nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Received", "Transcript"]


@dataclass(frozen=True)
class Received:
    """One batch of messages delivered to parties of one role.

    Attributes:
        phase: protocol phase (e.g. ``"forward/l=0/users"``).
        sender: sending role.
        kind: what the payloads are (``"user_embedding"``, ``"item_token"``, ...).
        protected: whether the payloads are ciphertexts the receiver cannot open.
        payloads: the payload objects as received (one per message).
        receivers: receiving client ids, when the receiver is a client role.
        senders: sending client ids, when the sender is a client role (a server knows who sent what).
    """

    phase: str
    sender: str
    kind: str
    protected: bool
    payloads: Sequence[Any]
    receivers: Sequence[int] | None = None
    senders: Sequence[int] | None = None


class Transcript:
    """Per-role record of received messages (switch with ``enabled``)."""

    def __init__(self, enabled: bool = False) -> None:
        self.enabled = enabled
        self._by_role: dict[str, list[Received]] = defaultdict(list)

    def add(self, receiver: str, entry: Received) -> None:
        """Append one delivery to ``receiver``'s transcript (no-op when disabled)."""
        if self.enabled:
            self._by_role[receiver].append(entry)

    def of(self, role: str) -> list[Received]:
        """Everything parties of ``role`` received, in order."""
        return list(self._by_role.get(role, []))

    def roles(self) -> list[str]:
        """Roles that received anything."""
        return list(self._by_role)

    def payloads(self, role: str, kind: str | None = None) -> Iterator[Any]:
        """Every payload object ``role`` received (optionally of one ``kind``)."""
        for entry in self._by_role.get(role, []):
            if kind is None or entry.kind == kind:
                yield from entry.payloads
