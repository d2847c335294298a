"""GNN4FR equals centralized LightGCN step by step (float64), in both crypto modes."""

import numpy as np
import pytest
import torch

from fedgraphrec.models import LightGCN, NormalizedBipartite, propagate_layers
from fedgraphrec.protocols.gnn4fr import GNN4FR
from fedgraphrec.runtime.transcript import payload_bytes
from fedgraphrec.training.sampler import BPRSampler
from tests.helpers import assert_forward_and_loss_match, random_train, rel_err

RTOL = 1e-10


@pytest.mark.parametrize("crypto", ["accounted", "real"])
@pytest.mark.parametrize("n_layers", [0, 1, 3])
def test_gnn4fr_matches_centralized_lightgcn(crypto, n_layers):
    train = random_train(n_users=14, n_items=17, density=0.25, seed=13)
    graph = NormalizedBipartite.from_train(train, dtype=torch.float64)
    oracle = LightGCN(
        graph,
        dim=4,
        n_layers=n_layers,
        init_std=0.3,
        generator=torch.Generator().manual_seed(3),
        dtype=torch.float64,
    )
    opt = torch.optim.Adam(oracle.parameters(), lr=0.05)
    fed = GNN4FR(
        train,
        oracle.user_emb.detach(),
        oracle.item_emb.detach(),
        n_layers=n_layers,
        seed=2,
        lr=0.05,
        reg=0.01,
        crypto=crypto,
    )
    steps = 0
    for epoch in range(2):
        for users, pos, neg in BPRSampler(train, seed=5).batches(epoch, 9):
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


def _upload_words(fed: GNN4FR) -> np.ndarray:
    uploads = [
        p for e in fed.net.transcript.of("server") if e.phase == "aggregate/uploads" for p in e.payloads
    ]
    return np.frombuffer(b"".join(uploads), dtype=np.uint64)


def test_shares_come_from_the_csprng_not_the_seed():
    """Two runs with one seed: identical model, but masked uploads that share no word.

    With shares drawn from the run seed (the old defect) the uploads of the two runs were equal, so
    whoever had ``config.toml`` could regenerate every share and unmask every client's gradient.
    """
    train = random_train(n_users=10, n_items=12, density=0.35, seed=2)
    gen = torch.Generator().manual_seed(0)
    u0, v0 = (torch.randn(n, 3, generator=gen, dtype=torch.float64) for n in (10, 12))
    runs = [GNN4FR(train, u0, v0, n_layers=2, seed=1, crypto="real", transcripts=True) for _ in range(2)]
    for users, pos, neg in BPRSampler(train, seed=0).batches(0, 8):
        for fed in runs:
            fed.train_step(users, pos, neg)
    assert torch.equal(runs[0].item_emb, runs[1].item_emb)
    a, b = (_upload_words(fed) for fed in runs)
    assert len(a) == len(b) > 100 and np.count_nonzero(a == b) == 0


def test_gnn4fr_modes_identical_and_uploads_uniform():
    train = random_train(n_users=10, n_items=12, density=0.35, seed=2)
    gen = torch.Generator().manual_seed(0)
    u0, v0 = (
        torch.randn(10, 3, generator=gen, dtype=torch.float64),
        torch.randn(12, 3, generator=gen, dtype=torch.float64),
    )
    runs = {
        m: GNN4FR(train, u0, v0, n_layers=2, seed=1, crypto=m, transcripts=True)
        for m in ("real", "accounted")
    }
    for users, pos, neg in BPRSampler(train, seed=0).batches(0, 8):
        assert (
            runs["real"].train_step(users, pos, neg).loss
            == runs["accounted"].train_step(users, pos, neg).loss
        )
    assert torch.equal(runs["real"].item_emb, runs["accounted"].item_emb)
    assert torch.equal(runs["real"].user_emb, runs["accounted"].user_emb)
    # sanity check of the masking arithmetic (not a secrecy proof; that is the CSPRNG test below):
    # the uploads the server sums look uniform in the ring (top byte of every word)
    words = _upload_words(runs["real"])
    counts = np.bincount((words >> np.uint64(56)).astype(np.int64), minlength=256)
    expected = len(words) / 256
    assert ((counts - expected) ** 2 / expected).sum() < 400  # chi-square, 255 dof, very loose
    assert all(
        isinstance(p, bytes)
        for e in runs["real"].net.transcript.of("server")
        if e.protected
        for p in e.payloads
    )
    # every protected message any party got carries its payload, of exactly the accounted size
    net = runs["real"].net
    for role in net.transcript.roles():
        for e in net.transcript.of(role):
            if e.protected and e.sizes:
                assert len(e.payloads) == len(e.sizes), (role, e.phase)
                assert [len(payload_bytes(p)) for p in e.payloads] == list(e.sizes), (role, e.phase)
    assert net.sealed_count > 0 and net.opened_count >= net.sealed_count // 2


@pytest.mark.parametrize("crypto", ["accounted", "real"])
def test_prediction_gives_the_oracles_final_embeddings_and_is_counted(crypto):
    train = random_train(n_users=10, n_items=12, density=0.35, seed=4)
    graph = NormalizedBipartite.from_train(train, dtype=torch.float64)
    oracle = LightGCN(graph, dim=3, n_layers=2, init_std=0.3, dtype=torch.float64)
    fed = GNN4FR(train, oracle.user_emb.detach(), oracle.item_emb.detach(), n_layers=2, crypto=crypto)
    U, V = fed.final_embeddings()
    U_ref, V_ref = oracle.frozen_embeddings()
    assert rel_err(U, U_ref) <= RTOL and rel_err(V, V_ref) <= RTOL
    phases = {r.phase for r in fed.net.ledger.rows()}
    assert "predict/item-embeddings" in phases and "predict/forward/l=0/user-embeddings" in phases
