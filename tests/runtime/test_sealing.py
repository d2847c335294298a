"""Sealed messages are bound to protocol, phase, step, sender and receiver; receivers check it."""

from __future__ import annotations

import pytest

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.runtime.network import Network
from fedgraphrec.runtime.sealing import Binding, GroupChannel, multicast, party_names

KEY = SharedKey.generate()
FROM = party_names("client", [0, 1])
TO = party_names("client", [2, 3])


def _sealed(step: int = 5, phase: str = "p") -> tuple[GroupChannel, Binding, list[bytes]]:
    chan = GroupChannel(KEY, "lpgcn")
    b = Binding("lpgcn", phase, step)
    return chan, b, chan.seal(b, [b"row-a", b"row-b"], b.aads(FROM, TO))


def test_the_expected_binding_opens() -> None:
    chan, b, blobs = _sealed()
    assert chan.open(b, blobs, b.aads(FROM, TO), FROM, TO) == [b"row-a", b"row-b"]


@pytest.mark.parametrize(
    ("what", "binding", "senders", "receivers"),
    [
        ("replayed at the next step", Binding("lpgcn", "p", 6), FROM, TO),
        ("another phase", Binding("lpgcn", "q", 5), FROM, TO),
        ("another protocol", Binding("gnn4fr", "p", 5), FROM, TO),
        ("re-routed to another receiver", Binding("lpgcn", "p", 5), FROM, TO[::-1]),
        ("claimed by another sender", Binding("lpgcn", "p", 5), FROM[::-1], TO),
        ("bound to a multicast instead", Binding("lpgcn", "p", 5), FROM, [multicast("client")] * 2),
    ],
)
def test_any_other_binding_is_rejected(
    what: str, binding: Binding, senders: list[str], receivers: list[str]
) -> None:
    chan, _, blobs = _sealed()
    chan = GroupChannel(KEY, binding.protocol)
    with pytest.raises(IntegrityError, match="failed authentication"):
        chan.open(binding, blobs, binding.aads(senders, receivers), senders, receivers)


def test_keys_rotate_every_step() -> None:
    """A step-5 message with its own associated data still fails under step 6's key."""
    chan, b, blobs = _sealed(step=5)
    with pytest.raises(IntegrityError):
        chan.open(Binding("lpgcn", "p", 6), blobs, b.aads(FROM, TO), FROM, TO)


def test_a_flipped_byte_a_truncation_and_a_drop_are_rejected_by_name() -> None:
    chan, b, blobs = _sealed()
    flipped = bytearray(blobs[1])
    flipped[-1] ^= 1
    with pytest.raises(IntegrityError, match=r"lpgcn p \(step 5\): the message from client:1 to client:3"):
        chan.open(b, [blobs[0], bytes(flipped)], b.aads(FROM, TO), FROM, TO)
    with pytest.raises(IntegrityError, match="truncated"):
        chan.open(b, [blobs[0], blobs[1][:10]], b.aads(FROM, TO), FROM, TO)
    with pytest.raises(IntegrityError, match="never arrived"):
        chan.open(b, [blobs[0], None], b.aads(FROM, TO), FROM, TO)


def test_equal_plaintexts_give_unrelated_ciphertexts() -> None:
    chan, b, _ = _sealed()
    one, two = chan.seal(b, [b"same", b"same"], b.aads(FROM, TO))
    assert one != two and len(one) == len(two) == 12 + 4 + 16


def test_network_seal_and_open_bind_the_current_step() -> None:
    net = Network(4, "real", protocol="t")
    net.use_group_key(KEY)
    net.begin_step(0)
    blobs = net.seal("p", [b"x"], ["client:0"], ["client:1"])
    assert blobs is not None
    assert net.open("p", blobs, ["client:0"], ["client:1"]) == [b"x"]
    net.begin_step(1)
    with pytest.raises(IntegrityError, match=r"t p \(step 1\)"):
        net.open("p", blobs, ["client:0"], ["client:1"])
    assert Network(4, "accounted").seal("p", [b"x"], ["a"], ["b"]) is None


def test_sealing_and_opening_time_is_charged_to_the_clients_that_did_it() -> None:
    net = Network(4, "real", protocol="t")
    net.use_group_key(KEY)
    net.begin_step(0)
    blobs = net.seal("p", [b"x" * 4096] * 50, ["client:0"] * 50, ["client:1"] * 50)
    assert blobs is not None
    net.open("p", blobs, ["client:0"] * 50, ["client:1"] * 50)
    net.seal("p", [b"y"], ["server"], ["holder-of-item:2"])  # not a client: charged to nobody
    spent = net.ledger.client_crypto_seconds
    assert spent[0] > 0 and spent[1] > 0 and spent[2] == spent[3] == 0.0
    cost = net.ledger.per_client_cost(epochs=1)["crypto_seconds"]
    assert cost["max"] == max(spent[0], spent[1])
    assert Network(4, "accounted").ledger.per_client_cost()["crypto_seconds"]["max"] == 0.0


def test_opening_into_a_writable_buffer_checks_exactly_what_open_checks() -> None:
    """``open_writable`` (batched rows decoded in place) gives the same plaintext and the same refusals."""
    chan, b, blobs = _sealed()
    aads = b.aads(FROM, TO)
    plain = chan.open_writable(b, blobs[1], aads[1], FROM[1], TO[1])
    assert isinstance(plain, bytearray) and plain == b"row-b"
    flipped = bytearray(blobs[1])
    flipped[-1] ^= 1
    with pytest.raises(IntegrityError, match=r"lpgcn p \(step 5\): the message from client:1 to client:3"):
        chan.open_writable(b, bytes(flipped), aads[1], FROM[1], TO[1])
    with pytest.raises(IntegrityError, match="failed authentication"):  # re-routed
        chan.open_writable(b, blobs[1], aads[0], FROM[1], TO[1])
    with pytest.raises(IntegrityError, match="truncated"):
        chan.open_writable(b, blobs[1][:10], aads[1], FROM[1], TO[1])
    with pytest.raises(IntegrityError, match="never arrived"):
        chan.open_writable(b, None, aads[1], FROM[1], TO[1])


def test_sealing_into_one_buffer_frames_the_message_as_seal_does() -> None:
    """``seal_into`` (a batch's one ciphertext) is ``nonce ‖ ciphertext ‖ tag`` under the step key.

    Both openers accept it, only with its own binding; each call draws a fresh nonce; the key's
    message count is charged as for :meth:`GroupChannel.seal`.
    """
    chan = GroupChannel(KEY, "lpgcn")
    b = Binding("lpgcn", "p", 5)
    aad = b.aad(FROM[0], TO[0])
    one, two = chan.seal_into(b, b"row-a", aad), chan.seal_into(b, b"row-a", aad)
    assert isinstance(one, bytearray) and len(one) == len(chan.seal(b, [b"row-a"], [aad])[0])
    assert one[:12] != two[:12] and one[12:] != two[12:]
    assert chan.open(b, [one], [aad], FROM[:1], TO[:1]) == [b"row-a"]
    assert chan.open_writable(b, one, aad, FROM[0], TO[0]) == b"row-a"
    assert chan.usage.sealed == 3
    with pytest.raises(IntegrityError, match="failed authentication"):  # another step's key
        chan.open(Binding("lpgcn", "p", 6), [one], [aad], FROM[:1], TO[:1])
    with pytest.raises(IntegrityError, match="failed authentication"):  # re-routed
        chan.open_writable(b, one, b.aad(FROM[0], TO[1]), FROM[0], TO[0])
