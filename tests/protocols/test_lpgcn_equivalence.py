"""LP-GCN's party programs equal centralized LightGCN / LightGCN+ step by step (float64).

For every minibatch: the loss, every layer's user and item embeddings (convolution-items' copies,
through the programs' debug hook), the layer-0 gradients and the parameters after each Adam step
equal the oracle's within 1e-10 relative, on one node and on three, in both crypto modes.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedgraphrec.models.propagation import propagate_layers
from fedgraphrec.training.sampler import BPRSampler
from tests.helpers import random_train, rel_err
from tests.protocols.lpgcn_world import oracle, world

RTOL = 1e-10


def _held_items(w) -> np.ndarray:  # type: ignore[no-untyped-def]
    return np.concatenate([p.state.conv_items for p in w.programs.values()])


@pytest.mark.parametrize(
    ("crypto", "alpha", "n_layers", "nodes"),
    [
        ("accounted", 0, 2, 1),
        ("real", 5, 3, 1),
        ("accounted", 5, 0, 1),
        ("accounted", 5, 3, 3),
        ("real", 2, 2, 3),
    ],
)
def test_lightgcn_backbone_matches_the_oracle_step_by_step(crypto, alpha, n_layers, nodes):
    train = random_train(n_users=15, n_items=19, density=0.25, seed=11)
    model = oracle(train, plus=False, n_layers=n_layers)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    w = world(train, dict(model.named_parameters()), nodes, n_layers=n_layers, alpha=alpha, crypto=crypto)
    held = torch.from_numpy(_held_items(w))
    steps = 0
    for epoch in range(2):
        for users, pos, neg in BPRSampler(train, seed=4).batches(epoch, 9):
            us, vs = propagate_layers(model.graph, model.user_emb, model.item_emb, n_layers)
            out = model.batch_loss(users, pos, neg, reg_weight=0.01)
            opt.zero_grad()
            out.total.backward()
            w.reset_debug()
            loss = w.step(users, pos, neg)
            assert abs(loss - out.total.item()) <= RTOL * abs(out.total.item())
            for name, ref in (("user_layers", us), ("conv_layers", vs)):
                got = w.recorded(name, ref[0].shape[0])
                assert len(got) == n_layers + 1
                for layer, (a, b) in enumerate(zip(got, ref, strict=True)):
                    rows = slice(None) if name == "user_layers" else held
                    assert rel_err(a[rows], b.detach()[rows]) <= RTOL, (name, layer)
            assert rel_err(w.recorded("user_grad", 15)[0], model.user_emb.grad) <= RTOL
            assert rel_err(w.recorded("conv_grad", 19)[0][held], model.item_emb.grad[held]) <= RTOL
            opt.step()
            for name, table in w.tables().items():
                assert rel_err(table, getattr(model, name).detach()) <= RTOL, name
            steps += 1
    assert steps >= 4
    U, V = w.embeddings()
    U_ref, V_ref = model.frozen_embeddings()
    assert rel_err(U, U_ref) <= RTOL and rel_err(V, V_ref) <= RTOL


@pytest.mark.parametrize(
    ("crypto", "alpha", "n_layers", "nodes"), [("accounted", 0, 2, 1), ("real", 5, 3, 3)]
)
def test_lightgcn_plus_backbone_matches_the_oracle_with_the_lossless_w_gradient(
    crypto, alpha, n_layers, nodes
):
    train = random_train(n_users=15, n_items=19, density=0.25, seed=12)
    model = oracle(train, plus=True, n_layers=n_layers, seed=5)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    w = world(train, dict(model.named_parameters()), nodes, model="lightgcn+", n_layers=n_layers, alpha=alpha,
              crypto=crypto)  # fmt: skip
    held = torch.from_numpy(_held_items(w))
    for users, pos, neg in BPRSampler(train, seed=4).batches(0, 9):
        us, vs = propagate_layers(model.graph, model.user0(), model.item_emb, n_layers)
        out = model.batch_loss(users, pos, neg, reg_weight=0.01)
        opt.zero_grad()
        out.total.backward()
        w.reset_debug()
        loss = w.step(users, pos, neg)
        assert abs(loss - out.total.item()) <= RTOL * abs(out.total.item())
        for a, b in zip(w.recorded("user_layers", 15), us, strict=True):
            assert rel_err(a, b.detach()) <= RTOL
        for a, b in zip(w.recorded("conv_layers", 19), vs, strict=True):
            assert rel_err(a[held], b.detach()[held]) <= RTOL
        assert rel_err(w.recorded("conv_w_grad", 19)[0][held], model.item_w.grad[held]) <= RTOL
        opt.step()
        for name, table in w.tables().items():
            assert rel_err(table, getattr(model, name).detach()) <= RTOL, name


def test_three_nodes_equal_one_node_in_numbers_and_ledger():
    """Sharding changes who computes what, not a number and not a byte of the ledger."""
    train = random_train(n_users=20, n_items=24, density=0.2, seed=7)
    model = oracle(train, plus=False, n_layers=2)
    runs = {n: world(train, dict(model.named_parameters()), n, n_layers=2, alpha=3) for n in (1, 3)}
    for users, pos, neg in BPRSampler(train, seed=1).batches(0, 8):
        losses = {n: r.step(users, pos, neg) for n, r in runs.items()}
        assert abs(losses[1] - losses[3]) <= RTOL * abs(losses[1])
    t1, t3 = runs[1].tables(), runs[3].tables()
    for name in t1:
        assert rel_err(t3[name], t1[name]) <= RTOL
    (U1, V1), (U3, V3) = runs[1].embeddings(), runs[3].embeddings()
    assert rel_err(U3, U1) <= RTOL and rel_err(V3, V1) <= RTOL
    rows = {n: [(r.phase, r.sender, r.receiver, r.messages, r.payload_bytes) for r in run.net.ledger.rows()]
            for n, run in runs.items()}  # fmt: skip
    assert sorted(rows[1]) == sorted(rows[3])
    np.testing.assert_array_equal(runs[1].net.ledger.client_sent, runs[3].net.ledger.client_sent)
    np.testing.assert_array_equal(runs[1].net.ledger.client_received, runs[3].net.ledger.client_received)


def test_real_and_accounted_modes_give_identical_numbers_and_ledgers():
    train = random_train(n_users=12, n_items=14, density=0.3, seed=5)
    model = oracle(train, plus=False, n_layers=2, seed=0)
    runs = {m: world(train, dict(model.named_parameters()), 1, n_layers=2, alpha=3, seed=1, crypto=m)
            for m in ("real", "accounted")}  # fmt: skip
    for users, pos, neg in BPRSampler(train, seed=0).batches(0, 8):
        losses = {m: r.step(users, pos, neg) for m, r in runs.items()}
        assert losses["real"] == losses["accounted"]
    tables = {m: r.tables() for m, r in runs.items()}
    for name in tables["real"]:
        assert torch.equal(tables["real"][name], tables["accounted"][name])
    rows = {m: [(r.phase, r.sender, r.receiver, r.messages, r.payload_bytes) for r in run.net.ledger.rows()]
            for m, run in runs.items()}  # fmt: skip
    assert rows["real"] == rows["accounted"]
    np.testing.assert_array_equal(
        runs["real"].net.ledger.client_sent, runs["accounted"].net.ledger.client_sent
    )


def test_accounted_row_sizes_follow_the_codec():
    from fedgraphrec.runtime.codec import encoded_size

    train = random_train(n_users=6, n_items=7, density=0.4, seed=1)
    for dtype in (torch.float32, torch.float64):
        tables = {"user_emb": torch.zeros(6, 5, dtype=dtype), "item_emb": torch.zeros(7, 5, dtype=dtype)}
        w = world(train, tables, 1, n_layers=1)
        w.step(*next(BPRSampler(train, seed=0).batches(0, 6)))
        sync = next(r for r in w.net.ledger.rows() if r.phase == "sync/l=0" and r.receiver == "server")
        conv = next(iter(w.programs.values())).state.conv_owner
        assert sync.payload_bytes == sum(
            encoded_size((int(k), 5), dtype) for k in np.unique(conv, return_counts=True)[1]
        )


def test_paper_literal_virtual_gradients_break_exactness_only_with_virtual_items():
    train = random_train(n_users=12, n_items=14, density=0.3, seed=6)
    model = oracle(train, plus=True, n_layers=2, seed=0)
    batch = next(BPRSampler(train, seed=0).batches(0, 12))

    def w_after(alpha: int, literal: bool) -> torch.Tensor:
        w = world(train, dict(model.named_parameters()), 1, model="lightgcn+", n_layers=2, alpha=alpha, seed=1,
                  paper_literal=literal)  # fmt: skip
        w.step(*batch)
        return w.server.W[torch.from_numpy(np.argsort(w.server.col_tokens[:, 0], kind="stable"))].clone(), w

    exact0, w0 = w_after(0, False)
    literal0, _ = w_after(0, True)
    torch.testing.assert_close(literal0, exact0, rtol=1e-12, atol=1e-15)
    exact3, _ = w_after(3, False)
    literal3, _ = w_after(3, True)
    assert rel_err(literal3, exact3) > 1e-6
    del w0
