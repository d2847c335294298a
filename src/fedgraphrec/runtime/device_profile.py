"""Per-device cost, measured: a few sampled clients' own AEAD work replayed one message at a time.

The in-process simulator seals each :class:`~fedgraphrec.runtime.part.Part` as one AES-GCM message
when one node hosts every client (:mod:`fedgraphrec.runtime.batching`) and charges that time evenly
to the part's clients (:meth:`~fedgraphrec.runtime.ledger.Ledger.charge_crypto`): a fast path, and
the figure ``summary.json`` reports as ``per_client_per_epoch.crypto_seconds`` (*batched,
in-process*). A phone in a deployment instead makes one AEAD call per logical message it sends or
receives, and derives a fresh key at every step where the group key rotates
(:class:`~fedgraphrec.runtime.sealing.GroupChannel`). :class:`DeviceWatch` measures that:

* while attached to a :class:`~fedgraphrec.runtime.ledger.Ledger` (``ledger.watch``) it keeps, for
  each sampled client, how many messages of each size it sent and received, per step and phase,
  exactly as the ledger booked them (same sizes, ciphertext overhead included, ``repeat`` counted);
* at the end of each epoch (:meth:`DeviceWatch.end_epoch`) it replays every sampled client's messages
  as that device would: one real AES-256-GCM seal (a fresh random nonce, through
  :class:`~fedgraphrec.crypto.aead.PayloadCipher`) per message sent, one authenticated open per
  message received, and one HKDF-SHA256 sub-key derivation (plus the AES key schedule) per step in
  which the client used a per-step group key; messages not under the group key (plain, masked,
  tokens, homomorphic, a sub-protocol's own ciphertexts) are replayed under one channel key fixed
  for the run, standing for the AEAD of the channel that carries them.

What is **not** replayed: the client's local model compute (propagation, gradients, optimiser),
item tokens (HMAC), masking and secure-aggregation arithmetic, homomorphic and public-key
operations, the codec framing, the key agreement at set-up, and transport-layer encryption on top of
an already sealed message. Messages booked outside the replayed epochs (set-up before the first
epoch, federated evaluation, epochs of an earlier process on resume) are reported as
``bytes_not_replayed``. The replay runs after the epoch's training, so it never enters
``train_seconds`` and draws nothing from the run's random streams (keys and nonces come from the OS).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fedgraphrec.crypto.aead import PayloadCipher
from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.runtime.ledger import Ledger
from fedgraphrec.runtime.sealing import SERVER, Binding, party

__all__ = ["LABEL", "DeviceWatch", "device_stats"]

LABEL = "per device (replayed, one AEAD per message)"
"""How the terminal summary and ``summary.json`` name this figure (beside the batched one)."""

CipherFactory = Callable[[SharedKey, str], PayloadCipher]
"""Builds the cipher of one key purpose (a test passes a counting subclass)."""

# one logged entry: (direction 0 sent / 1 received, step, phase, role, step-keyed, size) -> count
_Key = tuple[int, int, str, str, bool, int]
_FIELDS = ("bytes_sent", "bytes_received", "messages_sent", "messages_received", "key_derivations",
           "aead_seconds", "kdf_seconds", "seconds")  # fmt: skip


class DeviceWatch:
    """Logs the sampled clients' messages from a ledger and replays them per epoch, one AEAD each.

    Args:
        ledger: the run's ledger (the watch attaches itself as ``ledger.watch``).
        clients: the sampled client ids (distinct, within the ledger's client id space).
        protocol: protocol name, bound into every replayed associated-data string and key label.
        clock: returns the protocol's current step (keys rotate per step); ``None``: one step.
        cipher: builds a :class:`PayloadCipher` for a key purpose (default: :class:`PayloadCipher`).

    Raises:
        ValueError: a client id is outside ``[0, ledger.n_clients)`` or repeated.
    """

    def __init__(
        self,
        ledger: Ledger,
        clients: Sequence[int],
        protocol: str,
        clock: Callable[[], int] | None = None,
        cipher: CipherFactory | None = None,
    ) -> None:
        ids = np.asarray(clients, dtype=np.int64)
        if len(np.unique(ids)) != len(ids) or (ids < 0).any() or (ids >= ledger.n_clients).any():
            raise ValueError(f"clients must be distinct ids in [0, {ledger.n_clients}), got {ids.tolist()}")
        self.ledger = ledger
        self.clients = ids
        self.protocol = protocol or "protocol"
        self._clock = clock or (lambda: 0)
        self._cipher: CipherFactory = cipher or (lambda key, purpose: PayloadCipher(key, purpose=purpose))
        self._slot = np.full(ledger.n_clients, -1, dtype=np.int64)
        self._slot[ids] = np.arange(len(ids))
        self._logs: list[dict[_Key, int]] = [{} for _ in ids]
        self._armed = False
        self._start = np.zeros((2, len(ids)), dtype=np.int64)
        self.epochs: list[np.ndarray] = []
        """One row per replayed epoch: per device, the :data:`_FIELDS` figures."""
        self.ledger_agrees = True
        """Whether every replayed epoch's bytes equal the ledger's per-client totals for that epoch."""
        self._key = SharedKey.generate()  # a replay key: the devices' real keys never leave them
        self._channel = self._cipher(self._key, f"{self.protocol}/channel")
        self._payloads: dict[int, bytes] = {}
        self._senders: dict[str, PayloadCipher] = {}
        warm = PayloadCipher(self._key, purpose="warm-up")  # first-call costs stay out of the timings
        warm.decrypt(warm.encrypt(b"warm-up"))
        ledger.watch = self

    # ------------------------------------------------------------------ logging (Ledger.record)
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
        """Log one booked batch: the messages the sampled clients sent (``ids[0]``) and received."""
        if not self._armed:
            return
        step = int(self._clock())
        for direction in (0, 1):
            who = ids[direction]
            if who is None:
                continue
            who = np.asarray(who, dtype=np.int64)
            hit = np.flatnonzero(self._slot[who] >= 0)
            if not len(hit):
                continue
            slots = self._slot[who[hit]]
            sz = np.full(len(hit), uniform, dtype=np.int64) if sizes is None else sizes[hit]
            pairs, counts = np.unique(np.stack([slots, sz]), axis=1, return_counts=True)
            role = roles[direction]
            for (slot, size), count in zip(pairs.T.tolist(), counts.tolist(), strict=True):
                log = self._logs[slot]
                key = (direction, step, phase, role, step_key, size)
                log[key] = log.get(key, 0) + count * repeat

    # ------------------------------------------------------------------ the epoch
    def begin_epoch(self) -> None:
        """Start logging (messages booked before this, e.g. set-up or evaluation, are not replayed)."""
        self._start = np.stack(
            [self.ledger.client_sent[self.clients], self.ledger.client_received[self.clients]]
        )
        self._armed = True

    def end_epoch(self) -> np.ndarray:
        """Stop logging, replay every sampled device's epoch and keep its figures (one row per device)."""
        self._armed = False
        rows = np.zeros((len(self.clients), len(_FIELDS)), dtype=np.float64)
        for slot, client in enumerate(self.clients.tolist()):
            rows[slot] = self._replay(client, self._logs[slot])
            self._logs[slot] = {}
        self._senders.clear()  # step keys never return
        booked = np.stack([self.ledger.client_sent[self.clients], self.ledger.client_received[self.clients]])
        delta = booked - self._start
        if not (np.array_equal(delta[0], rows[:, 0]) and np.array_equal(delta[1], rows[:, 1])):
            self.ledger_agrees = False
        self.epochs.append(rows)
        return rows

    def _payload(self, size: int) -> bytes:
        data = self._payloads.get(size)
        if data is None:
            data = self._payloads[size] = os.urandom(size)
        return data

    def _arrival(self, purpose: str, payload: bytes, aad: bytes) -> bytes:
        """A message as it arrives (sealed by its sender under the same key; not counted or timed)."""
        sender = self._senders.get(purpose)
        if sender is None:
            sender = self._senders[purpose] = PayloadCipher(self._key, purpose=purpose)
        return sender.encrypt(payload, aad)

    def _replay(self, client: int, log: dict[_Key, int]) -> np.ndarray:
        """One device's epoch: seal what it sent, open what it received, derive each step's key."""
        out = np.zeros(len(_FIELDS), dtype=np.float64)
        aead = kdf = 0.0
        keyed_steps = sorted({k[1] for k in log if k[4]})
        step_ciphers: dict[int, PayloadCipher] = {}
        for step in keyed_steps:  # one key per step where the group key rotates (GroupChannel)
            t0 = time.perf_counter()
            step_ciphers[step] = self._cipher(self._key, f"{self.protocol}/payload/step={step}")
            kdf += time.perf_counter() - t0
        for (direction, step, phase, role, keyed, size), count in sorted(log.items()):
            cipher = step_ciphers[step] if keyed else self._channel
            me = party(role, client)
            aad = Binding(self.protocol, phase, step).aad(me, SERVER) if direction == 0 else (
                Binding(self.protocol, phase, step).aad(SERVER, me))  # fmt: skip
            payload = self._payload(size)
            if direction == 0:
                t0 = time.perf_counter()
                for _ in range(count):
                    cipher.encrypt(payload, aad)
                aead += time.perf_counter() - t0
            else:
                purpose = f"{self.protocol}/payload/step={step}" if keyed else f"{self.protocol}/channel"
                blob = self._arrival(purpose, payload, aad)  # the sender's work, not this device's
                t0 = time.perf_counter()
                for _ in range(count):
                    cipher.decrypt(blob, aad)
                aead += time.perf_counter() - t0
            out[direction] += size * count
            out[2 + direction] += count
        out[4] = len(keyed_steps)
        out[5], out[6], out[7] = aead, kdf, aead + kdf
        return out

    # ------------------------------------------------------------------ the report
    def summary(self) -> dict[str, Any]:
        """``summary.json``'s ``communication.per_device``: per-epoch figures over the sampled devices."""
        return device_stats(self)


def _stats(values: np.ndarray) -> dict[str, float]:
    if not len(values):
        return {"mean": 0.0, "p50": 0.0, "p99": 0.0, "max": 0.0}
    return {
        "mean": float(values.mean()),
        "p50": float(np.percentile(values, 50)),
        "p99": float(np.percentile(values, 99)),
        "max": float(values.max()),
    }


def device_stats(watch: DeviceWatch) -> dict[str, Any]:
    """The per-device report of ``watch``: mean per replayed epoch, then mean/p50/p99/max over devices."""
    n_epochs = len(watch.epochs)
    per = (
        np.mean(np.stack(watch.epochs), axis=0) if n_epochs else np.zeros((len(watch.clients), len(_FIELDS)))
    )
    col = {name: per[:, k] for k, name in enumerate(_FIELDS)}
    replayed = np.sum(np.stack(watch.epochs), axis=0) if n_epochs else np.zeros_like(per)
    booked = watch.ledger.client_sent[watch.clients] + watch.ledger.client_received[watch.clients]
    outside = booked - (replayed[:, 0] + replayed[:, 1]).astype(np.int64)
    return {
        "label": LABEL,
        "replayed": "one AES-256-GCM seal per message sent and one open per message received (sizes as "
        "booked), one HKDF-SHA256 key derivation per step under a rotating group key",
        "not_replayed": "local model compute, item tokens, masking and secure-aggregation arithmetic, "
        "homomorphic and public-key operations, codec framing, set-up key agreement, TLS",
        "batched_figure": "per_client_per_epoch.crypto_seconds: the in-process batched seal's time split "
        "evenly over each part's clients",
        "devices": len(watch.clients),
        "epochs_replayed": n_epochs,
        "ledger_agrees": watch.ledger_agrees,
        "bytes": {
            "sent": _stats(col["bytes_sent"]),
            "received": _stats(col["bytes_received"]),
            "total": _stats(col["bytes_sent"] + col["bytes_received"]),
        },
        "messages": {
            "sent": _stats(col["messages_sent"]),
            "received": _stats(col["messages_received"]),
        },
        "key_derivations": _stats(col["key_derivations"]),
        "seconds": {
            "aead": _stats(col["aead_seconds"]),
            "kdf": _stats(col["kdf_seconds"]),
            "total": _stats(col["seconds"]),
        },
        "clients": [
            {
                "client": int(c),
                **{name: float(per[k, j]) for j, name in enumerate(_FIELDS)},
                "bytes_not_replayed": int(outside[k]),
            }
            for k, c in enumerate(watch.clients.tolist())
        ],
    }
