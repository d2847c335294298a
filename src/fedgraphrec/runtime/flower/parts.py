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
  adversary dropped).

Decoding gives back an equal part: same tensor or array type and dtype, same ids, same sizes, so
the ServerApp's ledger books exactly what the in-process engine books.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from fedgraphrec.runtime.message import Message, Part

__all__ = ["decode_message", "encode_message"]

_IDS = ("senders", "receivers", "counts", "seal_to", "index")
_NATIVE = (bool, int, float, str, bytes)
_JSON = "~json"


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
    """Inverse of :func:`encode_message`: the header and the message."""
    configs, arrays = content.config_records, content.array_records
    header = dict(configs["header"]) if "header" in configs else {}
    fields = _decode_fields(configs["fields"]) if "fields" in configs else {}
    names = list(_list(configs["parts"]["names"])) if "parts" in configs else []
    parts = {str(name): _decode_part(configs[f"p.{k}"], arrays[f"a.{k}"]) for k, name in enumerate(names)}
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
    as_json = set(_list(record.get(_JSON, [])))
    return {k: json.loads(str(v)) if k in as_json else v for k, v in record.items() if k != _JSON}


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list in the record, got {type(value).__name__}")
    return value


# ---------------------------------------------------------------------------- parts
def _joined(blobs: Sequence[bytes | None]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.array([-1 if b is None else len(b) for b in blobs], dtype=np.int64)
    data = b"".join(bytes(b) for b in blobs if b is not None)
    return np.frombuffer(data, dtype=np.uint8).copy(), lengths


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
        arrays["value"] = np.ascontiguousarray(value.detach().cpu().numpy())
    else:
        value_type = "numpy"
        arrays["value"] = np.ascontiguousarray(np.asarray(value))
    for name in _IDS:
        ids = getattr(part, name)
        if ids is not None:
            arrays[name] = np.asarray(ids, dtype=np.int64)
    if part._sizes is not None:
        arrays["sizes"] = np.asarray(part._sizes, dtype=np.int64)
    if part.sealed is not None:
        arrays["sealed"], arrays["sealed_lengths"] = _joined(part.sealed)
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


def _decode_part(meta: ConfigRecord, record: ArrayRecord) -> Part:
    arrays = {k: a.numpy() for k, a in record.items()}
    value_type = str(meta["value_type"])
    value: Any = None
    if value_type == "blobs":
        value = _split(arrays["blobs"], arrays["blob_lengths"])
    elif value_type == "torch":
        value = torch.from_numpy(np.array(arrays["value"], copy=True))
    elif value_type == "numpy":
        value = np.array(arrays["value"], copy=True)
    sealed = _split(arrays["sealed"], arrays["sealed_lengths"]) if "sealed" in arrays else None
    return Part(
        phase=str(meta["phase"]),
        kind=str(meta["kind"]),
        sender_role=str(meta["sender_role"]),
        receiver_role=str(meta["receiver_role"]),
        value=value,
        shape=meta["shape"],  # type: ignore[arg-type]
        protection=meta["protection"],  # type: ignore[arg-type]
        seal_to_role=str(meta["seal_to_role"]),
        from_role=str(meta["from_role"]),
        bound_senders=[str(s) for s in _list(meta["bound_senders"])] if meta["has_bound_senders"] else None,
        sealed=sealed,
        presealed=bool(meta["presealed"]),
        repeat=int(meta["repeat"]),  # type: ignore[arg-type]
        summed=bool(meta["summed"]),
        batched=bool(meta.get("batched", False)),
        meta=json.loads(str(meta["meta"])),
        _sizes=arrays.get("sizes"),
        **{name: arrays[name] for name in _IDS if name in arrays},
    )
