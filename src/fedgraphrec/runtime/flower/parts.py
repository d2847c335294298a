"""A round's :class:`~fedgraphrec.runtime.message.Message` as a Flower ``RecordDict``, and back.

The one codec between the runtime's messages and Flower's records; :class:`~.transport.FlowerTransport`
and the node's query handler (``fedgraphrec.engines.flower.node``) both use it. Layout of one request
or reply:

* ``"header"`` — a ``ConfigRecord`` of the round's public header (protocol, stage, step, ...);
* ``"fields"`` — a ``ConfigRecord`` of the message's fields: values Flower stores natively (``int``,
  ``float``, ``str``, ``bytes``, ``bool`` and homogeneous lists of them) as they are, anything else
  JSON-encoded (``None``, dicts, mixed or nested lists), its name listed under ``"~json"``;
* ``"parts"`` — a ``ConfigRecord`` with the part names in order; part ``k`` is ``"p.<k>"``, a
  ``ConfigRecord`` of its metadata (phase, kind, roles, shape, protection, the sealing names, the
  value's type, ``presealed``/``repeat``/``summed`` and ``meta`` as JSON), and ``"a.<k>"``, an
  ``ArrayRecord`` of NumPy arrays: the value (rows or broadcast), the id arrays (``senders``,
  ``receivers``, ``counts``, ``seal_to``), the ledger sizes a part in transit keeps (``sizes``), and
  blobs and ciphertexts concatenated (``uint8``) with their lengths (``-1``: a message the
  adversary dropped). A ciphertext several messages carry (one the server fans out to several
  receivers on the node) travels once, with ``sealed_index``: each message's ciphertext.

Decoding gives back an equal part: same tensor or array type and dtype, same ids, same sizes, so
the ServerApp's ledger books exactly what the in-process engine books. A view (a rows part with an
``index``: rows the server picked out of a larger table) is sent as the picked rows only, so a node
never receives the rows meant for others.

Decoding is strict (:mod:`.checks`): the receiver trusts nothing in a record, and any truncated,
extended, relabelled or inconsistent field raises :class:`~.checks.RecordError` naming the part,
its phase and the field, before anything is decoded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from fedgraphrec.runtime.blobs import PackedBlobs
from fedgraphrec.runtime.flower.checks import check_arrays, check_meta, fail
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part

__all__ = ["decode_message", "encode_message"]

_IDS = ("senders", "receivers", "counts", "seal_to", "index")
_NATIVE = (bool, int, float, str, bytes)
_JSON = "~json"
_TOP = frozenset(("header", "fields", "parts", "hello"))
"""Config records a message may hold besides its parts' (``p.<k>``)."""


def encode_message(message: Message, header: Mapping[str, Any]) -> RecordDict:
    """``message`` and the round's ``header`` (ConfigRecord values) as one ``RecordDict``."""
    content = RecordDict({"header": ConfigRecord(dict(header)), "fields": _encode_fields(message.fields)})
    content["parts"] = ConfigRecord({"names": list(message.parts)})
    for k, part in enumerate(message.parts.values()):
        meta, arrays = _encode_part(part)
        content[f"p.{k}"] = meta
        content[f"a.{k}"] = arrays
    return content


def decode_message(content: RecordDict) -> tuple[dict[str, Any], Message]:
    """Inverse of :func:`encode_message`: the header and the message.

    Raises:
        RecordError: anything in the record is malformed or inconsistent (:mod:`.checks`).
    """
    configs, arrays = content.config_records, content.array_records
    if list(content.metric_records):
        fail("message", "metrics", "a party message carries no metric records")
    for key in ("header", "fields", "parts"):
        if key not in configs:
            fail("message", key, "is missing")
    header = dict(configs["header"])
    for key, kind in (("stage", str), ("step", int), ("protocol", str)):
        if key in header and (not isinstance(header[key], kind) or isinstance(header[key], bool)):
            fail("message header", key, f"must be a {kind.__name__}, got {type(header[key]).__name__}")
    fields = _decode_fields(configs["fields"])
    parts_record = configs["parts"]
    if set(parts_record.keys()) != {"names"}:
        fail("message", "parts", "holds exactly the list of part names")
    listed = parts_record["names"]
    if not isinstance(listed, list) or not all(isinstance(n, str) for n in listed):
        fail("message", "parts.names", "must be a list of part names")
    names = [str(n) for n in listed]
    if len(set(names)) != len(names):
        fail("message", "parts.names", "names a part twice")
    want_configs = _TOP | {f"p.{k}" for k in range(len(names))}
    for key in sorted(set(configs) - want_configs):
        fail("message", key, "is not a record of this message")
    for key in sorted(set(arrays) ^ {f"a.{k}" for k in range(len(names))}):
        fail("message", key, "is missing" if key not in arrays else "is not a record of this message")
    for k in range(len(names)):
        if f"p.{k}" not in configs:
            fail("message", f"p.{k}", "is missing")
    parts = {name: _decode_part(configs[f"p.{k}"], arrays[f"a.{k}"], name) for k, name in enumerate(names)}
    return header, Message(parts, fields)


# ---------------------------------------------------------------------------- fields
def _native(value: Any) -> bool:
    if isinstance(value, _NATIVE):
        return True
    if isinstance(value, list):
        kinds = {bool if isinstance(v, bool) else type(v) for v in value}
        return len(kinds) <= 1 and all(k in _NATIVE for k in kinds)
    return False


def _plain(value: Any) -> Any:
    """NumPy scalars and arrays as Python values, tuples as lists (what a field may hold)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _encode_fields(fields: Mapping[str, Any]) -> ConfigRecord:
    out: dict[str, Any] = {}
    as_json: list[str] = []
    for name, raw in fields.items():
        value = _plain(raw)
        if _native(value):
            out[name] = value
            continue
        try:
            out[name] = json.dumps(value)
        except TypeError as exc:
            raise TypeError(f"message field {name!r}: {type(raw).__name__} is not a field value") from exc
        as_json.append(name)
    if _JSON in out:
        raise ValueError(f"message field name {_JSON!r} is reserved")
    out[_JSON] = as_json
    return ConfigRecord(out)


def _decode_fields(record: ConfigRecord) -> dict[str, Any]:
    as_json = record.get(_JSON, [])
    if not isinstance(as_json, list) or not all(isinstance(k, str) and k in record for k in as_json):
        fail("message fields", _JSON, "must list field names of the record")
    out: dict[str, Any] = {}
    for k, v in record.items():
        if k == _JSON:
            continue
        if k in as_json:
            if not isinstance(v, str):
                fail("message fields", k, "a JSON field must be a string")
            try:
                out[k] = json.loads(v)
            except ValueError:
                fail("message fields", k, "is not valid JSON")
        else:
            out[k] = v
    return out


# ---------------------------------------------------------------------------- parts
def _joined(blobs: Sequence[bytes | bytearray | None]) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(blobs, PackedBlobs):  # one buffer already, and no blob missing
        return np.frombuffer(blobs.buffer, dtype=np.uint8).copy(), blobs.lengths()
    lengths = np.array([-1 if b is None else len(b) for b in blobs], dtype=np.int64)
    data = b"".join(bytes(b) for b in blobs if b is not None)
    return np.frombuffer(data, dtype=np.uint8).copy(), lengths


def _distinct(
    blobs: Sequence[bytes | bytearray | None],
) -> tuple[Sequence[bytes | bytearray | None], np.ndarray | None]:
    """The part's distinct ciphertexts (by identity) and each message's position among them.

    A message the server fans out unchanged is one ciphertext forwarded once per receiver (a
    user's row sealed to the multicast receiver, relayed to each convolution-client that needs
    it): a SuperNode hosting several of those receivers gets its bytes once, and every message
    still decodes to its ciphertext. A dropped message (``None``) keeps a slot of its own.
    ``None``: no ciphertext repeats (no index travels).
    """
    if isinstance(blobs, PackedBlobs):
        return blobs, None
    first: dict[int, int] = {}
    unique: list[bytes | bytearray | None] = []
    index = np.empty(len(blobs), dtype=np.int64)
    for k, blob in enumerate(blobs):
        at = None if blob is None else first.get(id(blob))
        if at is None:
            at = len(unique)
            unique.append(blob)
            if blob is not None:
                first[id(blob)] = at
        index[k] = at
    return (blobs, None) if len(unique) == len(blobs) else (unique, index)


def _split(data: np.ndarray, lengths: np.ndarray) -> list[bytes | None]:
    raw = np.asarray(data, dtype=np.uint8).tobytes()
    out: list[bytes | None] = []
    at = 0
    for n in lengths.tolist():
        if n < 0:
            out.append(None)
            continue
        out.append(raw[at : at + n])
        at += n
    return out


def _encode_part(part: Part) -> tuple[ConfigRecord, ArrayRecord]:
    arrays: dict[str, np.ndarray] = {}
    value = part.value
    if value is None:
        value_type = "none"
    elif part.shape == "blobs":
        value_type = "blobs"
        arrays["blobs"], arrays["blob_lengths"] = _joined(value)
    elif isinstance(value, torch.Tensor):
        value_type = "torch"
        rows = part.rows() if part.shape == "rows" else value  # a view: only the rows picked
        arrays["value"] = np.ascontiguousarray(rows.detach().cpu().numpy())
    else:
        value_type = "numpy"
        arrays["value"] = np.ascontiguousarray(np.asarray(part.rows() if part.shape == "rows" else value))
    for name in _IDS:
        if name == "index" and part.shape == "rows" and value is not None:
            continue  # the value holds the picked rows themselves
        ids = getattr(part, name)
        if ids is not None:
            arrays[name] = np.asarray(ids, dtype=np.int64)
    if part._sizes is not None:
        arrays["sizes"] = np.asarray(part._sizes, dtype=np.int64)
    if part.sealed is not None:
        unique, index = _distinct(part.sealed)
        arrays["sealed"], arrays["sealed_lengths"] = _joined(unique)
        if index is not None:
            arrays["sealed_index"] = index
    meta = ConfigRecord(
        {
            "phase": part.phase,
            "kind": part.kind,
            "sender_role": part.sender_role,
            "receiver_role": part.receiver_role,
            "shape": part.shape,
            "protection": part.protection,
            "seal_to_role": part.seal_to_role,
            "from_role": part.from_role,
            "bound_senders": list(part.bound_senders or []),
            "has_bound_senders": part.bound_senders is not None,
            "presealed": part.presealed,
            "repeat": part.repeat,
            "summed": part.summed,
            "batched": part.batched,
            "value_type": value_type,
            "meta": json.dumps(_plain(part.meta)),
        }
    )
    return meta, ArrayRecord({k: Array(v) for k, v in arrays.items()})


def _decode_part(raw_meta: ConfigRecord, record: ArrayRecord, part_name: str) -> Part:
    where = f"part {part_name!r}"
    meta = check_meta(raw_meta, where)
    arrays = check_arrays(record, meta, where)
    try:
        part_meta = json.loads(meta["meta"])
    except ValueError:
        fail(f"{where} (phase {meta['phase']!r})", "meta", "is not valid JSON")
    if not isinstance(part_meta, dict):
        fail(f"{where} (phase {meta['phase']!r})", "meta", "must be a JSON object")
    value_type = meta["value_type"]
    value: Any = None
    if value_type == "blobs":
        value = _split(arrays["blobs"], arrays["blob_lengths"])
    elif value_type == "torch":
        try:
            value = torch.from_numpy(np.array(arrays["value"], copy=True))
        except TypeError:
            fail(
                f"{where} (phase {meta['phase']!r})",
                "value",
                f"dtype {arrays['value'].dtype} is not a tensor's",
            )
    elif value_type == "numpy":
        value = np.array(arrays["value"], copy=True)
    sealed: list[bytes | bytearray | None] | None = None
    if "sealed" in arrays:
        blobs: list[bytes | bytearray | None] = list(_split(arrays["sealed"], arrays["sealed_lengths"]))
        # repeated ciphertexts travel once (:func:`_distinct`): each message gets its ciphertext back
        index = arrays.get("sealed_index")
        sealed = blobs if index is None else [blobs[k] for k in index.tolist()]
    return Part(
        phase=str(meta["phase"]),
        kind=str(meta["kind"]),
        sender_role=str(meta["sender_role"]),
        receiver_role=str(meta["receiver_role"]),
        value=value,
        shape=meta["shape"],
        protection=meta["protection"],
        seal_to_role=str(meta["seal_to_role"]),
        from_role=str(meta["from_role"]),
        bound_senders=list(meta["bound_senders"]) if meta["has_bound_senders"] else None,
        sealed=sealed,
        presealed=bool(meta["presealed"]),
        repeat=int(meta["repeat"]),
        summed=bool(meta["summed"]),
        batched=bool(meta["batched"]),
        meta=part_meta,
        _sizes=arrays.get("sizes"),
        **{name: arrays[name] for name in _IDS if name in arrays},
    )
