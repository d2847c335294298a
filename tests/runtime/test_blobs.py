"""Packed blobs are the same messages as a list of byte strings, everywhere a blobs part is read.

LP-GCN's negative requests travel as :class:`~fedgraphrec.runtime.blobs.PackedBlobs` (one buffer
and its offsets) instead of one ``bytes`` object per client. Whatever reads a blobs part — indexing,
iteration, the ledger's sizes, the server's join, a relay's selection, the batch sealing, the
Flower codec — must see exactly the messages a list would give, and offsets that do not cut the
buffer into consecutive pieces are refused.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.runtime.batching import open_batch, seal_batch
from fedgraphrec.runtime.blobs import PackedBlobs, blob_lengths, joined_blobs
from fedgraphrec.runtime.flower.parts import decode_message, encode_message
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part
from fedgraphrec.runtime.sealing import Binding, GroupChannel

BLOBS = st.lists(st.binary(max_size=40), max_size=12)


def packed(blobs: list[bytes]) -> PackedBlobs:
    bounds = np.concatenate([[0], np.cumsum([len(b) for b in blobs], dtype=np.int64)])
    return PackedBlobs(b"".join(blobs), bounds)


@settings(max_examples=80, deadline=None)
@given(BLOBS)
def test_packed_blobs_read_as_the_list_they_pack(blobs: list[bytes]) -> None:
    p = packed(blobs)
    assert len(p) == len(blobs)
    assert list(p) == blobs and p == blobs
    assert [p[k] for k in range(len(blobs))] == blobs
    assert [p[-k] for k in range(1, len(blobs) + 1)] == [blobs[-k] for k in range(1, len(blobs) + 1)]
    assert p[1::2] == blobs[1::2]
    assert blob_lengths(p).tolist() == blob_lengths(blobs).tolist() == [len(b) for b in blobs]
    assert joined_blobs(p) == joined_blobs(blobs) == b"".join(blobs)
    with pytest.raises(IndexError):
        p[len(blobs)]


@pytest.mark.parametrize(
    "bounds",
    [[], [1, 6], [0, 5], [0, 7], [0, 4, 3, 6], [0, 3, 9, 6]],
    ids=["empty", "late start", "short end", "long end", "falling", "past the end"],
)
def test_bounds_that_do_not_cut_the_buffer_are_refused(bounds: list[int]) -> None:
    with pytest.raises(ValueError, match="blob bounds"):
        PackedBlobs(b"abcdef", np.array(bounds, dtype=np.int64))


def test_a_packed_part_books_relays_and_crosses_flower_as_its_list_does() -> None:
    blobs = [b"a" * 16, b"", b"b" * 32, b"c" * 16]
    senders = np.array([3, 5, 8, 9], dtype=np.int64)

    def part(value: list[bytes] | PackedBlobs) -> Part:
        return Part(
            "loss/negative-requests", "item_token", "client", "server", value, shape="blobs",
            protection="pseudonymous", senders=senders,
        )  # fmt: skip

    lists, packs = part(blobs), part(packed(blobs))
    assert packs.sizes().tolist() == lists.sizes().tolist() == [16, 0, 32, 16]
    pick, to = np.array([2, 0]), np.array([7, 7])
    assert list(packs.forward(pick, to).value) == list(lists.forward(pick, to).value) == [blobs[2], blobs[0]]
    for part in (lists, packs):
        _, got = decode_message(encode_message(Message({"negatives": part}), {"stage": "t"}))
        assert list(got["negatives"].value) == blobs
        assert got["negatives"].senders.tolist() == senders.tolist()


def test_a_sealed_batch_of_packed_blobs_opens_to_the_same_messages() -> None:
    blobs = [b"x" * 5, b"yy", b"", b"z" * 9]
    channel = GroupChannel(SharedKey.generate(), "lpgcn")
    binding = Binding("lpgcn", "test/blobs", 3)
    part = Part("test/blobs", "token", "client", "server", packed(blobs), shape="blobs",
                protection="sealed", senders=np.arange(4, dtype=np.int64), seal_to_role="client")  # fmt: skip
    sealed = seal_batch(channel, binding, part)
    opened = open_batch(channel, binding, sealed, "server")
    assert list(opened.value) == blobs
