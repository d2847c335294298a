"""What a round carries: :class:`Part` (a batch of logical messages of one kind) and :class:`Message`.

A protocol's parties are *logical* clients (users) and the server; a node hosts a *shard* of clients
and answers for all of them at once. One request from the server to a node, or one reply, is a
:class:`Message`: named :class:`Part` objects, each a batch of logical messages of one phase and
kind between parties of two roles. A part says

* what it is (``kind``, for transcripts and audits) and how it is protected
  (:data:`~fedgraphrec.runtime.part.Protection`);
* who sends each logical message and who receives it (client ids; ``None`` for the server);
* its content, in one of three shapes:

  - **rows** — a 2-D tensor or array; logical message ``k`` is the block of ``counts[k]`` rows
    starting where message ``k - 1`` ended (one row each when ``counts`` is ``None``);
  - **broadcast** — one tensor or array that every listed receiver gets a copy of; with
    ``counts``, a shared table of which receiver ``k`` reads its ``counts[k]`` rows (booked as a
    ``(counts[k], width)`` matrix: a node hosting many clients receives the table once);
  - **blobs** — a list of byte strings, one per logical message (tokens, ciphertexts of other
    sub-protocols).

A rows part may be a *view*: with ``index`` set, its rows are ``value[index]`` (what the server
forwards is a selection of what it received; :meth:`Part.forward` selects without copying, and a
receiving node that knows the selection can compute on ``value`` directly; :meth:`Part.rows` copies).

The transport (:mod:`fedgraphrec.runtime.transport`) turns every part into ledger and transcript
entries with exactly the bytes the wire format of :mod:`~fedgraphrec.runtime.codec` (plus the AEAD
overhead for sealed parts) would have, and seals and opens ``sealed`` parts: the sending node seals
each logical message under the clients' group key, bound to protocol, phase, step, sender and
receiver; the server only ever holds the ciphertexts (:attr:`Part.sealed`); the receiving node opens
them with the binding it expects. Protocol code builds parts and reads their values; it never
handles a cipher, an associated-data string or the ledger.

Where the parts live: :class:`Part` (and :data:`Shape`) in :mod:`~fedgraphrec.runtime.part`, the
row-block arithmetic (:func:`block_bounds`, :func:`gather_blocks`) in
:mod:`~fedgraphrec.runtime.blocks`; this module keeps :class:`Message` and re-exports the others,
so ``fedgraphrec.runtime.message`` still names everything a round carries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fedgraphrec.runtime.part import Part

__all__ = ["Message"]


@dataclass
class Message:
    """One request (server → node) or reply (node → server): named parts and public fields.

    Attributes:
        parts: the parts, by name (names are the protocol's; ``roles.py`` of each protocol lists them).
        fields: small public fields (ints, floats, strings, lists of those) that are not messages of
            a client: e.g. the clients a node hosts, or a stage's parameters.
    """

    parts: dict[str, Part] = field(default_factory=dict)
    fields: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Part:
        try:
            return self.parts[name]
        except KeyError:
            raise KeyError(f"the message has no part {name!r} (parts: {sorted(self.parts)})") from None

    def __contains__(self, name: str) -> bool:
        return name in self.parts

    def get(self, name: str) -> Part | None:
        """The part named ``name``, or ``None`` when the message has none."""
        return self.parts.get(name)

    def add(self, name: str, part: Part) -> Message:
        """Add ``part`` under ``name`` (returns ``self`` for chaining)."""
        if name in self.parts:
            raise ValueError(f"the message already has a part {name!r}")
        self.parts[name] = part
        return self

    @staticmethod
    def merge(messages: Sequence[Message] | Mapping[Any, Message], name: str) -> list[Part]:
        """The parts named ``name`` of several messages (those that have one)."""
        items = messages.values() if isinstance(messages, Mapping) else messages
        return [m.parts[name] for m in items if name in m.parts]
