"""The LP-GCN client's shortcuts give the whole-table numbers, and skip no check they should not.

- :meth:`product` over only the non-zero rows (the first backward layer) equals the whole product;
- training without the debug hook (layer L's user rows for the minibatch's users only) follows the
  oracle step by step, on one node and on three;
- a relay route is checked again whenever it is not the very read-only route checked before: a
  server that re-routes neighbour rows after a clean step is still caught;
- the relayed table stands for the node's neighbour rows as it is only for the very read-only
  index found in order before; another index, or that one made writable and changed, is looked at.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.training.sampler import BPRSampler
from tests.helpers import random_train, rel_err
from tests.protocols.lpgcn_world import oracle, world

RTOL = 1e-10


@pytest.mark.parametrize("name", ["R", "A"])
def test_product_over_the_nonzero_rows_equals_the_whole_product(name):
    train = random_train(n_users=30, n_items=40, density=0.2, seed=3)
    model = oracle(train, plus=False, n_layers=2)
    w = world(train, dict(model.named_parameters()), 1, n_layers=2)
    program = next(iter(w.programs.values()))
    n_rows = int(program.operator(name).shape[1])
    gen = torch.Generator().manual_seed(0)
    rows = np.sort(np.random.default_rng(1).choice(n_rows, size=n_rows // 4, replace=False))
    x = torch.zeros((n_rows, 4), dtype=torch.float64)
    x[torch.from_numpy(rows)] = torch.randn((len(rows), 4), generator=gen, dtype=torch.float64)
    whole = program.operator(name) @ x
    assert rel_err(program.product(name, x, rows), whole) <= 1e-14
    assert torch.equal(program.product(name, x, None), whole)
    # rows must cover every non-zero row: leaving one out changes the result
    assert rel_err(program.product(name, x, rows[1:]), whole) > 1e-6


@pytest.mark.parametrize("nodes", [1, 3])
def test_training_without_the_debug_hook_follows_the_oracle(nodes):
    train = random_train(n_users=40, n_items=30, density=0.15, seed=9)
    model = oracle(train, plus=False, n_layers=3)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    w = world(train, dict(model.named_parameters()), nodes, n_layers=3, alpha=2)
    for users, pos, neg in BPRSampler(train, seed=2).batches(0, 12):
        out = model.batch_loss(users, pos, neg, reg_weight=0.01)
        opt.zero_grad()
        out.total.backward()
        loss = w.step(users, pos, neg)
        opt.step()
        assert abs(loss - out.total.item()) <= RTOL * abs(out.total.item())
        for name, table in w.tables().items():
            assert rel_err(table, getattr(model, name).detach()) <= RTOL, name


def test_a_route_changed_after_a_clean_step_is_still_rejected():
    train = random_train(n_users=24, n_items=20, density=0.25, seed=4)
    model = oracle(train, plus=False, n_layers=2)
    w = world(train, dict(model.named_parameters()), 1, n_layers=2)
    batches = BPRSampler(train, seed=0).batches(0, 10)
    w.step(*next(batches))  # the route is checked (and remembered) here
    route = w.server._route

    def swapped(part, pick, to):  # two neighbours' rows exchanged on their way
        good = route(part, pick, to)
        senders = np.array(good.senders)
        senders[[0, 1]] = senders[[1, 0]]
        index = None if good.index is None else good.index[[1, 0, *range(2, len(good.index))]]
        return dataclasses.replace(good, senders=senders, index=index)

    w.server._route = swapped
    with pytest.raises(IntegrityError, match="unexpected sender"):
        w.step(*next(batches))


def test_the_relayed_table_is_taken_whole_only_for_the_very_read_only_index_checked():
    train = random_train(n_users=24, n_items=20, density=0.25, seed=4)
    model = oracle(train, plus=False, n_layers=2)
    program = next(iter(world(train, dict(model.named_parameters()), 1, n_layers=2).programs.values()))
    nb_user = program.state.nb_user
    n = len(np.unique(nb_user))
    index = np.searchsorted(np.unique(nb_user), nb_user)  # each routing pair's row: its sender's
    index.flags.writeable = False
    assert program._local_rows_whole(index, n) and program._local_rows_whole(index, n)
    assert not program._local_rows_whole(index, n + 1)  # another table: looked at again
    swapped = index.copy()
    first = program._placement()[0]
    swapped[first[:2]] = swapped[first[[1, 0]]]  # two neighbours' rows exchanged
    swapped.flags.writeable = False
    assert not program._local_rows_whole(swapped, n)
    assert program._local_rows_whole(index, n)
    index.flags.writeable = True  # the remembered array changed in place: looked at again
    index[first[:2]] = index[first[[1, 0]]]
    assert not program._local_rows_whole(index, n)


def test_token_lookup_on_the_first_bytes_confirms_the_whole_token():
    from fedgraphrec.protocols.lpgcn.holdings import TokenIndex

    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 256, (50, 16), dtype=np.uint8)
    index = TokenIndex(tokens)
    forged = tokens[[4, 9]].copy()
    forged[:, 12] ^= 1  # the same first 8 bytes as two known tokens, another token all the same
    assert index.find(tokens[[9, 4, 49]]).tolist() == [9, 4, 49]
    assert index.find(forged).tolist() == [-1, -1]
    shared = tokens.copy()
    shared[7, :8] = shared[3, :8]  # two tokens alike in their first 8 bytes: the whole-key search
    assert TokenIndex(shared).find(shared[[3, 7, 8]]).tolist() == [3, 7, 8]
    del vars(index)["_by_head"]  # as restored from a checkpoint written before the hash existed
    assert index.find(tokens[[9, 4, 49]]).tolist() == [9, 4, 49]
    assert index.find(forged).tolist() == [-1, -1]
