"""Byte-string messages kept as one buffer: :class:`PackedBlobs`, and what every blobs reader needs.

A blobs :class:`~fedgraphrec.runtime.part.Part` carries one byte string per logical message (item
tokens, ciphertexts of another layer). A shard of clients that builds them from one table (LP-GCN's
negative requests: every client's tokens, back to back) would otherwise cut that table into one
Python ``bytes`` object per client, only for the ledger to measure each and the server to join them
again: on ML-100K that is ~940 objects a minibatch, 2-3 % of LP-GCN's minibatch (issue #33,
``benchmarks/lpgcn_ab.py``). :class:`PackedBlobs` is the same sequence of byte strings stored as
the buffer and its offsets; :func:`blob_lengths` and :func:`joined_blobs` read any sequence of
blobs, without a per-message step when it is packed. Everything that iterates or indexes blobs
sees ``bytes`` as before.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import pairwise
from typing import overload

import numpy as np

__all__ = ["PackedBlobs", "blob_lengths", "joined_blobs"]


class PackedBlobs(Sequence[bytes]):
    """Byte strings ``buffer[bounds[k]:bounds[k + 1]]``, ``k = 0 .. len(bounds) - 2``.

    Args:
        buffer: every message's bytes, back to back.
        bounds: offsets into ``buffer``: starting at 0, non-decreasing, ending at ``len(buffer)``
            (one more than the messages). Kept as a read-only int64 copy.

    Raises:
        ValueError: if ``bounds`` does not cut ``buffer`` into consecutive pieces.
    """

    __slots__ = ("_bounds", "_buffer")

    def __init__(self, buffer: bytes, bounds: np.ndarray) -> None:
        b = np.array(bounds, dtype=np.int64).reshape(-1)
        if len(b) == 0 or b[0] != 0 or b[-1] != len(buffer) or (np.diff(b) < 0).any():
            raise ValueError(
                f"blob bounds must rise from 0 to the buffer's {len(buffer)} bytes, one more than the blobs"
            )
        b.flags.writeable = False
        self._buffer = bytes(buffer)  # a bytes object is kept as it is, anything else copied once
        self._bounds = b

    @property
    def buffer(self) -> bytes:
        """Every message's bytes, back to back."""
        return self._buffer

    def lengths(self) -> np.ndarray:
        """Bytes of every message (int64)."""
        return np.diff(self._bounds)

    def __len__(self) -> int:
        return len(self._bounds) - 1

    @overload
    def __getitem__(self, k: int) -> bytes: ...

    @overload
    def __getitem__(self, k: slice) -> list[bytes]: ...

    def __getitem__(self, k: int | slice) -> bytes | list[bytes]:
        if isinstance(k, slice):
            return [self[j] for j in range(len(self))[k]]
        n = len(self)
        j = int(k) + n if int(k) < 0 else int(k)
        if not 0 <= j < n:
            raise IndexError(f"blob {k} of {n}")
        return self._buffer[int(self._bounds[j]) : int(self._bounds[j + 1])]

    def __iter__(self) -> Iterator[bytes]:
        buf = self._buffer
        for a, b in pairwise(self._bounds.tolist()):
            yield buf[a:b]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PackedBlobs):
            return self._buffer == other._buffer and np.array_equal(self._bounds, other._bounds)
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PackedBlobs({len(self)} blobs, {len(self._buffer)} bytes)"


def blob_lengths(blobs: Sequence[bytes]) -> np.ndarray:
    """Bytes of every message of a blobs value (int64; no per-message step when packed)."""
    if isinstance(blobs, PackedBlobs):
        return blobs.lengths()
    return np.fromiter(map(len, blobs), dtype=np.int64, count=len(blobs))


def joined_blobs(blobs: Sequence[bytes]) -> bytes:
    """Every message's bytes, back to back (``b"".join``; the buffer itself when packed)."""
    if isinstance(blobs, PackedBlobs):
        return blobs.buffer
    return b"".join(bytes(b) for b in blobs)
