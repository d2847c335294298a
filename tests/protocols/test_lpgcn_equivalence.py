"""LP-GCN equals centralized LightGCN step by step (float64), in both crypto modes."""

import numpy as np
import pytest
import torch

from fedgraphrec.models import LightGCN, NormalizedBipartite, propagate_layers
from fedgraphrec.protocols.lpgcn.protocol import LPGCN
from fedgraphrec.training.sampler import BPRSampler
from tests.helpers import assert_forward_and_loss_match, random_train, rel_err

RTOL = 1e-10


@pytest.mark.parametrize("crypto", ["accounted", "real"])
@pytest.mark.parametrize(("alpha", "n_layers"), [(0, 2), (5, 3), (5, 0)])
def test_lpgcn_matches_centralized_lightgcn(crypto, alpha, n_layers):
    train = random_train(n_users=15, n_items=19, density=0.25, seed=11)
    graph = NormalizedBipartite.from_train(train, dtype=torch.float64)
    oracle = LightGCN(
        graph,
        dim=4,
        n_layers=n_layers,
        init_std=0.3,
        generator=torch.Generator().manual_seed(2),
        dtype=torch.float64,
    )
    opt = torch.optim.Adam(oracle.parameters(), lr=0.05)
    fed = LPGCN(
        train,
        oracle.user_emb.detach(),
        oracle.item_emb.detach(),
        n_layers=n_layers,
        alpha=alpha,
        seed=3,
        lr=0.05,
        reg=0.01,
        crypto=crypto,
    )
    sampler = BPRSampler(train, seed=4)
    steps = 0
    for epoch in range(2):
        for users, pos, neg in sampler.batches(epoch, 9):
            us, vs = propagate_layers(oracle.graph, oracle.user_emb, oracle.item_emb, n_layers)
            out = oracle.batch_loss(users, pos, neg, reg_weight=0.01)
            opt.zero_grad()
            out.total.backward()
            rec = fed.train_step(users, pos, neg, keep_layers=True)
            assert_forward_and_loss_match(rec, us, vs, out.total.item(), RTOL)
            assert rel_err(rec.user_grad, oracle.user_emb.grad) <= RTOL
            assert rel_err(rec.item_grad, oracle.item_emb.grad) <= RTOL
            opt.step()
            assert rel_err(fed.user_emb.detach(), oracle.user_emb.detach()) <= RTOL
            assert rel_err(fed.item_emb.detach(), oracle.item_emb.detach()) <= RTOL
            steps += 1
    assert steps >= 4


def test_real_and_accounted_modes_give_identical_numbers_and_ledgers():
    train = random_train(n_users=12, n_items=14, density=0.3, seed=5)
    gen = torch.Generator().manual_seed(0)
    u0 = torch.randn(12, 3, generator=gen, dtype=torch.float64)
    v0 = torch.randn(14, 3, generator=gen, dtype=torch.float64)
    runs = {m: LPGCN(train, u0, v0, n_layers=2, alpha=3, seed=1, crypto=m) for m in ("real", "accounted")}
    sampler = BPRSampler(train, seed=0)
    for users, pos, neg in sampler.batches(0, 8):
        losses = {m: r.train_step(users, pos, neg).loss for m, r in runs.items()}
        assert losses["real"] == losses["accounted"]
    assert torch.equal(runs["real"].user_emb, runs["accounted"].user_emb)
    assert torch.equal(runs["real"].item_emb, runs["accounted"].item_emb)
    rows = {
        m: [(r.phase, r.sender, r.receiver, r.messages, r.payload_bytes) for r in run.net.ledger.rows()]
        for m, run in runs.items()
    }
    assert rows["real"] == rows["accounted"]
    np.testing.assert_array_equal(
        runs["real"].net.ledger.client_sent, runs["accounted"].net.ledger.client_sent
    )


def test_accounted_sizes_follow_the_codec():
    from fedgraphrec.runtime import encoded_size

    train = random_train(n_users=6, n_items=7, density=0.4, seed=1)
    for dtype in (torch.float32, torch.float64):
        fed = LPGCN(train, torch.zeros(6, 5, dtype=dtype), torch.zeros(7, 5, dtype=dtype), n_layers=1)
        ks = np.array([0, 1, 4, 9])
        assert fed._matrix_bytes(ks).tolist() == [encoded_size((int(k), 5), dtype) for k in ks]


@pytest.mark.parametrize("crypto", ["accounted", "real"])
@pytest.mark.parametrize(("alpha", "n_layers"), [(0, 2), (5, 3)])
def test_lpgcn_lightgcn_plus_matches_centralized(crypto, alpha, n_layers):
    from fedgraphrec.models import LightGCNPlus

    train = random_train(n_users=15, n_items=19, density=0.25, seed=12)
    graph = NormalizedBipartite.from_train(train, dtype=torch.float64)
    oracle = LightGCNPlus(
        graph,
        train,
        dim=4,
        n_layers=n_layers,
        init_std=0.3,
        generator=torch.Generator().manual_seed(5),
        dtype=torch.float64,
    )
    opt = torch.optim.Adam(oracle.parameters(), lr=0.05)
    fed = LPGCN(
        train,
        None,
        oracle.item_emb.detach(),
        n_layers=n_layers,
        alpha=alpha,
        seed=3,
        lr=0.05,
        reg=0.01,
        crypto=crypto,
        item_w0=oracle.item_w.detach(),
    )
    for users, pos, neg in BPRSampler(train, seed=4).batches(0, 9):
        us, vs = propagate_layers(oracle.graph, oracle.user0(), oracle.item_emb, n_layers)
        out = oracle.batch_loss(users, pos, neg, reg_weight=0.01)
        opt.zero_grad()
        out.total.backward()
        rec = fed.train_step(users, pos, neg, keep_layers=True)
        assert_forward_and_loss_match(rec, us, vs, out.total.item(), RTOL)
        assert rel_err(rec.item_grad, oracle.item_emb.grad) <= RTOL
        assert rel_err(rec.w_grad, oracle.item_w.grad) <= RTOL
        opt.step()
        for name, param in fed.parameters_by_name().items():
            assert rel_err(param.detach(), getattr(oracle, name).detach()) <= RTOL


def test_paper_literal_virtual_gradients_break_exactness_only_with_virtual_items():
    train = random_train(n_users=12, n_items=14, density=0.3, seed=6)
    gen = torch.Generator().manual_seed(0)
    v0 = torch.randn(14, 3, generator=gen, dtype=torch.float64)
    w0 = torch.randn(14, 3, generator=gen, dtype=torch.float64)
    batch = next(BPRSampler(train, seed=0).batches(0, 12))

    def w_grad(alpha, literal):
        fed = LPGCN(train, None, v0, n_layers=2, alpha=alpha, seed=1, item_w0=w0, paper_literal=literal)
        return fed.train_step(*batch, keep_layers=True).w_grad

    torch.testing.assert_close(w_grad(0, True), w_grad(0, False), rtol=1e-12, atol=1e-15)
    assert rel_err(w_grad(3, True), w_grad(3, False)) > 1e-3
