"""Shamir sharing and secure aggregation's client and server state machines (Bonawitz et al.).

Whole secure sums (dropouts, aborts, exact sums, byte counts) run over the transport in
``tests/protocols/test_secagg_rounds.py``; here the cryptographic state machines are driven by hand.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from fedgraphrec.crypto.errors import DecryptionError
from fedgraphrec.crypto.secagg.client import SecAggClient
from fedgraphrec.crypto.secagg.server import SecAggServer
from fedgraphrec.crypto.secagg.wire import (
    ADVERTISE_BYTES,
    ID_BYTES,
    SHARE_MESSAGE_BYTES,
    UNMASK_ENTRY_BYTES,
    SecAggAbortError,
)
from fedgraphrec.crypto.shamir import LIMBS, PRIME, recover, share_from_bytes, share_secrets, share_to_bytes

SECRET_A = bytes(range(32))
SECRET_B = bytes([255] * 32)


def _inputs(n: int, length: int, seed: int = 0, start: int = 0) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {start + 5 * u: rng.integers(0, 2**64, length, dtype=np.uint64) for u in range(n)}


def _ring_sum(values: list[np.ndarray]) -> np.ndarray:
    return np.sum(np.stack(values), axis=0, dtype=np.uint64)


# --- Shamir -------------------------------------------------------------------------------------------


class TestShamir:
    def test_any_threshold_subset_recovers(self) -> None:
        xs = np.arange(1, 11)
        shares = share_secrets([SECRET_A, SECRET_B], 4, xs)
        assert shares.shape == (2, 10, LIMBS) and (shares >= 0).all() and (shares < PRIME).all()
        rng = np.random.default_rng(2)
        for _ in range(10):
            pick = rng.choice(10, size=int(rng.integers(4, 11)), replace=False)
            assert recover(xs[pick], shares[0, pick]) == SECRET_A
            assert recover(xs[pick], shares[1, pick]) == SECRET_B

    def test_below_threshold_gives_garbage_or_error(self) -> None:
        xs = np.arange(1, 8)
        shares = share_secrets([SECRET_A], 5, xs)
        for _ in range(5):
            with contextlib.suppress(ValueError):  # garbage either fails to decode or differs
                assert recover(xs[:4], shares[0, :4]) != SECRET_A

    def test_fewer_than_threshold_shares_are_uniform(self) -> None:
        """With t = 3, a single share of a fixed secret is uniform over the field (per limb)."""
        shares = np.stack([share_secrets([SECRET_A], 3, [7, 9, 11])[0, 0] for _ in range(4000)])
        top = (shares >> 23).ravel()  # 8 top bits of each 31-bit element
        counts = np.bincount(top, minlength=256)
        expected = counts.sum() / 256
        assert ((counts - expected) ** 2 / expected).sum() < 400

    def test_bytes_round_trip_and_validation(self) -> None:
        share = share_secrets([SECRET_A], 2, [1, 2])[0, 0]
        assert (share_from_bytes(share_to_bytes(share)) == share).all()
        with pytest.raises(ValueError, match="36 bytes"):
            share_from_bytes(b"x")
        with pytest.raises(ValueError, match="distinct"):
            share_secrets([SECRET_A], 2, [1, 1])
        with pytest.raises(ValueError, match="threshold"):
            share_secrets([SECRET_A], 3, [1, 2])
        with pytest.raises(ValueError, match="32 bytes"):
            share_secrets([b"short"], 1, [1])


# --- secure aggregation -------------------------------------------------------------------------------


def _session(
    xs: dict[int, np.ndarray], threshold: int, before: tuple[int, ...] = (), label: bytes = b""
) -> tuple[dict[int, SecAggClient], SecAggServer, dict[int, dict[int, bytes]], tuple[int, ...]]:
    """Stages 0-2 by hand; clients in ``before`` do not upload. (clients, server, outgoing, U3)."""
    length = len(next(iter(xs.values())))
    clients = {u: SecAggClient(u, threshold, length, label) for u in sorted(xs)}
    server = SecAggServer(threshold, length, label)
    roster = server.collect_keys(c.advertise() for c in clients.values())
    outgoing = {u: c.share_keys(roster) for u, c in clients.items()}
    for v, msgs in server.route_shares(outgoing).items():
        clients[v].receive_shares(msgs)
    uploads = {u: clients[u].masked_input(xs[u], server.shared) for u in clients if u not in before}
    return clients, server, outgoing, server.collect_masked(uploads)


class TestSecureSum:
    def test_exact_ring_sum_with_clients_dropping_before_and_after_uploading(self) -> None:
        xs = _inputs(9, 40, seed=3)
        ids = sorted(xs)
        clients, server, _, survivors = _session(xs, 5, before=tuple(ids[:2]))
        total = server.unmask({u: clients[u].unmask(survivors, server.shared) for u in ids[4:]})
        assert (total == _ring_sum([xs[u] for u in ids[2:]])).all()  # ids[2:4] answered nothing: summed

    def test_server_aborts_below_the_threshold_at_each_stage(self) -> None:
        xs = _inputs(6, 8, seed=6)
        ids = sorted(xs)
        with pytest.raises(
            SecAggAbortError, match="masked-input: only 3 masked inputs arrived, below the threshold 4"
        ):
            _session(xs, 4, before=tuple(ids[:3]))
        clients, server, _, survivors = _session(xs, 4)
        with pytest.raises(SecAggAbortError, match="stage unmask: only 3 clients answered"):
            server.unmask({u: clients[u].unmask(survivors, server.shared) for u in ids[:3]})
        with pytest.raises(SecAggAbortError, match="advertise-keys"):
            SecAggServer(3, 4).collect_keys(SecAggClient(u, 3, 4).advertise() for u in (1, 2))

    def test_messages_have_the_wire_sizes(self) -> None:
        """The sizes the ledger books in ``accounted`` mode are those of the serialized messages."""
        xs = _inputs(5, 33, seed=7)
        clients, server, outgoing, survivors = _session(xs, 3)
        assert {len(c.advertise().to_bytes()) for c in clients.values()} == {ADVERTISE_BYTES}
        assert {len(m) for o in outgoing.values() for m in o.values()} == {SHARE_MESSAGE_BYTES}
        reveal = clients[survivors[0]].unmask(survivors, server.shared)
        assert {ID_BYTES + len(share) for share in reveal.values()} == {UNMASK_ENTRY_BYTES}

    def test_masked_uploads_look_uniform(self) -> None:
        """What the server receives from one client: uniform bytes, whatever the input."""
        length = 20_000
        zeros = {u: np.zeros(length, dtype=np.uint64) for u in range(4)}
        ones = {u: np.full(length, np.uint64(2**63 + 12345)) for u in range(4)}
        seen: list[np.ndarray] = []
        for xs in (zeros, ones):
            clients = {u: SecAggClient(u, 3, length, b"audit") for u in xs}
            server = SecAggServer(3, length, b"audit")
            roster = server.collect_keys(c.advertise() for c in clients.values())
            inbox = server.route_shares({u: c.share_keys(roster) for u, c in clients.items()})
            for v, msgs in inbox.items():
                clients[v].receive_shares(msgs)
            seen.append(clients[0].masked_input(xs[0], server.shared))
        for y in seen:
            counts = np.bincount(y.view(np.uint8), minlength=256)
            expected = counts.sum() / 256
            assert ((counts - expected) ** 2 / expected).sum() < 400
            top = np.bincount((y >> np.uint64(56)).astype(np.int64), minlength=256)
            assert ((top - length / 256) ** 2 / (length / 256)).sum() < 400
        assert np.corrcoef(seen[0].astype(float), seen[1].astype(float))[0, 1] < 0.05

    def test_tampered_share_is_rejected(self) -> None:
        clients = {u: SecAggClient(u, 2, 4) for u in range(3)}
        server = SecAggServer(2, 4)
        roster = server.collect_keys(c.advertise() for c in clients.values())
        inbox = server.route_shares({u: c.share_keys(roster) for u, c in clients.items()})
        msgs = dict(inbox[1])
        blob = bytearray(msgs[0])
        blob[-1] ^= 1
        msgs[0] = bytes(blob)
        with pytest.raises(DecryptionError):
            clients[1].receive_shares(msgs)

    def test_client_refuses_second_unmask(self) -> None:
        xs = _inputs(3, 4, seed=8, start=0)
        ids = sorted(xs)
        clients = {u: SecAggClient(u, 2, 4) for u in ids}
        server = SecAggServer(2, 4)
        roster = server.collect_keys(c.advertise() for c in clients.values())
        inbox = server.route_shares({u: c.share_keys(roster) for u, c in clients.items()})
        for v, msgs in inbox.items():
            clients[v].receive_shares(msgs)
        survivors = server.collect_masked({u: clients[u].masked_input(xs[u], server.shared) for u in ids})
        clients[ids[0]].unmask(survivors, server.shared)
        with pytest.raises(ValueError, match="already answered"):
            clients[ids[0]].unmask(survivors[:2], server.shared)


def test_shamir_coefficients_come_from_the_os_csprng_not_a_seed() -> None:
    """Seeding every generator identically cannot reproduce a sharing (the old rng argument could)."""
    import torch

    draws = []
    for _ in range(2):
        np.random.seed(0)
        torch.manual_seed(0)
        draws.append(share_secrets([SECRET_A], 3, [1, 2, 3]))
    assert not np.array_equal(draws[0], draws[1])
    with pytest.raises(TypeError):
        share_secrets([SECRET_A], 3, [1, 2, 3], np.random.default_rng(0))  # type: ignore[call-arg]


def test_client_survives_export_and_restore_between_every_stage() -> None:
    """A node that restarts between messages resumes each client from its exported state."""
    rng = np.random.default_rng(0)
    inputs = {u: rng.integers(0, 2**63, size=5, dtype=np.uint64) for u in (1, 4, 6)}
    server = SecAggServer(2, 5, b"s")

    def reload(cs: dict[int, SecAggClient]) -> dict[int, SecAggClient]:
        return {u: SecAggClient.restore(c.export_state()) for u, c in cs.items()}

    clients = reload({u: SecAggClient(u, 2, 5, b"s") for u in inputs})
    roster = server.collect_keys(c.advertise() for c in clients.values())
    clients = reload(clients)
    inbox = server.route_shares({u: c.share_keys(roster) for u, c in clients.items()})
    clients = reload(clients)
    for v, c in clients.items():
        c.receive_shares(inbox[v])
    clients = reload(clients)
    survivors = server.collect_masked({u: clients[u].masked_input(inputs[u], server.shared) for u in (1, 4)})
    clients = reload(clients)  # client 6 dropped before uploading: its pairwise masks are recovered
    total = server.unmask({u: clients[u].unmask(survivors, server.shared) for u in (1, 4)})
    assert np.array_equal(total, inputs[1] + inputs[4])
