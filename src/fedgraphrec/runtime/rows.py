"""Row messages: each party sends one tensor row under S; the server routes copies to receivers.

Both lossless horizontal protocols move per-user rows this way (LP-GCN: users → their
convolution-clients; GNN4FR: users → their neighbours, and per-pair gradient rows). The helpers
here encode a batch of rows into the codec's one-row payloads without a per-row tensor round trip,
decode them back with the header checked, and run the two-hop relay through the
:class:`~fedgraphrec.runtime.network.Network`, which seals, binds, counts and records every message.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from fedgraphrec.runtime.codec import CodecError, encoded_size, tensor_header
from fedgraphrec.runtime.network import Network
from fedgraphrec.runtime.sealing import multicast, party, party_names

__all__ = ["decode_rows", "encode_rows", "relay_rows"]


def encode_rows(rows: torch.Tensor) -> list[bytes]:
    """``encode_tensor(rows[k:k+1])`` for every k, built from one buffer (the same bytes)."""
    header = tensor_header((1, int(rows.shape[1])), rows.dtype)
    flat = rows.detach().contiguous().numpy().tobytes()
    k = len(flat) // max(int(rows.shape[0]), 1)
    return [header + flat[i * k : (i + 1) * k] for i in range(int(rows.shape[0]))]


def decode_rows(payloads: Sequence[bytes], dim: int, dtype: torch.dtype) -> torch.Tensor:
    """Inverse of :func:`encode_rows`; raises :class:`CodecError` if any payload is not one such row."""
    header = tensor_header((1, dim), dtype)
    size = encoded_size((1, dim), dtype)
    buf = b"".join(payloads)
    if len(buf) != size * len(payloads):
        raise CodecError(f"received payloads are not {len(payloads)} rows of {dim} {dtype} values")
    framed = np.frombuffer(buf, dtype=np.uint8).reshape(len(payloads), size)
    if not (framed[:, : len(header)] == np.frombuffer(header, dtype=np.uint8)).all():
        raise CodecError(f"a received payload is not one row of {dim} {dtype} values")
    body = bytearray(framed[:, len(header) :].tobytes())
    return torch.frombuffer(body, dtype=dtype).reshape(len(payloads), dim)


def relay_rows(
    net: Network,
    phase: str,
    rows: torch.Tensor,
    route: tuple[np.ndarray, np.ndarray],
    *,
    sender_role: str,
    receiver_role: str,
    kind: str,
    row_ciphertext_bytes: int,
    senders: np.ndarray | None = None,
    unicast: bool = False,
    bound_senders: Sequence[str] | None = None,
) -> torch.Tensor | None:
    """Every row k goes up sealed once; the server forwards copies along ``route``.

    Row k is sealed by its sender for the receivers (bound to protocol, phase, step, sender and
    receiver: :mod:`~fedgraphrec.runtime.sealing`). A multicast row (the default: one row, many
    receivers, e.g. a user's embedding to all its neighbours) is bound to the receiver role's
    multicast name and each receiver checks the sender the route says it should come from; a
    ``unicast`` row (``route = (arange(n), receiver)``) is bound to its one receiver.

    Args:
        net: the runtime (ledger, transcripts, sealing).
        phase: ledger phase.
        rows: one row per sending party (row k is party ``senders[k]``'s).
        route: ``(source_row, receiver)`` per forwarded copy.
        sender_role: role of the parties sending rows.
        receiver_role: role of the parties receiving copies.
        kind: transcript label of the rows.
        row_ciphertext_bytes: bytes of one encrypted row (exactly what ``real`` mode produces).
        senders: the party id of each row (default: row k is party k's).
        unicast: each row has exactly one receiver, bound into its associated data.
        bound_senders: the sender name bound into each row's associated data, when the receivers
            know the row by what it is rather than by who sent it (default: ``sender_role:id``).

    Returns:
        In ``real`` mode the rows as opened by the receivers, one per route entry; ``None`` in
        ``accounted`` mode (the receivers would open exactly ``rows[source_row]``).

    Raises:
        IntegrityError: a copy was tampered, replayed, re-routed or dropped on the way.
    """
    source, receiver = route
    n = int(rows.shape[0])
    ids = np.arange(n) if senders is None else np.asarray(senders)
    sender_names = (
        list(bound_senders) if bound_senders is not None else party_names(sender_role, ids.tolist())
    )
    if unicast:
        if len(source) != n or not np.array_equal(source, np.arange(n)):
            raise ValueError(f"{phase}: a unicast relay sends row k to exactly one receiver")
        bound_to = party_names(receiver_role, np.asarray(receiver).tolist())
    else:
        bound_to = [multicast(receiver_role)] * n
    blobs = net.seal(phase, encode_rows(rows), sender_names, bound_to) if net.real else None
    up = net.transmit(
        phase,
        sender_role,
        "server",
        row_ciphertext_bytes,
        count=n,
        kind=kind,
        protection="sealed",
        payloads=blobs,
        senders=ids,
    )
    forwarded = None if up is None else [up[k] for k in source]
    got = net.transmit(
        phase,
        "server",
        receiver_role,
        row_ciphertext_bytes,
        count=len(source),
        kind=kind,
        protection="sealed",
        payloads=forwarded,
        receivers=receiver,
    )
    if not net.real or got is None:
        return None
    return _open_copies(
        net,
        phase,
        got,
        source,
        sender_names,
        bound_to,
        receiver_role,
        receiver,
        int(rows.shape[1]),
        rows.dtype,
    )


def _open_copies(
    net: Network,
    phase: str,
    got: Sequence[bytes | None],
    source: np.ndarray,
    sender_names: Sequence[str],
    bound_to: Sequence[str],
    receiver_role: str,
    receiver: np.ndarray,
    dim: int,
    dtype: torch.dtype,
) -> torch.Tensor:
    """Authenticate and decrypt every received copy; byte-identical copies share one decryption.

    AES-GCM decryption is a deterministic function of (key, ciphertext bytes, associated data), so
    receivers in one shard that got byte-identical copies of a sender's row share one verified
    opening: the shard opens each distinct ``(source, ciphertext)`` once. A copy the server
    altered, replayed or re-routed differs in its bytes or in the binding its receiver expects and
    is authenticated on its own (and rejected).
    """
    slot: dict[tuple[int, bytes | None], int] = {}
    unique: list[bytes | None] = []
    expect_from: list[str] = []
    expect_to: list[str] = []
    names: list[str] = []
    index = np.empty(len(got), dtype=np.int64)
    recv = np.asarray(receiver).tolist()
    for j, (k, blob) in enumerate(zip(source.tolist(), got, strict=True)):
        at = slot.get((k, blob))
        if at is None:
            at = slot[(k, blob)] = len(unique)
            unique.append(blob)
            expect_from.append(sender_names[k])
            expect_to.append(bound_to[k])
            names.append(party(receiver_role, recv[j]))
        index[j] = at
    opened = decode_rows(net.open(phase, unique, expect_from, expect_to, delivered_to=names), dim, dtype)
    return opened[torch.from_numpy(index)]
