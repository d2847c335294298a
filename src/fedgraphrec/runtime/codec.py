"""Tensor ↔ bytes codec used for every payload that crosses the runtime.

Wire format of one tensor (little-endian): ``dtype code (1 byte) | ndim (1 byte) | shape (ndim × u32)
| raw row-major data``. Byte counts in the ledger are those of this encoding (plus ciphertext
overhead where a payload is encrypted), so :func:`encoded_size` must equal ``len(encode_tensor(t))``.
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

__all__ = [
    "CodecError",
    "decode_rows",
    "decode_tensor",
    "dtype_of",
    "encode_rows",
    "encode_tensor",
    "encoded_size",
    "row_layout",
    "tensor_buffers",
    "tensor_header",
]

_CODES: dict[torch.dtype, int] = {
    torch.float32: 1,
    torch.float64: 2,
    torch.int64: 3,
    torch.int32: 4,
    torch.uint8: 5,
    torch.bool: 6,
}
_DTYPES = {v: k for k, v in _CODES.items()}
_ITEMSIZE = {dt: torch.empty((), dtype=dt).element_size() for dt in _CODES}
_NUMPY = {dt: torch.empty((), dtype=dt).numpy().dtype for dt in _CODES}


class CodecError(ValueError):
    """A byte string is not a valid encoded tensor."""


def encoded_size(shape: tuple[int, ...], dtype: torch.dtype) -> int:
    """Bytes that :func:`encode_tensor` produces for a tensor of ``shape`` and ``dtype``."""
    if dtype not in _ITEMSIZE:
        raise TypeError(f"unsupported dtype {dtype}; supported: {sorted(map(str, _CODES))}")
    return 2 + 4 * len(shape) + math.prod(shape) * _ITEMSIZE[dtype]


def tensor_header(shape: tuple[int, ...], dtype: torch.dtype) -> bytes:
    """The header :func:`encode_tensor` writes before the raw data of such a tensor."""
    if dtype not in _CODES:
        raise TypeError(f"unsupported dtype {dtype}; supported: {sorted(map(str, _CODES))}")
    return struct.pack(f"<BB{len(shape)}I", _CODES[dtype], len(shape), *shape)


def tensor_buffers(t: torch.Tensor) -> tuple[bytes, memoryview]:
    """:func:`encode_tensor`'s two pieces, header and data, without copying the data.

    ``b"".join([..., *tensor_buffers(t)])`` writes the encoding into a larger message with one copy.
    """
    if t.dtype not in _CODES:
        raise TypeError(f"unsupported dtype {t.dtype}; supported: {sorted(map(str, _CODES))}")
    if t.dim() > 255:
        raise ValueError("tensors with more than 255 dimensions are not supported")
    data = t.detach().contiguous().cpu().numpy()
    return tensor_header(tuple(t.shape), t.dtype), data.reshape(-1).view(np.uint8).data


def encode_tensor(t: torch.Tensor) -> bytes:
    """Serialise a dense CPU tensor (any supported dtype, up to 255 dims)."""
    return b"".join(tensor_buffers(t))


def decode_tensor(data: bytes | bytearray | memoryview, *, copy: bool = True) -> torch.Tensor:
    """Inverse of :func:`encode_tensor`; raises :class:`CodecError` on malformed input.

    ``copy=False`` (``data`` a writable buffer the caller gives up, e.g. a fresh decryption): the
    tensor shares ``data``'s memory instead of copying it.
    """
    if len(data) < 2:
        raise CodecError("payload shorter than the 2-byte tensor header")
    code, ndim = data[0], data[1]
    if code not in _DTYPES:
        raise CodecError(f"unknown dtype code {code}")
    head = 2 + 4 * ndim
    if len(data) < head:
        raise CodecError("payload shorter than its shape header")
    shape = struct.unpack(f"<{ndim}I", data[2:head])
    dtype = _DTYPES[code]
    if len(data) != encoded_size(shape, dtype):
        raise CodecError(f"payload of {len(data)} bytes does not match shape {shape} and dtype {dtype}")
    arr = np.frombuffer(data, dtype=_NUMPY[dtype], offset=head).reshape(shape)
    if dtype == torch.bool and arr.size and int(arr.view(np.uint8).max()) > 1:
        raise CodecError("a boolean tensor holds bytes other than 0 and 1")
    if not copy and arr.flags.writeable and arr.flags.aligned:
        return torch.from_numpy(arr)
    return torch.from_numpy(arr.copy())


def encode_rows(rows: torch.Tensor) -> list[bytes]:
    """``encode_tensor(rows[k:k+1])`` for every row k of a 2-D tensor, built from one buffer (same bytes)."""
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


def dtype_of(value: Any) -> torch.dtype:
    """The torch dtype of a tensor or of an array's elements."""
    if isinstance(value, torch.Tensor):
        return value.dtype
    return torch.from_numpy(np.zeros(0, dtype=np.asarray(value).dtype)).dtype


@functools.lru_cache(maxsize=256)
def row_layout(tail: tuple[int, ...], dtype: torch.dtype) -> tuple[int, int]:
    """The codec header of a block of rows shaped ``(k, *tail)`` and the bytes of one row.

    Static per row shape and dtype, so the ledger's sizes of every part are two multiplications.
    """
    width = math.prod(tail) if tail else 1
    per_row = width * torch.empty((), dtype=dtype).element_size()
    return encoded_size((0, width) if tail else (0,), dtype), per_row
