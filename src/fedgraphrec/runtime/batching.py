"""One AEAD message per sealed part when every message of it stays within one node.

With a single node (the in-process engine hosting the whole population as one shard), every
sealed message a client sends goes to the server and comes back to the same node. Sealing each
logical message separately then costs one ``AESGCM.encrypt`` and one ``decrypt`` call per message
(a few microseconds each, most of it call overhead), far above the AEAD's throughput on the bytes.
A :class:`~fedgraphrec.runtime.endpoint.NodeEndpoint` created with ``batch=True`` instead seals
the whole part as **one** message: the plaintext is a header naming every logical message's sender,
sealed receiver and row count, followed by the content (one codec tensor, or length-prefixed
blobs); the associated data binds protocol, phase and step (:class:`~.sealing.Binding`) and the
roles. The server forwards the one ciphertext with the positions of the messages it routes to each
receiver (:attr:`Part.index <fedgraphrec.runtime.part.Part.index>`); the node opens it once and
checks that every delivered message's sender and receiver are the ones sealed inside — a message
relabelled, re-routed or taken from another step fails, a flipped byte fails authentication, a
dropped ciphertext never arrives. The ledger still books every logical message at the size it has
when sealed alone (what a deployment with one device per client sends), so both ``real`` and
``accounted`` ledgers, and batched and per-message ones, agree.

Only for a single node: with several nodes a batch would hand every receiving node the messages
routed to the others, so multi-node transports seal each logical message (the default).
"""

from __future__ import annotations

import struct
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.runtime.blobs import blob_lengths, joined_blobs
from fedgraphrec.runtime.blocks import selected_rows
from fedgraphrec.runtime.codec import decode_tensor, tensor_buffers
from fedgraphrec.runtime.part import Part
from fedgraphrec.runtime.sealing import Binding, GroupChannel

__all__ = ["open_batch", "seal_batch"]

_HEAD = struct.Struct("<IBBH")  # messages, has seal_to, has counts, padding before the rows
_ALIGN = 64
"""The rows' offset in a batch's plaintext is a multiple of this (after zero padding), so the table
opened in place starts where the allocator aligns the plaintext (16 bytes or more): PyTorch's
vectorised kernels (a CSR product) read a float table 4, 8 or 12 bytes off 16 about 13-16 % slower."""


def _aad(binding: Binding, part: Part) -> bytes:
    roles = f"batch|{part.origin_role}|{part.seal_to_role or part.receiver_role}".encode()
    return binding.prefix() + roles


def seal_batch(channel: GroupChannel, binding: Binding, part: Part) -> Part:
    """The part in transit: one ciphertext, every logical message's ledger size kept."""
    n = part.n_messages
    if part.senders is None:
        raise ValueError(f"{part.phase}: a sealed part must name its senders")
    flags = (part.seal_to is not None, part.counts is not None)
    arrays = [part.senders] + [a for a in (part.seal_to, part.counts) if a is not None]
    meta = b"".join(np.ascontiguousarray(a, dtype="<i8").tobytes() for a in arrays)
    if part.shape == "blobs":
        body = blob_lengths(part.value).astype("<i8").tobytes() + joined_blobs(part.value)
        plain = _HEAD.pack(n, *flags, 0) + meta + body
    else:
        value = part.rows()
        tensor = value if isinstance(value, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(value))
        header, data = tensor_buffers(tensor)
        pad = -(_HEAD.size + len(meta) + len(header)) % _ALIGN
        plain = b"".join([_HEAD.pack(n, *flags, pad), meta, bytes(pad), header, data])  # rows copied once
    sizes = part.sizes()
    blob = channel.seal_into(binding, plain, _aad(binding, part))
    return replace(part, value=None, index=None, sealed=[blob], batched=True, _sizes=sizes)


def open_batch(
    channel: GroupChannel,
    binding: Binding,
    part: Part,
    receiver_names: str,
    memo: dict[Any, Any] | None = None,
) -> Part:
    """The delivered messages of a batched part, checked against what was sealed (module docstring).

    ``memo`` (the receiving endpoint's, optional) remembers the last batch header that passed the
    checks for each phase and receiver, with the read-only id arrays it was checked against: a
    static route relayed every step carries the same header and the very same arrays, so the
    checks' outcome is known from a byte comparison and three identity tests; any other header
    or array is checked in full. A batch delivered whole and in order (one node's relay) opens
    to the decrypted table itself; any other selection to a view of its messages' rows.

    Raises:
        IntegrityError: the ciphertext is missing or altered, or a delivered message's sender or
            receiver differs from the one sealed.
    """
    blob = part.sealed[0] if part.sealed else None
    who = f"{binding.protocol} {binding.phase} (step {binding.step}): the batch to {receiver_names}"
    if blob is None:
        raise IntegrityError(f"{who} never arrived (dropped); the receiver rejected it")
    aad = _aad(binding, part)
    plain: bytes | bytearray
    if part.shape == "blobs":
        plain = channel.open(binding, [blob], [aad], ["batch"], [receiver_names])[0]
    else:  # the rows tensor keeps the decrypted buffer as its memory
        plain = channel.open_writable(binding, blob, aad, "batch", receiver_names)
    n, has_to, has_counts, pad = _HEAD.unpack_from(plain)
    at = _HEAD.size + 8 * n * (1 + bool(has_to) + bool(has_counts))
    if pad >= _ALIGN or at + pad > len(plain):
        raise IntegrityError(f"{who}: a malformed batch header; the receiver rejected it")
    head = bytes(memoryview(plain)[: min(at, len(plain))])  # bytes: a memoryview compares byte by byte
    slot = (binding.phase, part.origin_role, receiver_names)
    seen = None if memo is None else memo.get(slot)
    if seen is not None and _same_check(seen, head, part):
        counts = seen[4]
    else:
        counts = _check_header(plain, n, has_to, has_counts, part, who)
        if memo is not None and _read_only(part.senders, part.index, part.receivers):
            memo[slot] = (head, part.senders, part.index, part.receivers, counts)
    pick = np.arange(n, dtype=np.int64) if part.index is None else part.index
    if part.shape == "blobs":
        body = plain[at:]
        lengths = np.frombuffer(body, dtype="<i8", count=n)
        ends = np.cumsum(lengths) + 8 * n
        starts = ends - lengths
        blobs = [body[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
        return replace(part, value=[blobs[k] for k in pick.tolist()], sealed=None, index=None, batched=False)
    table = decode_tensor(memoryview(plain)[at + pad :], copy=False)
    rows = selected_rows(counts, int(table.shape[0]), pick)  # None: every message as sealed
    return replace(part, value=table, index=rows, sealed=None, batched=False)


def _check_header(
    plain: bytes | bytearray, n: int, has_to: int, has_counts: int, part: Part, who: str
) -> np.ndarray | None:
    """Check every delivered message's sender and receiver against the sealed header; its counts."""
    at = _HEAD.size
    senders = np.frombuffer(plain, dtype="<i8", count=n, offset=at).astype(np.int64)
    at += 8 * n
    seal_to = counts = None
    if has_to:
        seal_to = np.frombuffer(plain, dtype="<i8", count=n, offset=at).astype(np.int64)
        at += 8 * n
    if has_counts:
        counts = np.frombuffer(plain, dtype="<i8", count=n, offset=at).astype(np.int64)
        at += 8 * n
    pick = np.arange(n, dtype=np.int64) if part.index is None else part.index
    if len(pick) and (pick.min() < 0 or pick.max() >= n):
        raise IntegrityError(f"{who} names messages the batch does not hold; the receiver rejected it")
    if part.senders is None or not np.array_equal(part.senders, senders[pick]):
        raise IntegrityError(f"{who}: a message is labelled with another sender; the receiver rejected it")
    if seal_to is not None and (part.receivers is None or not np.array_equal(part.receivers, seal_to[pick])):
        raise IntegrityError(f"{who}: a message was re-routed to another receiver; the receiver rejected it")
    return counts


def _read_only(*arrays: np.ndarray | None) -> bool:
    """Whether every array is absent or read-only (so an identity test stands for its content)."""
    return all(a is None or not a.flags.writeable for a in arrays)


def _same_check(seen: tuple[Any, ...], head: bytes, part: Part) -> bool:
    """Whether this batch's header and delivered ids are those of a batch that passed the checks."""
    header, senders, index, receivers, _ = seen
    return (
        part.senders is senders
        and part.index is index
        and part.receivers is receivers
        and _read_only(senders, index, receivers)
        and head == header
    )
