"""Row messages: each party sends one tensor row under S; the server routes copies to receivers.

Both lossless horizontal protocols move per-user rows this way (LP-GCN: users → their
convolution-clients; GNN4FR: users → their neighbours, and per-pair gradient rows). The helpers
here encode a batch of rows into the codec's one-row payloads without a per-row tensor round trip,
decode them back with the header checked, and run the two-hop relay through the
:class:`~fedgraphrec.runtime.network.Network` so the ledger and transcripts see every message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import torch

from fedgraphrec.runtime.codec import CodecError, encoded_size, tensor_header
from fedgraphrec.runtime.network import Network

__all__ = ["RowCipher", "decode_rows", "encode_rows", "relay_rows"]


class RowCipher(Protocol):
    """What :func:`relay_rows` needs from an AEAD (``fedgraphrec.crypto.PayloadCipher``)."""

    def encrypt_many(self, plaintexts: Sequence[bytes], aads: Sequence[bytes] | None = None) -> list[bytes]:
        """Encrypt each payload with its associated data."""
        ...

    def decrypt_many(self, blobs: Sequence[bytes], aads: Sequence[bytes] | None = None) -> list[bytes]:
        """Authenticate and decrypt each ciphertext."""
        ...


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
    cipher: RowCipher | None,
    phase: str,
    rows: torch.Tensor,
    route: tuple[np.ndarray, np.ndarray],
    *,
    sender_role: str,
    receiver_role: str,
    kind: str,
    aad_ids: Sequence[bytes],
    row_ciphertext_bytes: int,
    senders: np.ndarray | None = None,
) -> torch.Tensor | None:
    """Every row k goes up under S once; the server forwards copies along ``route``.

    Args:
        net: the runtime (ledger, transcripts).
        cipher: the AEAD under S, or ``None`` in ``accounted`` mode.
        phase: ledger phase.
        rows: one row per sending party (row k is party k's).
        route: ``(source_row, receiver)`` per forwarded copy.
        sender_role: role of the parties sending rows.
        receiver_role: role of the parties receiving copies.
        kind: transcript label of the rows.
        aad_ids: per row, the sender id bound into the associated data (so no row can be swapped).
        row_ciphertext_bytes: bytes of one encrypted row (exactly what ``real`` mode produces).
        senders: the party id of each row (default: row k is party k's).

    Returns:
        In ``real`` mode the rows as decrypted by the receivers, one per route entry; ``None`` in
        ``accounted`` mode (the receivers would decrypt exactly ``rows[source_row]``).
    """
    source, receiver = route
    n = int(rows.shape[0])
    prefix = phase.encode() + b"|"
    blobs = None
    if cipher is not None:
        blobs = cipher.encrypt_many(encode_rows(rows), [prefix + aad_ids[k] for k in range(n)])
    up = net.transmit(
        phase,
        sender_role,
        "server",
        row_ciphertext_bytes,
        count=n,
        kind=kind,
        protected=True,
        payloads=blobs,
        senders=np.arange(n) if senders is None else senders,
    )
    forwarded = None if up is None else [up[k] for k in source]
    got = net.transmit(
        phase,
        "server",
        receiver_role,
        row_ciphertext_bytes,
        count=len(source),
        kind=kind,
        protected=True,
        payloads=forwarded,
        receivers=receiver,
    )
    if cipher is None or got is None:
        return None
    return _open_copies(cipher, got, source, prefix, aad_ids, int(rows.shape[1]), rows.dtype)


def _open_copies(
    cipher: RowCipher,
    got: Sequence[bytes],
    source: np.ndarray,
    prefix: bytes,
    aad_ids: Sequence[bytes],
    dim: int,
    dtype: torch.dtype,
) -> torch.Tensor:
    """Authenticate and decrypt every received copy; byte-identical copies share one decryption.

    AES-GCM decryption is a deterministic function of (key, ciphertext bytes, associated data), so
    receivers in one shard that got byte-identical copies of a sender's row share one verified
    opening: the shard decrypts each distinct ``(source, ciphertext)`` once. A copy the server
    altered differs in its bytes and is authenticated on its own (and rejected).
    """
    slot: dict[tuple[int, bytes], int] = {}
    unique_blobs: list[bytes] = []
    unique_aads: list[bytes] = []
    index = np.empty(len(got), dtype=np.int64)
    for j, (k, blob) in enumerate(zip(source.tolist(), got, strict=True)):
        at = slot.get((k, blob))
        if at is None:
            at = slot[(k, blob)] = len(unique_blobs)
            unique_blobs.append(blob)
            unique_aads.append(prefix + aad_ids[k])
        index[j] = at
    opened = decode_rows(cipher.decrypt_many(unique_blobs, unique_aads), dim, dtype)
    return opened[torch.from_numpy(index)]
