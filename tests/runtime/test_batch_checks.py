"""A batched part's sender and receiver checks, remembered per static route, still reject any change.

The receiving endpoint remembers a batch header that passed the checks with the read-only id arrays
it was checked against (:func:`fedgraphrec.runtime.batching.open_batch`); the next batch is accepted
on that memory only when its header bytes and its delivered arrays are the very same.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.runtime.batching import open_batch, seal_batch
from fedgraphrec.runtime.part import Part
from fedgraphrec.runtime.sealing import Binding, GroupChannel

CHAN = GroupChannel(SharedKey.generate(), "lpgcn")


def _read_only(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.int64)
    a.flags.writeable = False
    return a


def _relayed(senders: list[int], pick: np.ndarray, to: np.ndarray, step: int) -> Part:
    """A node's sealed rows, batched, then relayed by the server along the route ``pick -> to``."""
    rows = torch.arange(len(senders) * 2, dtype=torch.float64).reshape(-1, 2) + step
    up = Part("fwd", "user_embedding", "client", "server", rows, protection="sealed",
              senders=np.array(senders), seal_to_role="conv-client")  # fmt: skip
    batch = seal_batch(CHAN, Binding("lpgcn", "fwd", step), up)
    return batch.forward(pick, to, "conv-client", senders=_read_only(np.array(senders)[pick]))


def test_a_remembered_route_is_reused_only_for_the_same_header_and_arrays() -> None:
    pick, to = _read_only(np.array([0, 1, 2, 0])), _read_only(np.array([7, 7, 8, 8]))
    memo: dict[object, object] = {}
    first = _relayed([3, 4, 5], pick, to, step=1)
    got = open_batch(CHAN, Binding("lpgcn", "fwd", 1), first, "conv-client on this node", memo)
    assert memo and torch.equal(got.rows(), torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [1.0, 2.0]]))
    # the next step, the same route: the same arrays, the same header, accepted on the memory
    again = replace(_relayed([3, 4, 5], pick, to, step=2), senders=first.senders)
    assert torch.equal(
        open_batch(CHAN, Binding("lpgcn", "fwd", 2), again, "conv-client on this node", memo).rows(),
        got.rows() + 1,
    )
    # other senders sealed inside, delivered with the very arrays remembered: the header differs
    other = replace(_relayed([3, 9, 5], pick, to, step=3), senders=first.senders)
    with pytest.raises(IntegrityError, match="labelled with another sender"):
        open_batch(CHAN, Binding("lpgcn", "fwd", 3), other, "conv-client on this node", memo)
    # the same header, but the server names another sender (a new array): checked in full
    relabelled = replace(_relayed([3, 4, 5], pick, to, step=4), senders=np.array([3, 4, 5, 4]))
    with pytest.raises(IntegrityError, match="labelled with another sender"):
        open_batch(CHAN, Binding("lpgcn", "fwd", 4), relabelled, "conv-client on this node", memo)
    # the same header and arrays, but the remembered array was made writable and changed
    first.senders.flags.writeable = True
    first.senders[3] = 4
    tampered = replace(_relayed([3, 4, 5], pick, to, step=5), senders=first.senders)
    with pytest.raises(IntegrityError, match="labelled with another sender"):
        open_batch(CHAN, Binding("lpgcn", "fwd", 5), tampered, "conv-client on this node", memo)


def test_a_batch_delivered_whole_and_in_order_is_the_sealed_table_and_any_other_a_view() -> None:
    """Every message as sealed: the opened part is the decrypted table itself (no row view)."""
    chan = GroupChannel(SharedKey.generate(), "lpgcn")  # its own key usage: step 1 again
    rows = torch.arange(12, dtype=torch.float64).reshape(6, 2)
    counts = np.array([1, 3, 2])
    up = Part("grads", "item_gradient", "client", "server", rows, protection="sealed",
              senders=np.array([4, 5, 6]), counts=counts, seal_to_role="conv-client",
              seal_to=np.array([1, 2, 1]))  # fmt: skip
    batch = seal_batch(chan, Binding("lpgcn", "grads", 1), up)
    whole = batch.forward(np.array([0, 1, 2]), np.array([1, 2, 1]), "conv-client")
    got = open_batch(chan, Binding("lpgcn", "grads", 1), whole, "conv-client on this node")
    assert got.index is None and torch.equal(got.rows(), rows) and np.array_equal(got.counts, counts)
    # another order, or fewer messages: a view naming the delivered messages' rows
    swapped = batch.forward(np.array([2, 0, 1]), np.array([1, 1, 2]), "conv-client")
    got = open_batch(chan, Binding("lpgcn", "grads", 1), swapped, "conv-client on this node")
    assert got.index is not None and torch.equal(got.rows(), rows[[4, 5, 0, 1, 2, 3]])
    some = batch.forward(np.array([0, 2]), np.array([1, 1]), "conv-client")
    got = open_batch(chan, Binding("lpgcn", "grads", 1), some, "conv-client on this node")
    assert torch.equal(got.rows(), rows[[0, 4, 5]]) and np.array_equal(got.counts, [1, 2])
