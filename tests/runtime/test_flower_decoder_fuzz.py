"""Property tests of the Flower record decoder: round trips, and hostile bytes are refused, never cast.

(i) For random valid parts (rows, broadcast, blobs; plain values or sealed ciphertexts in transit,
some carried by several messages; with counts, senders, receivers, sealing names, sizes and meta)
``decode(encode(m))`` equals ``m``.
(ii) For random mutations of an encoded record (truncated, extended or flipped array bytes, a
relabelled dtype or shape, a re-typed array, a row dropped or added, changed counts, metadata fields
dropped, added or re-typed, records dropped or added), decoding either raises the documented
:class:`~fedgraphrec.runtime.flower.checks.RecordError` or decodes to exactly the mutated record:
re-encoding the result gives the mutated record back (nothing was cast, reshaped or ignored).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedgraphrec.runtime.flower.checks import RecordError
from fedgraphrec.runtime.flower.parts import decode_message, encode_message
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DTYPES = [np.float32, np.float64, np.int64, np.int32, np.uint8, np.bool_]


@st.composite
def parts(draw: st.DrawFn) -> Part:
    """A valid part as a node or the server would put it on the wire."""
    shape = draw(st.sampled_from(["rows", "broadcast", "blobs"]))
    n = draw(st.integers(0, 4))
    sealed_in_transit = shape != "broadcast" and draw(st.booleans())
    ids = st.lists(st.integers(0, 50), min_size=n, max_size=n).map(lambda v: np.array(v, dtype=np.int64))
    counts = (
        draw(st.none() | st.lists(st.integers(0, 3), min_size=n, max_size=n)) if shape == "rows" else None
    )
    counts_arr = None if counts is None else np.array(counts, dtype=np.int64)
    value: Any = None
    sealed = None
    if sealed_in_transit:
        sealed = draw(st.lists(st.none() | st.binary(min_size=0, max_size=40), min_size=n, max_size=n))
        if n and draw(st.booleans()):  # a ciphertext fanned out to several receivers: one object
            sealed = [sealed[k] for k in draw(st.lists(st.integers(0, n - 1), min_size=n, max_size=n))]
    elif shape == "blobs":
        value = draw(st.lists(st.binary(max_size=20), min_size=n, max_size=n))
    else:
        rows = n if shape == "rows" and counts is None else sum(counts or []) if shape == "rows" else 2
        width = draw(st.integers(1, 3))
        dtype = draw(st.sampled_from(DTYPES))
        arr = (np.arange(rows * width) % 7).astype(dtype).reshape(rows, width)
        value = torch.from_numpy(arr) if draw(st.booleans()) and dtype != np.uint8 else arr
    senders = draw(st.none() | ids) if shape != "broadcast" or n else None
    receivers = draw(ids)
    seal_to = draw(st.none() | ids) if sealed_in_transit else None
    bound = [f"client:{k}" for k in range(n)] if sealed_in_transit and draw(st.booleans()) else None
    part = Part(
        phase=draw(st.sampled_from(["train/forward/0", "setup/keys", "p"])),
        kind=draw(st.sampled_from(["user_embedding", "share"])),
        sender_role="server",
        receiver_role="client",
        value=value,
        shape=shape,  # type: ignore[arg-type]
        protection="sealed" if sealed_in_transit else draw(st.sampled_from(["plain", "masked"])),
        senders=senders if sealed_in_transit or senders is not None else None,
        receivers=receivers,
        counts=counts_arr,
        seal_to_role="client" if sealed_in_transit else "",
        seal_to=seal_to,
        from_role="client",
        bound_senders=bound,
        sealed=sealed,
        meta=draw(st.dictionaries(st.sampled_from(["a", "b"]), st.integers(-5, 5) | st.text(max_size=3))),
    )
    if draw(st.booleans()):
        part = part.with_sizes(np.arange(n, dtype=np.int64))
    return part


def _same_part(a: Part, b: Part) -> None:
    for name in ("phase", "kind", "sender_role", "receiver_role", "shape", "protection", "seal_to_role",
                 "from_role", "bound_senders", "sealed", "presealed", "repeat", "summed", "meta"):  # fmt: skip
        assert getattr(a, name) == getattr(b, name), name
    for name in ("senders", "receivers", "counts", "seal_to", "_sizes"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.dtype == y.dtype == np.int64 and np.array_equal(x, y), name
    if a.shape == "blobs" or a.value is None:
        assert a.value == b.value
    else:
        assert type(a.value) is type(b.value)
        x, y = np.asarray(a.rows()), np.asarray(b.rows())
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)


@FAST
@given(st.lists(parts(), max_size=3))
def test_round_trip_is_identity(items: list[Part]) -> None:
    message = Message({f"m{k}": p for k, p in enumerate(items)}, {"ks": [5, 10], "x": None})
    header, back = decode_message(encode_message(message, {"stage": "s", "step": 3, "protocol": "p"}))
    assert header == {"stage": "s", "step": 3, "protocol": "p"} and back.fields == message.fields
    assert list(back.parts) == list(message.parts)
    for name, part in message.parts.items():
        _same_part(part, back.parts[name])


# ---------------------------------------------------------------------------- mutations
def _arr(a: Array) -> tuple[str, tuple[int, ...], bytes]:
    x = a.numpy()
    return str(x.dtype), tuple(x.shape), x.tobytes()


def _canon(content: RecordDict) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, rec in content.config_records.items():
        out[k] = {f: (json.loads(v) if f == "meta" else v) for f, v in rec.items()}
    for k, rec in content.array_records.items():
        out[k] = {f: _arr(a) for f, a in rec.items()}
    return out


def _copy(content: RecordDict) -> RecordDict:
    out = RecordDict()
    for k, c in content.config_records.items():
        out[k] = ConfigRecord(dict(c.items()))
    for k, a in content.array_records.items():
        out[k] = ArrayRecord(
            {f: Array(x.dtype, tuple(x.shape), x.stype, bytes(x.data)) for f, x in a.items()}
        )
    return out


def _mutate(content: RecordDict, data: st.DataObject) -> None:
    """One random hostile change to ``content`` (in place)."""
    arrays = [(k, f) for k, rec in content.array_records.items() for f in rec]
    metas = [k for k in content.config_records if k.startswith("p.")]
    kinds = ["record"] + (["array"] * 4 if arrays else []) + (["meta"] * 2 if metas else [])
    kind = data.draw(st.sampled_from(kinds))
    if kind == "array":
        k, f = data.draw(st.sampled_from(arrays))
        a = content.array_records[k][f]
        try:
            x = a.numpy()
        except Exception:  # an earlier mutation broke it: byte-level changes only
            x = np.zeros(0, dtype=np.int8)
        op = data.draw(st.sampled_from(["truncate", "extend", "flip", "dtype", "shape", "view", "cast",
                                        "drop_row", "add_row", "bump"]))  # fmt: skip
        raw = bytes(a.data)
        if op == "truncate" and raw:
            new = Array(a.dtype, tuple(a.shape), a.stype, raw[: data.draw(st.integers(0, len(raw) - 1))])
        elif op == "extend":
            new = Array(a.dtype, tuple(a.shape), a.stype, raw + data.draw(st.binary(min_size=1, max_size=9)))
        elif op == "flip" and raw:
            at = data.draw(st.integers(0, len(raw) - 1))
            new = Array(a.dtype, tuple(a.shape), a.stype, raw[:at] + bytes([raw[at] ^ 0xFF]) + raw[at + 1 :])
        elif op == "dtype":
            new = Array(data.draw(st.sampled_from(["float32", "int32", "int64", "<U3", "object"])),
                        tuple(a.shape), a.stype, raw)  # fmt: skip
        elif op == "shape":
            new = Array(a.dtype, (*tuple(a.shape), 1) if data.draw(st.booleans()) else (), a.stype, raw)
        elif op == "view" and x.size and x.dtype.itemsize in (4, 8):
            new = Array(np.ascontiguousarray(x).view(np.float32 if x.dtype.itemsize == 4 else np.float64))
        elif op == "cast":
            new = Array(x.astype(data.draw(st.sampled_from([np.int32, np.float64, np.uint8, np.int64]))))
        elif op == "drop_row" and x.ndim and len(x):
            new = Array(np.ascontiguousarray(x[:-1]))
        elif op == "add_row" and x.ndim and len(x):
            new = Array(np.ascontiguousarray(np.concatenate([x, x[-1:]])))
        elif op == "bump" and x.ndim == 1 and len(x) and x.dtype == np.int64:
            y = x.copy()
            y[data.draw(st.integers(0, len(y) - 1))] += data.draw(st.sampled_from([-3, -1, 1, 2]))
            new = Array(y)
        else:
            new = Array(np.zeros(0, dtype=np.int64))
        content.array_records[k][f] = new
    elif kind == "meta":
        rec = content.config_records[data.draw(st.sampled_from(metas))]
        field = data.draw(st.sampled_from([*sorted(rec.keys()), "extra"]))
        op = data.draw(st.sampled_from(["drop", "int", "str", "bool", "swap"]))
        if op == "drop" and field in rec:
            del rec[field]
        else:
            swaps = {
                "shape": "rows",
                "value_type": "torch",
                "protection": "sealed",
                "repeat": 0,
                "meta": "[1]",
            }
            rec[field] = {"int": 7, "str": "x", "bool": True}.get(op, swaps.get(field, -1))
    else:
        op = data.draw(st.sampled_from(["drop", "add", "names"]))
        if op == "drop":
            keys = list(content.config_records) + list(content.array_records)
            del content[data.draw(st.sampled_from(keys))]
        elif op == "add":
            content[data.draw(st.sampled_from(["p.9", "a.9", "a.0x"]))] = ConfigRecord({"x": 1})
        elif "parts" in content.config_records:  # an earlier mutation may have dropped the record
            names = list(content.config_records["parts"]["names"])  # type: ignore[arg-type]
            content.config_records["parts"]["names"] = names + names[:1] if names else ["ghost"]


@FAST
@given(st.lists(parts(), min_size=1, max_size=2), st.data())
def test_mutated_records_are_refused_or_decoded_exactly(items: list[Part], data: st.DataObject) -> None:
    message = Message({f"m{k}": p for k, p in enumerate(items)})
    content = _copy(encode_message(message, {"stage": "s", "step": 1}))
    for _ in range(data.draw(st.integers(1, 2))):
        _mutate(content, data)
    try:
        header, back = decode_message(content)
    except RecordError as exc:
        assert "flower record" in str(exc)
        return
    again = _copy(encode_message(back, header))
    assert _canon(again) == _canon(content), "a mutated record decoded to something else (a cast?)"


def test_a_part_with_one_row_too_few_is_refused() -> None:
    """The defect of the issue: ``n - 1`` rows for ``n`` messages must not reach training."""
    rows = torch.arange(8, dtype=torch.float32).reshape(4, 2)
    part = Part("train/sync", "user_embedding", "server", "client", rows, receivers=np.arange(4))
    content = _copy(encode_message(Message({"rows": part}), {"stage": "s", "step": 1}))
    content.array_records["a.0"]["value"] = Array(rows[:3].numpy())
    with pytest.raises(RecordError, match=r"phase 'train/sync'.*field 'rows'|field 'receivers'"):
        decode_message(content)


def test_booleans_hold_only_zero_and_one() -> None:
    """A boolean with another byte is not a boolean: refused in a record and in a sealed payload."""
    from fedgraphrec.runtime.codec import CodecError, decode_tensor, encode_tensor

    blob = bytearray(encode_tensor(torch.tensor([True, False])))
    blob[-1] = 2
    with pytest.raises(CodecError, match="boolean"):
        decode_tensor(bytes(blob))
    part = Part("p/b", "mask", "server", "client", np.array([True, False]), receivers=np.arange(2))
    content = _copy(encode_message(Message({"b": part}), {"stage": "s", "step": 1}))
    content.array_records["a.0"]["value"] = Array(np.array([1, 2], dtype=np.uint8).view(np.bool_))
    with pytest.raises(RecordError, match="field 'value'"):
        decode_message(content)


def _fanned_out(blobs: list[bytes | None], at: list[int]) -> Part:
    """A relayed sealed part: message ``k`` carries ciphertext ``blobs[at[k]]`` (the same object)."""
    n = len(at)
    return Part(
        "train/forward/1", "user_embedding", "server", "conv-client", shape="rows", protection="sealed",
        senders=np.array(at, dtype=np.int64), receivers=np.arange(n), seal_to_role="conv-client",
        sealed=[blobs[k] for k in at],
    )  # fmt: skip


def test_a_ciphertext_fanned_out_to_several_receivers_travels_once() -> None:
    """A user's row relayed to three convolution-clients on one node: one copy of its bytes."""
    rows = [bytes([k]) * 50 for k in range(2)]
    part = _fanned_out(rows, [0, 0, 1, 0, 1, 1])
    content = encode_message(Message({"rows": part}), {"stage": "s", "step": 1})
    arrays = content.array_records["a.0"]
    assert arrays["sealed"].numpy().size == 100 and arrays["sealed_index"].numpy().tolist() == [
        0,
        0,
        1,
        0,
        1,
        1,
    ]
    _, back = decode_message(_copy(content))
    assert back["rows"].sealed == part.sealed
    copies = replace(part, sealed=[bytes(bytearray(b)) for b in part.sealed or []])  # six objects
    arrays = encode_message(Message({"rows": copies}), {"stage": "s", "step": 1}).array_records["a.0"]
    assert arrays["sealed"].numpy().size == 300 and "sealed_index" not in arrays


@pytest.mark.parametrize(
    ("index", "lengths", "reported"),
    [
        ([0, 1, 1], [4, 4, 4], "no ciphertext repeats"),
        ([0, 1, 3, 1], [4, 4, 4], "points at ciphertext 3"),
        ([0, 2, 1, 1], [4, 4, 4], "in order"),
        ([0, 0, 0, 1], [4, 4, 4], "in order"),
        ([0, 1, 1, 0], [-1, 4], "dropped ciphertext"),
    ],
)
def test_a_ciphertext_index_not_in_the_encoders_form_is_refused(
    index: list[int], lengths: list[int], reported: str
) -> None:
    part = _fanned_out([b"abcd", b"efgh"], [0, 1, 1, 0])
    content = _copy(encode_message(Message({"rows": part}), {"stage": "s", "step": 1}))
    arrays = content.array_records["a.0"]
    arrays["sealed_index"] = Array(np.array(index, dtype=np.int64))
    arrays["sealed_lengths"] = Array(np.array(lengths, dtype=np.int64))
    arrays["sealed"] = Array(np.zeros(int(np.clip(lengths, 0, None).sum()), dtype=np.uint8))
    arrays["senders"] = Array(np.zeros(len(index), dtype=np.int64))
    arrays["receivers"] = Array(np.arange(len(index), dtype=np.int64))
    with pytest.raises(RecordError, match=rf"field 'sealed_index': .*{reported}"):
        decode_message(content)
