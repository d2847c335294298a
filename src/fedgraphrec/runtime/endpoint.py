"""The node side of every transport: :class:`NodeEndpoint`, which opens and seals a node's messages.

A node hosts a shard of clients (a :class:`Node`: their client program and, once agreed, their
group key). Whatever engine carries the rounds, in-process
(:class:`~fedgraphrec.runtime.local.LocalTransport`) or Flower (:mod:`fedgraphrec.runtime.flower`),
each request reaches the node's program through the same :class:`NodeEndpoint`, which in ``real``
crypto mode opens the sealed parts with the binding the node expects and seals its reply's, so a
client program cannot tell which engine runs it. :func:`require_senders` is the check a node's
program makes on top: that delivered messages come from the senders its routing expects. The server
side of a round is :class:`~fedgraphrec.runtime.transport.Transport`, whose module re-exports these
names for existing callers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

import numpy as np
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.runtime.batching import open_batch, seal_batch
from fedgraphrec.runtime.blocks import block_bounds, gather_blocks
from fedgraphrec.runtime.codec import decode_tensor, encode_rows, encode_tensor
from fedgraphrec.runtime.expect import Expectation, FlowState, StageFlow, check_content, check_parts
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.network import CryptoMode
from fedgraphrec.runtime.part import Part
from fedgraphrec.runtime.sealing import Binding, GroupChannel, KeyUsage, multicast, party, party_names

__all__ = ["Node", "NodeEndpoint", "require_senders"]


class Node(Protocol):
    """A client program hosting a shard of clients, as the transport sees it."""

    def handle(self, stage: str, step: int, request: Message) -> Message:
        """Answer one request of ``stage`` at protocol step ``step``."""
        ...

    def group_key(self) -> SharedKey | None:
        """The clients' shared key, once agreed (``None`` before, or in ``accounted`` mode)."""
        ...

    def stage_flow(self) -> StageFlow | None:
        """The order of the program's stages (:class:`~fedgraphrec.runtime.expect.StageFlow`)."""
        ...

    def begin_stage(self, stage: str, occurrence: int) -> Expectation | None:
        """What the program expects to receive in ``stage``, run ``occurrence`` times before this step."""
        ...


class NodeEndpoint:
    """The node side of every transport: opens what the node's clients receive, seals what they send.

    Args:
        protocol: protocol name bound into every sealed message.
        crypto: ``real`` (seal and open for real) or ``accounted`` (pass values through).
        charge: called with ``(client ids, seconds)`` for the sealing/opening time of each part.
        batch: seal each part as one message (only when this node is the only one:
            :mod:`fedgraphrec.runtime.batching`).
        usage: the run's count of messages this node sealed per step key (a fresh one by default;
            an engine that rebuilds the endpoint per message passes the one it persists).
    """

    def __init__(
        self,
        protocol: str,
        crypto: CryptoMode,
        charge: Callable[[np.ndarray, float], None] | None = None,
        batch: bool = False,
        usage: KeyUsage | None = None,
    ) -> None:
        self.usage = KeyUsage() if usage is None else usage  # per-key message limit, for the run
        self.protocol = protocol
        self.real = crypto == "real"
        self.batch = batch
        self.aead_bytes = 0
        """Bytes this endpoint sealed and opened (the AEAD's work, for cost floors)."""
        self.aead_calls = 0
        """AEAD operations (seals and opens) behind :attr:`aead_bytes`: their mean size."""
        self.charge = charge
        self._channel: tuple[bytes, GroupChannel] | None = None
        self._checked: dict[object, object] = {}
        """Batch headers that passed the checks, per phase and receiver (:func:`.batching.open_batch`)."""
        self.flow = FlowState()
        """Where the node is in its program's stage order (the whole run's; restored on Flower)."""

    def _channel_for(self, node: Node, phase: str) -> GroupChannel:
        key = node.group_key()
        if key is None:
            raise RuntimeError(f"{phase}: real crypto mode but this node has no group key yet")
        raw = key.to_bytes()
        if self._channel is None or self._channel[0] != raw:
            self._channel = (raw, GroupChannel(key, self.protocol, usage=self.usage))
        return self._channel[1]

    def handle(self, node: Node, stage: str, step: int, request: Message) -> Message:
        """Check the request against the node's own expectation, open it, run the program, seal the reply.

        The stage must be the legal next one of the program's :class:`StageFlow` (in order, once
        per step or as often as declared, never from an earlier step), every part must be
        one the program expects in this stage with the phase, protection and roles it expects, and
        sealed parts are opened with the *expected* phase bound in their associated data: labels
        from the wire are never trusted.

        Raises:
            IntegrityError: a stage out of order or repeated, a step that went back, a part that is
                not the one expected (relabelled, downgraded, missing, extra), or a sealed message
                that is missing, tampered, replayed or re-routed.
        """
        rules = node.stage_flow()
        if rules is None:
            raise IntegrityError(f"{self.protocol}: the node's program declares no stage order")
        occurrence = self.flow.advance(self.protocol, rules, stage, step)
        expected = node.begin_stage(stage, occurrence)
        if expected is None:
            raise IntegrityError(f"{self.protocol} stage {stage!r}: the program declares no expectation")
        check_parts(self.protocol, stage, expected, request.parts)
        inbox = Message({}, request.fields)
        for name, part in request.parts.items():
            exp = expected[name]
            opened = self._open(node, part, step, exp.phase)
            check_content(self.protocol, stage, name, exp, opened)
            inbox.parts[name] = opened
        reply = node.handle(stage, step, inbox)
        if self.real:
            reply = Message(
                {name: self._seal(node, part, step) for name, part in reply.parts.items()}, reply.fields
            )
        return reply

    # ------------------------------------------------------------------ sealing
    def _seal(self, node: Node, part: Part, step: int) -> Part:
        if part.protection != "sealed" or part.presealed:  # a sub-protocol's own ciphertexts
            return part
        if part.value is None:
            raise ValueError(f"{part.phase}: a sealed part without content cannot be sealed")
        channel = self._channel_for(node, part.phase)
        binding = Binding(self.protocol, part.phase, step)
        if self.batch:
            t0 = time.perf_counter()
            batched = seal_batch(channel, binding, part)
            self.aead_bytes += sum(len(b) for b in batched.sealed or [] if b is not None)
            self.aead_calls += 1
            self._charge(part.senders, time.perf_counter() - t0)
            return batched
        senders = _sender_names(part)
        role = part.seal_to_role or part.receiver_role
        to = (
            [multicast(role)] * part.n_messages
            if part.seal_to is None
            else party_names(role, part.seal_to.tolist())
        )
        t0 = time.perf_counter()
        blobs = channel.seal(binding, _encode_blocks(part), binding.aads(senders, to))
        self.aead_bytes += sum(len(b) for b in blobs)
        self.aead_calls += len(blobs)
        self._charge(part.senders, time.perf_counter() - t0)
        sizes = part.sizes()
        return replace(part, value=None, sealed=list(blobs), _sizes=sizes)

    def _open(self, node: Node, part: Part, step: int, phase: str) -> Part:
        """``part`` opened with ``phase`` (the node's expectation, not the label) bound in its AD."""
        if part.protection != "sealed" or part.presealed or not self.real:
            return part
        if part.sealed is None:
            raise IntegrityError(f"{phase}: a sealed part arrived without its ciphertexts")
        channel = self._channel_for(node, phase)
        binding = Binding(self.protocol, phase, step)
        if part.batched:
            t0 = time.perf_counter()
            delivered = open_batch(
                channel, binding, part, f"{part.receiver_role} on this node", self._checked
            )
            self.aead_bytes += sum(len(b) for b in part.sealed or [] if b is not None)
            self.aead_calls += 1
            self._charge(part.receivers, time.perf_counter() - t0)
            return delivered
        if part.receivers is None:
            raise ValueError(f"{part.phase}: a sealed part delivered to a node must name its receivers")
        if part.seal_to is None:
            # byte-identical copies of one sender's message share one verified opening (AES-GCM
            # decryption is a function of key, bytes and associated data); altered copies differ
            unique, exp_from, exp_to, names, index = _multicast_groups(part)
        else:
            exp_from = _sender_names(part)
            names = party_names(part.receiver_role, part.receivers.tolist())
            unique, exp_to = list(part.sealed), names
            index = np.arange(len(unique), dtype=np.int64)
        t0 = time.perf_counter()
        opened = channel.open(binding, unique, binding.aads(exp_from, exp_to), exp_from, names)
        self.aead_bytes += sum(len(b) for b in opened)
        self.aead_calls += len(opened)
        self._charge(part.receivers, time.perf_counter() - t0)
        return _decode_blocks(part, opened, index)

    def _charge(self, ids: np.ndarray | None, seconds: float) -> None:
        if self.charge is not None and ids is not None:
            self.charge(ids, seconds)


def _multicast_groups(
    part: Part,
) -> tuple[list[bytes | bytearray | None], list[str], list[str], list[str], np.ndarray]:
    """The distinct (sender, ciphertext) copies of a multicast part, and each copy's distinct copy.

    Copies are grouped by object identity and sender first (the same bytes object is the same
    bytes; no hashing of every copy, no name per copy), then the groups by content, so a copy the
    server altered is opened, and rejected, on its own.
    """
    sealed = part.sealed or []
    assert part.receivers is not None
    ids = np.fromiter(map(id, sealed), dtype=np.int64, count=len(sealed))
    if part.bound_senders is not None:
        codes = np.fromiter(
            map(id, part.bound_senders), dtype=np.int64, count=len(ids)
        )  # same object, same name
    elif part.senders is not None:
        codes = part.senders
    else:
        raise ValueError(f"{part.phase}: a sealed part must name its senders")
    order = np.lexsort((codes, ids))
    new = np.ones(len(order), dtype=bool)
    new[1:] = (ids[order][1:] != ids[order][:-1]) | (codes[order][1:] != codes[order][:-1])
    first = order[new]
    group = np.empty(len(order), dtype=np.int64)
    group[order] = np.cumsum(new) - 1
    role = part.origin_role
    slot: dict[tuple[str, bytes | None], int] = {}
    unique: list[bytes | bytearray | None] = []
    exp_from: list[str] = []
    names: list[str] = []
    of_group = np.empty(len(first), dtype=np.int64)
    ids_of = part.senders if part.senders is not None else np.zeros(len(sealed), dtype=np.int64)
    for g, j in enumerate(first.tolist()):
        sender = part.bound_senders[j] if part.bound_senders is not None else party(role, int(ids_of[j]))
        blob = sealed[j]
        key = (sender, bytes(blob) if isinstance(blob, bytearray) else blob)  # a batch's blob is a bytearray
        at = slot.get(key)
        if at is None:
            at = slot[key] = len(unique)
            unique.append(sealed[j])
            exp_from.append(sender)
            names.append(party(part.receiver_role, int(part.receivers[j])))
        of_group[g] = at
    bound_to = [multicast(part.receiver_role)] * len(unique)
    return unique, exp_from, bound_to, names, of_group[group]


def _sender_names(part: Part) -> list[str]:
    if part.bound_senders is not None:
        return list(part.bound_senders)
    if part.senders is None:
        raise ValueError(f"{part.phase}: a sealed part must name its senders")
    return party_names(part.origin_role, part.senders.tolist())


def _encode_blocks(part: Part) -> list[bytes]:
    """The plaintext of every logical message: the codec encoding of its block of rows."""
    if part.shape == "blobs":
        return [bytes(b) for b in part.value]
    value = part.rows()
    tensor = value if isinstance(value, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(value))
    tensor = tensor.detach().contiguous()
    if part.counts is None and tensor.dim() == 2:  # one row each: one buffer, no per-row tensors
        return encode_rows(tensor)
    bounds = block_bounds(part.counts, int(tensor.shape[0]))
    ends = zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)
    return [encode_tensor(tensor[a:b]) for a, b in ends]


def _decode_blocks(part: Part, opened: list[bytes], index: np.ndarray) -> Part:
    """The delivered part: the distinct openings, and which of them each message is (``index``).

    Rows come back as a view (:attr:`Part.index`) of the distinct openings' rows, so copies of one
    sender's message are decoded once and never duplicated.
    """
    if part.shape == "blobs":
        return replace(part, value=[opened[k] for k in index.tolist()], sealed=None)
    blocks = [decode_tensor(b) for b in opened]
    if not blocks:
        return replace(part, value=torch.zeros((0, 0)), sealed=None)
    table = torch.cat(blocks)
    lengths = np.fromiter((int(b.shape[0]) for b in blocks), dtype=np.int64, count=len(blocks))
    bounds = np.zeros(len(blocks) + 1, dtype=np.int64)
    np.cumsum(lengths, out=bounds[1:])
    rows = index if part.counts is None else gather_blocks(bounds, index)
    return replace(part, value=table, index=rows, sealed=None)


def require_senders(part: Part, expected: np.ndarray, what: str) -> None:
    """Check that a delivered part's messages come from ``expected`` (the routing the node knows).

    The server names each message's sender, and the associated data proves the name; a node must
    still check that the sender is one it expects, or a multicast copy could be re-routed to it.

    Raises:
        IntegrityError: naming the phase and the first unexpected sender.
    """
    got = np.asarray(part.senders if part.senders is not None else [], dtype=np.int64)
    exp = np.asarray(expected, dtype=np.int64)
    if got.shape != exp.shape or not np.array_equal(got, exp):
        bad = next((int(g) for g, e in zip(got.tolist(), exp.tolist(), strict=False) if g != e), None)
        raise IntegrityError(
            f"{part.phase}: {what}: expected messages from {len(exp)} known sender(s), got {len(got)}"
            + ("" if bad is None else f" (unexpected sender {part.sender_role}:{bad})")
        )
