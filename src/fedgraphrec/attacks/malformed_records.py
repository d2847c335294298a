"""Malformed Flower records: a server that sends bytes which do not say what the request says.

On the Flower engine a request reaches a SuperNode as a ``RecordDict``
(:mod:`fedgraphrec.runtime.flower.parts`): per part a ``ConfigRecord`` of metadata and an
``ArrayRecord`` of NumPy arrays — the rows, the id arrays, and ciphertexts or blobs concatenated
(``uint8``) with their lengths. :func:`malform` alters one part's arrays in the encoded request, as a
server that controls the wire can:

- ``truncate`` — the concatenated ciphertexts/blobs lose their last byte (the lengths still claim
  it); a part of rows loses its last element;
- ``dtype`` — the bytes arrive as ``int16`` (rows: ``float64`` as ``float32``, integers as
  ``int32``), which a lenient decoder casts back silently;
- ``shape`` — the array arrives with another shape (bytes: a column; rows: transposed);
- ``count`` — one message fewer than the part names (n−1 lengths or rows for n messages).

A strict decoder refuses each with an error naming the phase and the field.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["MALFORMED", "malform"]

MALFORMED = ("truncate", "dtype", "shape", "count")
"""The malformed-record attacks, in report order."""


def malform(content: Any, attack: str, phase: str) -> str:
    """Alter the first part of ``phase`` in the encoded request ``content`` (a ``RecordDict``).

    Returns what was altered (``"<field>: <how>"``), or ``""`` when the request has no such part or
    the part offers no instance (e.g. nothing to truncate).
    """
    from flwr.app import Array, ArrayRecord

    if attack not in MALFORMED:
        raise ValueError(f"attack must be one of {MALFORMED}, got {attack!r}")
    configs = content.config_records
    if "parts" not in configs:
        return ""
    for k in range(len(list(configs["parts"]["names"]))):
        if str(configs[f"p.{k}"]["phase"]) != phase:
            continue
        arrays = {name: a.numpy() for name, a in content.array_records[f"a.{k}"].items()}
        what = _alter(arrays, attack)
        if what:
            content[f"a.{k}"] = ArrayRecord({n: Array(np.ascontiguousarray(v)) for n, v in arrays.items()})
            return what
    return ""


def _alter(arrays: dict[str, np.ndarray], attack: str) -> str:
    """Alter ``arrays`` in place (one field); what was done, or ``""``."""
    for data, lengths in (("sealed", "sealed_lengths"), ("blobs", "blob_lengths")):
        if data in arrays and len(arrays[data]):
            return _bytes(arrays, data, lengths, attack)
    if "value" in arrays and arrays["value"].size:
        return _rows(arrays, attack)
    return ""


def _bytes(arrays: dict[str, np.ndarray], data: str, lengths: str, attack: str) -> str:
    blob, sizes = arrays[data], arrays[lengths]
    if attack == "truncate":
        arrays[data] = blob[:-1]
        return f"{data}: last byte cut ({len(blob)} -> {len(blob) - 1} bytes)"
    if attack == "dtype":
        arrays[data] = blob.astype(np.int16)
        return f"{data}: uint8 sent as int16"
    if attack == "shape":
        arrays[data] = blob.reshape(-1, 1)
        return f"{data}: shape ({len(blob)},) sent as ({len(blob)}, 1)"
    live = [j for j, n in enumerate(sizes.tolist()) if n >= 0]
    if not live:
        return ""
    last = live[-1]
    cut = int(sizes[last])
    arrays[lengths] = np.delete(sizes, last)
    arrays[data] = blob[: len(blob) - cut]
    return f"{lengths}: {len(sizes)} -> {len(sizes) - 1} messages"


def _rows(arrays: dict[str, np.ndarray], attack: str) -> str:
    value = arrays["value"]
    if attack == "truncate":
        arrays["value"] = value.reshape(-1)[:-1]
        return f"value: {value.size} -> {value.size - 1} elements"
    if attack == "dtype":
        to: type[np.generic] = np.float32 if value.dtype != np.float32 else np.float64
        if value.dtype.kind in "iub":
            to = np.int32 if value.dtype != np.int32 else np.int64
        arrays["value"] = value.astype(to)
        return f"value: {value.dtype} sent as {np.dtype(to)}"
    if attack == "shape":
        arrays["value"] = (
            value.T.copy() if value.ndim == 2 and value.shape[0] != value.shape[1] else value.reshape(-1, 1)
        )
        return f"value: shape {value.shape} sent as {arrays['value'].shape}"
    if value.ndim < 1 or value.shape[0] < 1:
        return ""
    arrays["value"] = value[:-1]
    return f"value: {value.shape[0]} -> {value.shape[0] - 1} rows"
