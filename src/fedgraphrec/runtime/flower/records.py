"""Flower's own count of the bytes and time a round takes on the wire.

:func:`message_bytes` counts what Flower itself serialises: the deflated bytes of every object in a
message's object tree (message, records, arrays, chunks), the unit Flower pushes to and pulls from
the SuperLink. :class:`Traffic` keeps every round the server drove (latency and those bytes). The
messages' content is encoded by :mod:`fedgraphrec.runtime.flower.parts`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flwr.app import Message
from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects

__all__ = ["StageTiming", "Traffic", "message_bytes"]


def message_bytes(message: Message) -> int:
    """Bytes Flower serialises for ``message``: every object of its tree, deflated."""
    return sum(len(obj.deflate()) for obj in get_all_nested_objects(message).values())


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
