import numpy as np
import pytest
import torch

from fedgraphrec.runtime.codec import CodecError, decode_tensor, encode_tensor, encoded_size
from fedgraphrec.runtime.ledger import Ledger
from fedgraphrec.runtime.network import Network


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.int64, torch.int32, torch.uint8, torch.bool]
)
@pytest.mark.parametrize("shape", [(), (3,), (2, 5), (0, 4)])
def test_codec_round_trip_and_size(dtype, shape):
    t = (torch.arange(int(np.prod(shape))) % 3).reshape(shape).to(dtype)
    data = encode_tensor(t)
    assert len(data) == encoded_size(tuple(shape), dtype)
    back = decode_tensor(data)
    assert back.dtype == dtype and back.shape == t.shape and torch.equal(back, t)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bool])
def test_codec_decodes_in_place_from_a_writable_buffer_and_copies_otherwise(dtype):
    """``copy=False`` keeps a fresh decryption's buffer as the tensor's memory (no second copy)."""
    t = (torch.arange(12) % 3).reshape(3, 4).to(dtype)
    buf = bytearray(b"header" + encode_tensor(t))  # 6 bytes: the data stays aligned
    data = len(buf) - t.numel() * t.element_size()
    shared = decode_tensor(memoryview(buf)[6:], copy=False)
    assert torch.equal(shared, t)
    shared.zero_()  # the tensor is the buffer
    assert not any(buf[data:])
    copied = decode_tensor(memoryview(buf)[6:])
    copied.fill_(1)  # a copy: the buffer keeps its zeros
    assert not any(buf[data:])


def test_codec_rejects_malformed_payloads():
    data = encode_tensor(torch.ones(2, 3))
    with pytest.raises(CodecError, match="does not match"):
        decode_tensor(data[:-1])
    with pytest.raises(CodecError, match="dtype code"):
        decode_tensor(b"\x63\x00")
    with pytest.raises(TypeError, match="unsupported dtype"):
        encode_tensor(torch.ones(2, dtype=torch.complex64))


def test_ledger_rows_totals_and_per_client():
    led = Ledger(n_clients=4)
    led.record("up", "client", "server", [10, 20, 30], senders=np.array([0, 1, 1]))
    led.record("down", "server", "client", 5, receivers=np.array([3]))
    led.record("up", "client", "server", [1], senders=np.array([2]))
    rows = {(r.phase, r.sender, r.receiver): (r.messages, r.payload_bytes) for r in led.rows()}
    assert rows == {("up", "client", "server"): (4, 61), ("down", "server", "client"): (1, 5)}
    assert led.total_bytes() == 66 and led.total_messages() == 5
    assert led.client_sent.tolist() == [10, 50, 1, 0]
    assert led.client_received.tolist() == [0, 0, 0, 5]
    assert led.bytes_between("client", "server") == 61
    with pytest.raises(ValueError, match="client ids"):
        led.record("up", "client", "server", [1, 2], senders=np.array([0]))


def test_per_client_cost_per_epoch():
    led = Ledger(n_clients=4)
    led.record("up", "client", "server", [10, 20, 30], senders=np.array([0, 1, 1]))
    led.record("down", "server", "client", 8, receivers=np.array([3]))
    cost = led.per_client_cost(epochs=2)  # sent per client [10, 50, 0, 0] over two epochs
    assert cost["sent"] == {"mean": 7.5, "p50": 2.5, "p99": pytest.approx(24.4), "max": 25.0}
    assert cost["received"]["max"] == 4.0 and cost["total"]["mean"] == pytest.approx((60 + 8) / 4 / 2)
    with pytest.raises(ValueError, match="epochs"):
        led.per_client_cost(0)


def test_ledger_save(tmp_path):
    led = Ledger(2)
    led.record("p", "a", "b", [3, 4])
    led.save(tmp_path)
    assert (tmp_path / "ledger.csv").read_text().splitlines()[1] == "p,a,b,2,7"
    assert '"total_bytes": 7' in (tmp_path / "ledger.json").read_text()


def test_network_refuses_an_unknown_crypto_mode():
    with pytest.raises(ValueError, match="crypto mode"):
        Network(1, crypto="fake")  # type: ignore[arg-type]


def test_row_codec_matches_tensor_codec_and_rejects_foreign_payloads():
    from fedgraphrec.runtime.codec import decode_rows, encode_rows

    rows = torch.arange(12, dtype=torch.float64).reshape(4, 3)
    payloads = encode_rows(rows)
    assert payloads == [encode_tensor(rows[k : k + 1]) for k in range(4)]
    assert torch.equal(decode_rows(payloads, 3, torch.float64), rows)
    with pytest.raises(CodecError):
        decode_rows([encode_tensor(torch.ones(1, 3))], 3, torch.float64)  # float32 header
    with pytest.raises(CodecError):
        decode_rows([payloads[0][:-1]], 3, torch.float64)


def test_ledger_defers_static_ids_without_changing_any_total():
    """Equal-size messages of a read-only id array are counted when read, exactly as if counted at once."""
    static = np.array([0, 2, 2, 3])
    static.flags.writeable = False
    layout = np.array([3, 5, 5, 8])  # a static layout's sizes (read-only, as Part.sizes gives them)
    layout.flags.writeable = False
    changing = np.array([1, 1, 3, 0])
    eager, lazy = Ledger(n_clients=4), Ledger(n_clients=4)
    for step in range(3):
        for led, ids, sizes in ((eager, static.copy(), layout.copy()), (lazy, static, layout)):
            led.record("p", "client", "server", 10 + step, senders=ids, count=4, repeat=2)
            led.record("q", "server", "client", [1, 2, 3, 4], receivers=changing)
            led.record("r", "server", "client", 7, receivers=ids, count=4)
            led.record("s", "client", "server", sizes, senders=ids, repeat=1 + step)
    assert lazy.client_sent.tolist() == eager.client_sent.tolist() == [66 + 18, 0, 132 + 60, 66 + 48]
    assert lazy.client_received.tolist() == eager.client_received.tolist()
    assert lazy.rows() == eager.rows()
    saved = lazy.state_dict()
    lazy.record("p", "client", "server", 5, senders=static, count=4)  # deferred, then replaced by the load
    lazy.load_state_dict(saved)
    assert lazy.client_sent.tolist() == eager.client_sent.tolist()
    merged = Ledger(n_clients=4)
    merged.record("p", "client", "server", 1, senders=static, count=4)
    merged.merge(lazy)
    assert merged.client_sent.tolist() == (eager.client_sent + np.bincount(static, minlength=4)).tolist()


def test_a_replayed_static_record_adds_exactly_what_recording_it_again_adds():
    """``Ledger.replay`` re-adds a static record's row and deferred counts; stale or watched ones refuse."""
    static = np.array([0, 2, 2, 3])
    static.flags.writeable = False
    layout = np.array([3, 5, 5, 8])
    layout.flags.writeable = False
    recorded, replayed = Ledger(n_clients=4), Ledger(n_clients=4)
    calls = [
        (("p", "client", "server", 10), {"senders": static, "count": 4, "repeat": 2}),
        (("s", "client", "server", layout), {"senders": static, "receivers": static}),
        (("r", "server", "client", 7), {"receivers": static, "count": 4}),
    ]
    booked = [replayed.record(*args, **kw) for args, kw in calls]
    assert all(b is not None for b in booked)
    for _ in range(3):
        for args, kw in calls:
            recorded.record(*args, **kw)
    for _ in range(2):
        assert all(replayed.replay(b) for b in booked if b is not None)
    assert replayed.rows() == recorded.rows()
    assert replayed.client_sent.tolist() == recorded.client_sent.tolist()  # reading settles the counts
    assert replayed.client_received.tolist() == recorded.client_received.tolist()
    assert not any(replayed.replay(b) for b in booked if b is not None)  # settled: record them again
    first, other = Ledger(n_clients=4), Ledger(n_clients=4)  # a replay belongs to its own ledger
    theirs = first.record(*calls[0][0], **calls[0][1])
    assert theirs is not None and not other.replay(theirs) and other.rows() == []
    # counted at once (writable ids or sizes) or seen by a watch: nothing to replay
    assert replayed.record("q", "server", "client", [1, 2, 3, 4], receivers=static) is None
    assert replayed.record("q", "server", "client", 4, receivers=np.array([1, 1, 3, 0]), count=4) is None
    fresh = replayed.record(*calls[0][0], **calls[0][1])
    assert fresh is not None
    replayed.watch = _NoWatch()
    assert not replayed.replay(fresh)
    assert replayed.record(*calls[0][0], **calls[0][1]) is None


class _NoWatch:
    def observe(self, *args: object) -> None:
        pass


def test_crypto_seconds_of_static_ids_are_summed_until_read():
    static = np.array([0, 1, 1, 5])  # 5 is outside the client space: not charged
    static.flags.writeable = False
    led = Ledger(n_clients=3)
    led.charge_crypto(static, 3.0)
    led.charge_crypto(np.array([2, 2]), 1.0)
    led.charge_crypto(static, 6.0)
    np.testing.assert_allclose(led.client_crypto_seconds, [3.0, 6.0, 1.0])
    led.charge_crypto(static, 3.0)
    np.testing.assert_allclose(led.per_client_cost()["crypto_seconds"]["max"], 8.0)
