"""The communication ledger: every transmission, counted as serialized.

Each record is one *transmission batch* of a protocol phase: ``messages`` messages from parties of
role ``sender`` to parties of role ``receiver``, with ``payload_bytes`` bytes in total (as encoded by
:mod:`fedgraphrec.runtime.codec`, ciphertext overhead included). Per-client totals are kept as arrays
indexed by client id, so a protocol's communication formulas (e.g. LP-GCN Eq. 30) can be checked
against what was actually sent.
"""

from __future__ import annotations

import csv
import itertools
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

__all__ = ["Ledger", "LedgerRow", "MessageWatch", "read_saved"]


class MessageWatch(Protocol):
    """Sees every recorded batch (:class:`~fedgraphrec.runtime.device_profile.DeviceWatch`)."""

    def observe(
        self,
        phase: str,
        roles: tuple[str, str],
        sizes: np.ndarray | None,
        uniform: int | None,
        ids: tuple[np.ndarray | None, np.ndarray | None],
        repeat: int,
        step_key: bool,
    ) -> None:
        """One :meth:`Ledger.record` call: sizes (or one ``uniform`` size), sender and receiver ids."""
        ...


@dataclass(frozen=True)
class LedgerRow:
    """Totals of one (phase, sender role, receiver role) triple."""

    phase: str
    sender: str
    receiver: str
    messages: int
    payload_bytes: int


_GENERATIONS = itertools.count()
"""Every ledger's generations (:meth:`Ledger.replay`), one sequence for all of them."""


@dataclass(frozen=True)
class Replay:
    """What one static :meth:`Ledger.record` call added: its row's increments and deferred counts."""

    row: list[int]
    messages: int
    payload: int
    deferred: tuple[tuple[list[Any], int], ...]
    generation: int


class Ledger:
    """Accumulates transmissions; per-client sent/received bytes for ``n_clients`` clients.

    Args:
        n_clients: size of the client id space (0 when the protocol has no clients).
    """

    def __init__(self, n_clients: int = 0) -> None:
        self.n_clients = n_clients
        self._rows: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
        self._totals = (np.zeros(n_clients, dtype=np.int64), np.zeros(n_clients, dtype=np.int64))
        # messages of a static (read-only) id array with equal or static (read-only) sizes: summed
        # here and counted into the per-client totals when they are read (one bincount per array)
        self._deferred: dict[tuple[int, int, int], list[Any]] = {}
        self._stats: dict[int, tuple[np.ndarray, tuple[int, int, int, int]]] = {}
        self._crypto = np.zeros(n_clients, dtype=np.float64)
        self._crypto_pending: dict[int, list[Any]] = {}  # static ids: seconds summed until read
        self._counts: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._crypto_counts: dict[int, tuple[np.ndarray, np.ndarray, int]] = {}
        # renewed whenever a replay's row or deferred entries may be gone; unique across ledgers, so
        # a replay is only ever added to the ledger that recorded it
        self._generation = next(_GENERATIONS)
        self.watch: MessageWatch | None = None
        """Sees every batch as it is recorded (``device_profile``'s per-device replay; ``None``: off)."""

    def _per_client(
        self, ids: np.ndarray, sizes: np.ndarray | None, uniform: int | None, n: int
    ) -> np.ndarray:
        """Bytes per client id; messages of equal size reuse a cached count of the (persistent) id array."""
        if uniform is not None:
            hit = self._counts.get(id(ids))
            if hit is None or hit[0] is not ids:
                hit = (ids, np.bincount(ids, minlength=n))
                if len(self._counts) < 256:
                    self._counts[id(ids)] = hit
            return hit[1] * uniform
        assert sizes is not None
        return np.bincount(ids, weights=sizes, minlength=n).astype(np.int64)

    def record(
        self,
        phase: str,
        sender: str,
        receiver: str,
        sizes: np.ndarray | Sequence[int] | int,
        *,
        senders: np.ndarray | None = None,
        receivers: np.ndarray | None = None,
        count: int | None = None,
        repeat: int = 1,
        step_key: bool = False,
    ) -> Replay | None:
        """Record a batch of messages with byte ``sizes`` (one entry per message).

        ``senders`` / ``receivers`` are the client ids of each message when that side is a client
        role; they feed the per-client totals. ``count`` with a scalar ``sizes`` records ``count``
        messages of that size without materialising a per-message array. ``repeat`` counts every
        listed message ``repeat`` times (e.g. a client sending one share to each of ``n - 1`` peers
        through the server), again without an ``n²`` array. ``step_key``: the messages are sealed
        under the group's per-step key (a device derives one per step); only :attr:`watch` reads it.

        Returns what the call added when all of it was static — equal or read-only sizes, read-only
        ids — and no :attr:`watch` looks on: :meth:`replay` adds it again for the same batch,
        without recounting (``None`` otherwise).
        """
        if repeat < 1:
            raise ValueError(f"repeat must be at least 1, got {repeat}")
        uniform: int | None
        if count is not None:
            if not isinstance(sizes, int | np.integer) or sizes < 0 or count < 0:
                raise ValueError("count needs one non-negative integer size and a non-negative count")
            n_msgs, total, uniform = count, int(sizes) * count, int(sizes)
            sz = None
        else:
            sz = _int64_vector(sizes)
            n_msgs, total, low, high = self._size_stats(sz)
            if low < 0:
                raise ValueError("message sizes must be non-negative")
            uniform = low if n_msgs and low == high else None
        generation = self._generation
        row = self._rows[(phase, sender, receiver)]
        row[0] += n_msgs * repeat
        row[1] += total * repeat
        deferred: list[tuple[list[Any], int]] | None = []
        for side, ids in enumerate((senders, receivers)):
            if ids is None:
                continue
            if len(ids) != n_msgs:
                raise ValueError(f"{len(ids)} client ids for {n_msgs} messages")
            ids = np.asarray(ids)
            static_sizes = uniform is not None or (sz is not None and not sz.flags.writeable)
            if static_sizes and not ids.flags.writeable:
                if len(self._deferred) >= 256:
                    self._settle()
                key = (side, id(ids), 0 if uniform is not None else id(sz))
                hit = self._deferred.setdefault(key, [ids, None if uniform is not None else sz, 0])
                if hit[0] is ids and (uniform is not None or hit[1] is sz):
                    added = (uniform if uniform is not None else 1) * repeat
                    hit[2] += added
                    if deferred is not None:
                        deferred.append((hit, added))
                    continue
            deferred = None  # counted into the totals now: not replayable
            totals = self._totals[side]
            totals += self._per_client(ids, sz, uniform, len(totals)) * repeat
        if self.watch is not None:
            self.watch.observe(phase, (sender, receiver), sz, uniform, (senders, receivers), repeat, step_key)
            return None
        if deferred is None or generation != self._generation:  # settled on the way: entries gone
            return None
        return Replay(row, n_msgs * repeat, total * repeat, tuple(deferred), self._generation)

    def replay(self, booked: Replay) -> bool:
        """Add again what a static :meth:`record` call added (``False``: no longer possible, record it)."""
        if booked.generation != self._generation or self.watch is not None:
            return False
        row = booked.row
        row[0] += booked.messages
        row[1] += booked.payload
        for entry, added in booked.deferred:
            entry[2] += added
        return True

    @property
    def client_sent(self) -> np.ndarray:
        """Bytes each client id sent (an array over the client id space)."""
        self._settle()
        return self._totals[0]

    @property
    def client_received(self) -> np.ndarray:
        """Bytes each client id received."""
        self._settle()
        return self._totals[1]

    def _settle(self) -> None:
        """Count the deferred messages into the per-client totals."""
        deferred, self._deferred = self._deferred, {}
        self._generation = next(_GENERATIONS)
        for (side, _, _), (ids, sz, times) in deferred.items():
            if times:
                totals = self._totals[side]
                if sz is None:  # equal sizes: ``times`` is the bytes per message summed
                    totals += self._per_client(ids, None, times, len(totals))
                else:  # static sizes: ``times`` is how often they were recorded
                    totals += self._per_client(ids, sz, None, len(totals)) * times

    def _size_stats(self, sz: np.ndarray) -> tuple[int, int, int, int]:
        """Messages, total, smallest and largest size (remembered for a read-only size array)."""
        hit = self._stats.get(id(sz)) if not sz.flags.writeable else None
        if hit is not None and hit[0] is sz:
            return hit[1]
        n = len(sz)
        stats = (n, int(sz.sum()), int(sz.min()) if n else 0, int(sz.max()) if n else 0)
        if not sz.flags.writeable:
            if len(self._stats) >= 256:
                self._stats.clear()
            self._stats[id(sz)] = (sz, stats)
        return stats

    def rows(self) -> list[LedgerRow]:
        """One row per (phase, sender, receiver), in first-recorded order."""
        return [LedgerRow(p, s, r, m, b) for (p, s, r), (m, b) in self._rows.items()]

    def total_bytes(self, phase: str | None = None) -> int:
        """All payload bytes (of one phase, if given)."""
        return sum(r.payload_bytes for r in self.rows() if phase is None or r.phase == phase)

    def total_messages(self, phase: str | None = None) -> int:
        """All messages (of one phase, if given)."""
        return sum(r.messages for r in self.rows() if phase is None or r.phase == phase)

    def bytes_between(self, sender: str, receiver: str, phase: str | None = None) -> int:
        """Payload bytes from role ``sender`` to role ``receiver``."""
        return sum(
            r.payload_bytes
            for r in self.rows()
            if r.sender == sender and r.receiver == receiver and (phase is None or r.phase == phase)
        )

    def merge(self, other: Ledger) -> None:
        """Add another ledger's counts into this one."""
        for (p, s, r), (m, b) in other._rows.items():
            row = self._rows[(p, s, r)]
            row[0] += m
            row[1] += b
        if other.n_clients:
            self.client_sent[: other.n_clients] += other.client_sent
            self.client_received[: other.n_clients] += other.client_received

    def state_dict(self) -> dict[str, object]:
        """Exact counts, for checkpoints."""
        return {
            "rows": {"|".join(k): list(v) for k, v in self._rows.items()},
            "client_sent": self.client_sent.copy(),
            "client_received": self.client_received.copy(),
        }

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Restore the counts saved by :meth:`state_dict`."""
        rows = state["rows"]
        assert isinstance(rows, dict)
        self._rows.clear()
        self._generation = next(_GENERATIONS)
        for key, (m, b) in rows.items():
            p, s, r = key.split("|")
            self._rows[(p, s, r)] = [int(m), int(b)]
        self._deferred.clear()
        self._totals = (
            np.asarray(state["client_sent"], dtype=np.int64).copy(),
            np.asarray(state["client_received"], dtype=np.int64).copy(),
        )

    def charge_crypto(self, client_ids: np.ndarray, seconds: float) -> None:
        """Split ``seconds`` of AEAD work evenly over the messages of ``client_ids`` (one id a message)."""
        ids = np.asarray(client_ids, dtype=np.int64)
        hit = self._crypto_counts.get(id(ids))
        if hit is None or hit[0] is not ids:  # a static route's read-only ids are counted once
            kept = ids[(ids >= 0) & (ids < self.n_clients)]
            hit = (ids, np.bincount(kept, minlength=self.n_clients), len(kept))
            if not ids.flags.writeable and len(self._crypto_counts) < 256:
                self._crypto_counts[id(ids)] = hit
        if not hit[2]:
            return
        if self._crypto_counts.get(id(ids)) is hit:  # a static array (kept by the cache): summed until read
            self._crypto_pending.setdefault(id(ids), [hit, 0.0])[1] += seconds
        else:  # one bincount, not an unbuffered add per message
            self._crypto += hit[1] * (seconds / hit[2])

    @property
    def client_crypto_seconds(self) -> np.ndarray:
        """Seconds each client id spent sealing and opening (``real`` mode; measured, not checkpointed)."""
        for hit, seconds in self._crypto_pending.values():
            self._crypto += hit[1] * (seconds / hit[2])
        self._crypto_pending.clear()
        return self._crypto

    def per_client_cost(self, epochs: int = 1) -> dict[str, dict[str, float]]:
        """What one client sends, receives and both, per epoch: mean, p50, p99 and max over clients.

        The counts are the run's totals divided by ``epochs``; every client is counted, so in a
        round-based protocol a client that was not sampled in a round pays nothing for it.
        ``crypto_seconds`` is the CPU time spent sealing and opening its messages (``real`` crypto mode
        only; zero in ``accounted`` mode). This is
        the cost a user choosing a protocol reads: what one phone pays.
        """
        if epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {epochs}")
        out: dict[str, dict[str, float]] = {}
        for name, counts in (
            ("sent", self.client_sent),
            ("received", self.client_received),
            ("total", self.client_sent + self.client_received),
            ("crypto_seconds", self.client_crypto_seconds),
        ):
            per = counts.astype(np.float64) / epochs
            out[name] = (
                {
                    "mean": float(per.mean()),
                    "p50": float(np.percentile(per, 50)),
                    "p99": float(np.percentile(per, 99)),
                    "max": float(per.max()),
                }
                if self.n_clients
                else {"mean": 0.0, "p50": 0.0, "p99": 0.0, "max": 0.0}
            )
        return out

    def to_dict(self) -> dict[str, object]:
        """JSON-ready summary: rows, totals and per-client statistics."""
        per_client = self.client_sent + self.client_received
        return {
            "rows": [asdict(r) for r in self.rows()],
            "total_bytes": self.total_bytes(),
            "total_messages": self.total_messages(),
            "per_client_bytes": {
                "mean": float(per_client.mean()) if self.n_clients else 0.0,
                "median": float(np.median(per_client)) if self.n_clients else 0.0,
                "max": int(per_client.max()) if self.n_clients else 0,
            },
        }

    def save(self, folder: str | Path) -> None:
        """Write ``ledger.csv`` (rows) and ``ledger.json`` (summary) into ``folder``."""
        folder = Path(folder)
        with (folder / "ledger.csv").open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["phase", "sender", "receiver", "messages", "payload_bytes"])
            for r in self.rows():
                w.writerow([r.phase, r.sender, r.receiver, r.messages, r.payload_bytes])
        (folder / "ledger.json").write_text(json.dumps(self.to_dict(), indent=2) + "\n")


def read_saved(folder: str | Path) -> dict[str, Any] | None:
    """What :meth:`Ledger.save` wrote: ``ledger.json`` plus ``rows`` from ``ledger.csv`` (``None``: none)."""
    folder = Path(folder)
    summary_file, rows_file = folder / "ledger.json", folder / "ledger.csv"
    if not summary_file.exists():
        return None
    ledger: dict[str, Any] = json.loads(summary_file.read_text())
    if rows_file.exists():
        lines = rows_file.read_text().splitlines()
        header = lines[0].split(",") if lines else []
        ledger["rows"] = [
            {k: int(v) if v.isdigit() else v for k, v in zip(header, line.split(","), strict=True)}
            for line in lines[1:]
            if line
        ]
    return ledger


def _int64_vector(sizes: np.ndarray | Sequence[int] | int) -> np.ndarray:
    """``sizes`` as a one-dimensional int64 array (as it is, when it already is one)."""
    if type(sizes) is np.ndarray and sizes.ndim == 1 and sizes.dtype == np.int64:
        return sizes
    return np.atleast_1d(np.asarray(sizes, dtype=np.int64))
