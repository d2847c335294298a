"""Strict checks of the Flower records a party receives: every byte the sender wrote is verified.

A SuperNode decodes what the server sends (:func:`~fedgraphrec.runtime.flower.parts.decode_message`);
the server may lie, so nothing in a record is trusted before it is checked against the record's own
header *and* the part's declared structure:

* each ``Array`` is a NumPy array whose ``.npy`` data agrees with the dtype and shape the ``Array``
  declares (a truncated, extended or relabelled array is refused, never cast or reshaped);
* id arrays (``senders``, ``receivers``, ``counts``, ``seal_to``, ``index``, ``sizes``, the blob and
  ciphertext lengths) are one-dimensional ``int64`` with values in range;
* concatenated blobs and ciphertexts add up exactly to their lengths, and a ciphertext index
  (``sealed_index``: repeated ciphertexts sent once) points at every ciphertext and at nothing else;
* every per-message array has one entry per message, a rows part's ``counts`` add up to its rows
  (or one row per message without counts; a ``summed`` part's value is the sum of its messages), a
  view's ``index`` points inside the value;
* the metadata has exactly the fields the encoder writes, each of its type, and the combinations the
  runtime allows (a sealed part in transit has ciphertexts and no value, a summed part is masked, ...).

Any mismatch raises :class:`RecordError` (an :class:`~fedgraphrec.crypto.errors.IntegrityError`, so a
``ValueError``) naming the part, its phase and the field; nothing is partly decoded.
"""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord

from fedgraphrec.crypto.errors import IntegrityError

__all__ = ["META_FIELDS", "RecordError", "check_arrays", "check_meta", "fail"]

META_FIELDS: dict[str, type | tuple[type, ...]] = {
    "phase": str,
    "kind": str,
    "sender_role": str,
    "receiver_role": str,
    "shape": str,
    "protection": str,
    "seal_to_role": str,
    "from_role": str,
    "bound_senders": list,
    "has_bound_senders": bool,
    "presealed": bool,
    "repeat": int,
    "summed": bool,
    "batched": bool,
    "value_type": str,
    "meta": str,
}
"""The metadata fields of an encoded part and their types (exactly these, no more, no fewer)."""

_SHAPES = ("rows", "broadcast", "blobs")
_PROTECTIONS = ("plain", "sealed", "pseudonymous", "masked", "homomorphic", "asymmetric")
_VALUE_TYPES = ("none", "blobs", "torch", "numpy")
_PER_MESSAGE = ("senders", "receivers", "counts", "seal_to", "sizes")
_IDS = (*_PER_MESSAGE, "index", "blob_lengths", "sealed_lengths", "sealed_index")
_BYTES = ("blobs", "sealed")
_ARRAYS = frozenset(("value", *_IDS, *_BYTES))
_NUMERIC = "biuf"  # bool, signed, unsigned, float: what a value may hold


class RecordError(IntegrityError):
    """A received Flower record is malformed; the message names the part, the phase and the field."""


def fail(where: str, field: str, what: str) -> NoReturn:
    """Raise :class:`RecordError` for ``field`` of ``where`` (the part and its phase)."""
    raise RecordError(f"flower record: {where}: field {field!r}: {what}; the record was rejected")


def check_meta(meta: ConfigRecord, where: str) -> dict[str, Any]:
    """The part's metadata, every field present with its type and allowed value.

    Raises:
        RecordError: a field is missing, extra, of another type or out of range.
    """
    got: dict[str, Any] = dict(meta.items())
    for name in sorted(set(got) - set(META_FIELDS)):
        fail(where, name, "is not a field of an encoded part")
    for name, kind in META_FIELDS.items():
        if name not in got:
            fail(where, name, "is missing")
        value = got[name]
        if (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
            fail(where, name, f"must be a {getattr(kind, '__name__', kind)}, got {type(value).__name__}")
    where = f"{where} (phase {got['phase']!r})"
    for name, allowed in (("shape", _SHAPES), ("protection", _PROTECTIONS), ("value_type", _VALUE_TYPES)):
        if got[name] not in allowed:
            fail(where, name, f"must be one of {allowed}, got {got[name]!r}")
    if not all(isinstance(s, str) for s in got["bound_senders"]):
        fail(where, "bound_senders", "must be a list of party names")
    if not got["has_bound_senders"] and got["bound_senders"]:
        fail(where, "bound_senders", "names senders although the part has none")
    if got["repeat"] < 1:
        fail(where, "repeat", f"must be at least 1, got {got['repeat']}")
    if got["summed"] and got["protection"] != "masked":
        fail(where, "summed", "only masked messages may travel as their sum")
    if got["presealed"] and (got["protection"] != "sealed" or got["shape"] != "blobs"):
        fail(where, "presealed", "presealed parts are sealed blobs")
    if got["batched"]:
        fail(where, "batched", "the Flower engine never batches sealed parts")
    if got["shape"] == "broadcast" and got["protection"] == "sealed":
        fail(where, "shape", "a sealed part cannot be a broadcast")
    value_type = got["value_type"]
    if (value_type == "blobs" and got["shape"] != "blobs") or (
        value_type in ("torch", "numpy") and got["shape"] == "blobs"
    ):
        fail(where, "value_type", f"{value_type!r} does not fit a {got['shape']} part")
    return got


def _numpy(array: Any, where: str, name: str) -> np.ndarray:
    """The array an ``Array`` holds, after checking that its data agrees with its declared header."""
    if not isinstance(array, Array) or array.stype != "numpy.ndarray":
        fail(where, name, "is not a NumPy array")
    try:
        arr = array.numpy()
    except Exception as exc:  # np.load on hostile bytes: truncated, extended, pickled, bad header
        fail(where, name, f"holds no valid array data ({type(exc).__name__})")
    if str(arr.dtype) != array.dtype or tuple(arr.shape) != tuple(array.shape):
        fail(
            where,
            name,
            f"declares dtype {array.dtype} and shape {tuple(array.shape)} but holds "
            f"{arr.dtype} {tuple(arr.shape)}",
        )
    return arr


def _ids(arr: np.ndarray, where: str, name: str) -> np.ndarray:
    if arr.dtype != np.int64 or arr.ndim != 1:
        fail(where, name, f"must be a 1-d int64 array, got {arr.dtype} with shape {arr.shape}")
    low = -1 if name == "sealed_lengths" else 0  # -1: a ciphertext the adversary dropped
    if len(arr) and int(arr.min()) < low:
        fail(where, name, f"holds {int(arr.min())}, below {low}")
    return arr


def _lengths(arrays: dict[str, np.ndarray], data: str, where: str) -> None:
    lengths = f"{data[:-1] if data == 'blobs' else data}_lengths"
    if (data in arrays) != (lengths in arrays):
        fail(where, data if lengths in arrays else lengths, f"{data} and {lengths} travel together")
    if data not in arrays:
        return
    raw = arrays[data]
    if raw.dtype != np.uint8 or raw.ndim != 1:
        fail(where, data, f"must be a 1-d uint8 array, got {raw.dtype} with shape {raw.shape}")
    total = int(np.clip(arrays[lengths], 0, None).sum())
    if total != len(raw):
        fail(where, lengths, f"add up to {total} bytes but {data} holds {len(raw)}")


def check_arrays(record: ArrayRecord, meta: dict[str, Any], where: str) -> dict[str, np.ndarray]:
    """The part's arrays, checked against each other and the metadata (module docstring).

    Raises:
        RecordError: an array is malformed or inconsistent with the part's structure.
    """
    where = f"{where} (phase {meta['phase']!r})"
    names = list(record.keys())
    for name in names:
        if name not in _ARRAYS:
            fail(where, name, "is not an array of an encoded part")
    arrays = {name: _numpy(record[name], where, name) for name in names}
    for name in _IDS:
        if name in arrays:
            _ids(arrays[name], where, name)
    _lengths(arrays, "blobs", where)
    _lengths(arrays, "sealed", where)
    value_type, shape = meta["value_type"], meta["shape"]
    if ("value" in arrays) != (value_type in ("torch", "numpy")):
        fail(where, "value", f"present or absent against value_type {value_type!r}")
    if ("blobs" in arrays) != (value_type == "blobs"):
        fail(where, "blobs", f"present or absent against value_type {value_type!r}")
    if "blob_lengths" in arrays and int(arrays["blob_lengths"].min(initial=0)) < 0:
        fail(where, "blob_lengths", "a blob cannot be missing")
    if "value" in arrays:
        value = arrays["value"]
        if value.dtype.kind not in _NUMERIC or not value.dtype.isnative:
            fail(where, "value", f"dtype {value.dtype} is not a numeric native array")
        if shape == "rows" and value.ndim < 1:
            fail(where, "value", "a rows part needs at least one dimension")
        if value.dtype == np.bool_ and value.size and int(value.view(np.uint8).max()) > 1:
            fail(where, "value", "a boolean array holds bytes other than 0 and 1")
    sealed = "sealed" in arrays
    if sealed and (meta["protection"] != "sealed" or meta["presealed"] or value_type != "none"):
        fail(where, "sealed", "ciphertexts travel only in a sealed part without a value")
    _check_counts(arrays, meta, where)
    return arrays


def _check_counts(arrays: dict[str, np.ndarray], meta: dict[str, Any], where: str) -> None:
    """One entry per message everywhere; rows, counts and the view's index agree."""
    per_message = {name: len(arrays[name]) for name in _PER_MESSAGE if name in arrays}
    sealed_index = arrays.get("sealed_index")
    if sealed_index is not None:  # repeated ciphertexts sent once: one index entry per message
        if "sealed_lengths" not in arrays:
            fail(where, "sealed_index", "travels only with ciphertexts")
        _check_sealed_index(sealed_index, arrays["sealed_lengths"], where)
        per_message["sealed"] = len(sealed_index)
    elif "sealed_lengths" in arrays:
        per_message["sealed"] = len(arrays["sealed_lengths"])
    if "blob_lengths" in arrays:
        per_message["blobs"] = len(arrays["blob_lengths"])
    if meta["has_bound_senders"]:
        per_message["bound_senders"] = len(meta["bound_senders"])
    shape = meta["shape"]
    value = arrays.get("value")
    index = arrays.get("index")
    if index is not None and (shape != "rows" or value is None):
        fail(where, "index", "only a rows part with a value can be a view")
    # a summed part's value is the sum of its messages (accounted mode), not one block per message
    per_row = value is not None and shape == "rows" and not meta["summed"]
    rows = (len(index) if index is not None else len(value)) if per_row and value is not None else None
    if rows is not None and "counts" not in arrays:
        per_message["rows"] = rows
    if per_message:
        first, n = next(iter(per_message.items()))
        for name, got in per_message.items():
            if got != n:
                fail(where, name, f"has {got} entries for {n} messages (as {first} says)")
    counts = arrays.get("counts")
    if counts is not None and rows is not None and int(counts.sum()) != rows:
        fail(where, "counts", f"add up to {int(counts.sum())} rows but the part has {rows}")
    if index is not None and value is not None and len(index) and int(index.max()) >= len(value):
        fail(where, "index", f"points at row {int(index.max())} of a value of {len(value)} rows")


def _check_sealed_index(index: np.ndarray, lengths: np.ndarray, where: str) -> None:
    """``sealed_index`` in the one form the encoder writes, so a decoded part re-encodes to it.

    Every ciphertext is some message's, first used in order (message ``k``'s is either one an
    earlier message carries or the next one), at least one repeats, and a dropped one (length
    ``-1``) is no more than one message's.
    """
    n = len(lengths)
    if len(index) <= n:
        fail(where, "sealed_index", f"{len(index)} messages for {n} ciphertexts: no ciphertext repeats")
    if int(index.max()) >= n:
        fail(where, "sealed_index", f"points at ciphertext {int(index.max())} of {n}")
    seen = np.maximum.accumulate(np.concatenate([[-1], index[:-1]]))
    if (index > seen + 1).any() or int(index.max()) != n - 1:
        fail(where, "sealed_index", "does not use the ciphertexts in order, each at least once")
    uses = np.bincount(index, minlength=n)
    if (uses[lengths < 0] > 1).any():
        fail(where, "sealed_index", "gives one dropped ciphertext to several messages")
