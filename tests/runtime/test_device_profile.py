"""The per-device replay: one real AEAD per booked message, one key derivation per rotating step."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from fedgraphrec.crypto.aead import PayloadCipher
from fedgraphrec.crypto.errors import DecryptionError
from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.runtime.device_profile import DeviceWatch
from fedgraphrec.runtime.ledger import Ledger

OVERHEAD = 28


class Counting(PayloadCipher):
    """A real cipher that notes every seal and open it makes (plaintext sizes)."""

    calls: list[tuple[str, int]]
    purposes: list[str]

    def __init__(self, key: SharedKey, purpose: str) -> None:
        super().__init__(key, purpose=purpose)
        Counting.purposes.append(purpose)

    def encrypt(self, plaintext: bytes, aad: bytes = b"") -> bytes:
        Counting.calls.append(("seal", len(plaintext)))
        return super().encrypt(plaintext, aad)

    def decrypt(self, blob: bytes, aad: bytes = b"") -> bytes:
        out = super().decrypt(blob, aad)
        Counting.calls.append(("open", len(out)))
        return out


@pytest.fixture
def counting():
    Counting.calls, Counting.purposes = [], []
    return Counting


def _book(ledger: Ledger, clock: list[int]) -> None:
    """A mixed epoch: uniform counts, per-message sizes, relayed copies, repeats, two steps."""
    clock[0] = 0
    ledger.record("up", "client", "server", 100, senders=np.array([0, 1, 2, 3]), count=4, step_key=True)
    ledger.record("down", "server", "client", [60, 70, 60, 80, 90], receivers=np.array([1, 1, 2, 3, 1]),
                  step_key=True)  # fmt: skip
    clock[0] = 1
    ledger.record("up", "client", "server", [30, 31], senders=np.array([2, 1]), step_key=True)
    ledger.record("shares", "client", "server", [50, 50], senders=np.array([1, 3]), repeat=3)
    ledger.record("shares", "server", "client", 44, receivers=np.array([1, 1, 0]), count=3)
    ledger.record("tokens", "client", "server", 12, count=2)  # the server's side only: nobody's


def test_replay_seals_and_opens_exactly_what_the_ledger_booked(counting):
    ledger = Ledger(5)
    clock = [0]
    watch = DeviceWatch(ledger, [1, 3], "lpgcn", clock=lambda: clock[0], cipher=counting)
    assert counting.purposes == ["lpgcn/channel"]
    _book(ledger, clock)  # before the epoch (set-up): booked, not replayed
    watch.begin_epoch()
    _book(ledger, clock)
    rows = watch.end_epoch()
    # client 1 sent 100, 31 (keyed) and 3 x 50; received 60, 70, 90 (keyed) and 2 x 44
    # client 3 sent 100 (keyed) and 3 x 50; received 80 (keyed)
    seals = Counter(size for op, size in counting.calls if op == "seal")
    opens = Counter(size for op, size in counting.calls if op == "open")
    assert seals == Counter({100: 2, 31: 1, 50: 6})
    assert opens == Counter({60: 1, 70: 1, 90: 1, 44: 2, 80: 1})
    # one key derivation per step with a keyed message: client 1 at steps 0 and 1, client 3 at step 0
    assert sorted(counting.purposes[1:]) == [
        "lpgcn/payload/step=0",
        "lpgcn/payload/step=0",
        "lpgcn/payload/step=1",
    ]
    sent = ledger.client_sent[[1, 3]] // 2  # booked twice, once before the epoch
    received = ledger.client_received[[1, 3]] // 2
    assert rows[:, 0].tolist() == sent.tolist() == [281, 250]
    assert rows[:, 1].tolist() == received.tolist() == [308, 80]
    assert rows[:, 2].tolist() == [5, 4] and rows[:, 3].tolist() == [5, 1] and rows[:, 4].tolist() == [2, 1]
    assert watch.ledger_agrees
    report = watch.summary()
    assert report["devices"] == 2 and report["epochs_replayed"] == 1
    assert [c["bytes_not_replayed"] for c in report["clients"]] == [281 + 308, 250 + 80]
    assert report["bytes"]["total"]["max"] == 281 + 308


def test_messages_booked_outside_an_epoch_are_not_replayed(counting):
    ledger = Ledger(3)
    watch = DeviceWatch(ledger, [0], "fedmf", cipher=counting)
    watch.begin_epoch()
    watch.end_epoch()
    ledger.record("eval", "client", "server", 10, senders=np.array([0]), count=1)
    watch.begin_epoch()
    rows = watch.end_epoch()
    assert rows[0, :4].tolist() == [0, 0, 0, 0]
    assert [op for op, _ in counting.calls] == []
    assert watch.ledger_agrees and watch.summary()["clients"][0]["bytes_not_replayed"] == 10


def test_watch_refuses_clients_outside_the_ledger():
    with pytest.raises(ValueError, match="distinct ids"):
        DeviceWatch(Ledger(3), [0, 3], "lpgcn")
    with pytest.raises(ValueError, match="distinct ids"):
        DeviceWatch(Ledger(3), [1, 1], "lpgcn")


def test_replayed_messages_are_really_sealed_and_authenticated():
    """The replay's opens are real AEAD opens: a byte flipped in what arrives is rejected."""
    watch = DeviceWatch(Ledger(2), [0], "lpgcn")
    blob = watch._arrival("lpgcn/channel", b"x" * 40, b"ad")
    assert len(blob) == 40 + OVERHEAD
    assert watch._channel.decrypt(blob, b"ad") == b"x" * 40
    with pytest.raises(DecryptionError):
        watch._channel.decrypt(blob[:-1] + bytes([blob[-1] ^ 1]), b"ad")
