"""Protocol messages as Flower records, and Flower's own count of the bytes that cross the wire.

A message's content is a ``RecordDict`` with a ``ConfigRecord`` ``"fields"`` (ints, strings, binary
payloads such as ciphertexts, lists of those) and an optional ``ArrayRecord`` ``"vectors"`` (one
``uint64`` ring vector per client id, e.g. masked secure-aggregation inputs; Flower chunks large
arrays). :func:`message_bytes` counts what Flower itself serialises: the deflated bytes of every
object in the message's object tree (message, records, arrays, chunks), the unit Flower pushes to and
pulls from the SuperLink.

:func:`pack_arrays` / :func:`unpack_arrays` carry a message of scalar fields and *named* NumPy arrays
of any dtype (binary payloads of equal length as ``uint8`` matrices), the form LP-GCN's rounds use.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, RecordDict
from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects

__all__ = [
    "StageTiming",
    "Traffic",
    "content_bytes",
    "message_bytes",
    "pack",
    "pack_arrays",
    "unpack",
    "unpack_arrays",
]

Fields = dict[str, Any]


def pack(fields: Mapping[str, Any], vectors: Mapping[int, np.ndarray] | None = None) -> RecordDict:
    """``fields`` (ConfigRecord values) and per-client ``uint64`` vectors as one ``RecordDict``."""
    content = RecordDict({"fields": ConfigRecord(dict(fields))})
    if vectors:
        arrays = {
            str(u): Array(np.ascontiguousarray(v, dtype=np.uint64).view(np.int64)) for u, v in vectors.items()
        }
        content["vectors"] = ArrayRecord(arrays)
    return content


def unpack(content: RecordDict) -> tuple[Fields, dict[int, np.ndarray]]:
    """Inverse of :func:`pack`: the fields and the vectors (``uint64``, keyed by client id)."""
    fields: Fields = dict(content.config_records["fields"]) if "fields" in content.config_records else {}
    vectors: dict[int, np.ndarray] = {}
    if "vectors" in content.array_records:
        for key, arr in content.array_records["vectors"].items():
            vectors[int(key)] = arr.numpy().view(np.uint64)
    return fields, vectors


def pack_arrays(fields: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> RecordDict:
    """Scalar ``fields`` and named ``arrays`` as one ``RecordDict`` (``"fields"``, ``"arrays"``)."""
    content = RecordDict({"fields": ConfigRecord(dict(fields))})
    content["arrays"] = ArrayRecord({k: Array(np.array(v, order="C")) for k, v in arrays.items()})
    return content


def unpack_arrays(content: RecordDict) -> tuple[Fields, dict[str, np.ndarray]]:
    """Inverse of :func:`pack_arrays`."""
    fields: Fields = dict(content.config_records["fields"]) if "fields" in content.config_records else {}
    arrays: dict[str, np.ndarray] = {}
    if "arrays" in content.array_records:
        arrays = {k: a.numpy() for k, a in content.array_records["arrays"].items()}
    return fields, arrays


def message_bytes(message: Message) -> int:
    """Bytes Flower serialises for ``message``: every object of its tree, deflated."""
    return sum(len(obj.deflate()) for obj in get_all_nested_objects(message).values())


def content_bytes(content: RecordDict) -> int:
    """Bytes Flower serialises for a message's content alone (its records, arrays and chunks)."""
    return sum(len(obj.deflate()) for obj in get_all_nested_objects(content).values())


@dataclass(frozen=True)
class StageTiming:
    """One ``send_and_receive`` round: its wall time and Flower's byte counts each way."""

    op: str
    label: str
    nodes: int
    replies: int
    seconds: float
    sent_bytes: int
    received_bytes: int


@dataclass
class Traffic:
    """Every round the server drove, in order (latency and Flower-counted bytes)."""

    rounds: list[StageTiming] = field(default_factory=list)

    def start(self) -> float:
        """A start time for :meth:`record`."""
        return time.perf_counter()

    def record(
        self,
        op: str,
        label: str,
        sent: list[Message],
        got: list[Message],
        start: float,
        size: Callable[[Message], int] = message_bytes,
    ) -> None:
        """Add one round (``sent`` requests, ``got`` replies) that started at ``start``."""
        self.rounds.append(
            StageTiming(
                op,
                label,
                len(sent),
                len(got),
                time.perf_counter() - start,
                sum(size(m) for m in sent),
                sum(size(m) for m in got if m.has_content()),
            )
        )

    def summary(self) -> dict[str, Any]:
        """Totals and per-op mean latency, JSON-ready."""
        ops: dict[str, list[StageTiming]] = {}
        for r in self.rounds:
            ops.setdefault(r.op, []).append(r)
        return {
            "rounds": len(self.rounds),
            "sent_bytes": sum(r.sent_bytes for r in self.rounds),
            "received_bytes": sum(r.received_bytes for r in self.rounds),
            "seconds": sum(r.seconds for r in self.rounds),
            "per_op": {
                op: {
                    "rounds": len(rs),
                    "mean_seconds": sum(r.seconds for r in rs) / len(rs),
                    "sent_bytes": sum(r.sent_bytes for r in rs),
                    "received_bytes": sum(r.received_bytes for r in rs),
                }
                for op, rs in ops.items()
            },
        }
