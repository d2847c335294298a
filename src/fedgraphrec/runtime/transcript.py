"""Transcripts: what each party actually received, for privacy audits.

When enabled, every delivery through the runtime appends a :class:`Received` entry to the
receiving role's transcript, holding the payload objects exactly as that party got them
(ciphertext ``bytes`` for protected payloads, tensors for plaintext ones) and a ``kind`` label
that names what the payload *is* (e.g. ``"user_embedding"``), which audits compare with the bytes.
Disabled transcripts cost nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Received", "Transcript", "payload_bytes"]


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
        step: the protocol step (minibatch or round) the messages belong to (-1: set-up).
        sizes: bytes of each message on the wire, when known (every message is recorded, with or
            without its payload object).
        protection: ``plain``, ``sealed``, ``pseudonymous``, ``masked`` or ``homomorphic``.
    """

    phase: str
    sender: str
    kind: str
    protected: bool
    payloads: Sequence[Any]
    receivers: Sequence[int] | None = None
    senders: Sequence[int] | None = None
    step: int = -1
    sizes: Sequence[int] | None = None
    protection: str = ""


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

    def save(self, folder: str | Path) -> list[Path]:
        """Write ``<role>.jsonl`` per receiving role: one line per message, for a user's own audit.

        Each line holds ``phase``, ``step``, ``sender``, ``receiver`` (``role:id`` where the id is
        known), ``kind``, ``protection``, ``protected``, ``size`` (bytes on the wire) and ``sha256``
        of the payload bytes as delivered (``null`` for messages recorded without a payload), and
        ``batch``: how many logical messages those bytes carry (more than 1 where a single in-process
        node sealed a whole part as one AEAD message, :mod:`~fedgraphrec.runtime.batching`).
        Returns the files written.
        """
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for role, entries in self._by_role.items():
            path = out / f"{role.replace('/', '_')}.jsonl"
            with path.open("w") as fh:
                for e in entries:
                    for line in _lines(role, e):
                        fh.write(json.dumps(line) + "\n")
            written.append(path)
        return written


def _lines(role: str, e: Received) -> Iterator[dict[str, Any]]:
    n = max(len(e.payloads), len(e.sizes or ()))
    # one payload for many messages: a single node sealed the part as one AEAD message (batching);
    # every logical message it carries was delivered as those bytes, so each line gets their digest
    batch = n if len(e.payloads) == 1 and n > 1 else 1
    digest = hashlib.sha256(payload_bytes(e.payloads[0])).hexdigest() if batch > 1 else None
    for k in range(n):
        payload = e.payloads[k] if k < len(e.payloads) else None
        if batch > 1:
            sha = digest
        else:
            sha = None if payload is None else hashlib.sha256(payload_bytes(payload)).hexdigest()
        yield {
            "phase": e.phase,
            "step": e.step,
            "sender": e.sender if e.senders is None else f"{e.sender}:{e.senders[k]}",
            "receiver": role if e.receivers is None else f"{role}:{e.receivers[k]}",
            "kind": e.kind,
            "protection": e.protection or ("sealed" if e.protected else "plain"),
            "protected": e.protected,
            "size": None if e.sizes is None else int(e.sizes[k]),
            "sha256": sha,
            "batch": batch,
        }


def payload_bytes(payload: Any) -> bytes:
    """The bytes of a delivered payload object (ciphertexts as they are; arrays and tensors raw)."""
    if isinstance(payload, bytes | bytearray | memoryview):
        return bytes(payload)
    if isinstance(payload, list | tuple):
        return b"".join(payload_bytes(p) for p in payload)
    if hasattr(payload, "detach"):  # a torch tensor
        return bytes(payload.detach().cpu().contiguous().numpy().tobytes())
    if hasattr(payload, "tobytes"):  # a numpy array
        return bytes(payload.tobytes())
    return repr(payload).encode()
