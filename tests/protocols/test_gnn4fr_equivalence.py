"""GNN4FR's party programs equal centralized LightGCN step by step (float64), on 1 and 3 nodes."""

import numpy as np
import pytest
import torch

from fedgraphrec.models.lightgcn import LightGCN
from fedgraphrec.models.propagation import NormalizedBipartite, propagate_layers
from fedgraphrec.protocols.gnn4fr.local import LocalGNN4FR, local_gnn4fr
from fedgraphrec.protocols.gnn4fr.settings import GNN4FRSettings
from fedgraphrec.runtime.transcript import payload_bytes
from fedgraphrec.training.sampler import BPRSampler
from tests.helpers import random_train, rel_err

RTOL = 1e-10


def _oracle(train, n_layers: int, dim: int = 4):
    graph = NormalizedBipartite.from_train(train, dtype=torch.float64)
    gen = torch.Generator().manual_seed(3)
    return LightGCN(graph, dim=dim, n_layers=n_layers, init_std=0.3, generator=gen, dtype=torch.float64)


def _layers_match(fed: LocalGNN4FR, us, vs) -> None:
    """Every node's clients' and items' layer-k embeddings equal the oracle's."""
    for node in fed.nodes.values():
        st, users, items = (
            node.state.step,
            torch.from_numpy(node.clients),
            torch.from_numpy(node.state.item_ids),
        )
        for k in range(len(us)):
            assert rel_err(st.u_layers[k], us[k][users]) <= RTOL
            assert rel_err(st.v_layers[k], vs[k][items]) <= RTOL


@pytest.mark.parametrize("paper_literal", [False, True])
@pytest.mark.parametrize(("crypto", "nodes"), [("accounted", 1), ("real", 1), ("accounted", 3), ("real", 3)])
@pytest.mark.parametrize("n_layers", [0, 3])
def test_gnn4fr_matches_centralized_lightgcn(crypto, nodes, n_layers, paper_literal):
    """Layers, loss, Adam moments (the gradients) and parameters after every step; then prediction."""
    train = random_train(n_users=14, n_items=17, density=0.25, seed=13)
    oracle = _oracle(train, n_layers)
    opt = torch.optim.Adam(oracle.parameters(), lr=0.05)
    settings = GNN4FRSettings(n_layers=n_layers, seed=2, lr=0.05, reg=0.01, paper_literal=paper_literal)
    fed = local_gnn4fr(
        train, oracle.user_emb.detach(), oracle.item_emb.detach(), settings, nodes=nodes, crypto=crypto
    )
    steps = 0
    for epoch in range(2):
        for users, pos, neg in BPRSampler(train, seed=5).batches(epoch, 9):
            us, vs = propagate_layers(oracle.graph, oracle.user_emb, oracle.item_emb, n_layers)
            us, vs = [u.detach().clone() for u in us], [v.detach().clone() for v in vs]  # layer 0 is live
            out = oracle.batch_loss(users, pos, neg, reg_weight=0.01)
            opt.zero_grad()
            out.total.backward()
            opt.step()
            stats = fed.server.train_step(users, pos, neg)
            _layers_match(fed, us, vs)
            assert abs(stats.loss - out.total.item()) <= RTOL * abs(out.total.item())
            for node in fed.nodes.values():  # first moments: the gradient history
                ref_u = opt.state[oracle.user_emb]["exp_avg"][torch.from_numpy(node.clients)]
                ref_i = opt.state[oracle.item_emb]["exp_avg"][torch.from_numpy(node.state.item_ids)]
                assert rel_err(node.state.users.exp_avg, ref_u) <= RTOL
                assert rel_err(node.state.items.exp_avg, ref_i) <= RTOL
            tables = fed.tables()
            assert rel_err(tables["user_emb"], oracle.user_emb.detach()) <= RTOL
            assert rel_err(tables["item_emb"], oracle.item_emb.detach()) <= RTOL
            steps += 1
    assert steps >= 4
    U, V = fed.predict()
    U_ref, V_ref = oracle.frozen_embeddings()
    assert rel_err(U, U_ref) <= RTOL and rel_err(V, V_ref) <= RTOL
    phases = {r.phase for r in fed.net.ledger.rows()}
    assert "predict/item-embeddings" in phases
    assert ("aggregate/uploads" in phases) == paper_literal
    if n_layers:
        assert "predict/forward/l=0/user-embeddings" in phases


def _upload_words(fed: LocalGNN4FR) -> np.ndarray:
    uploads = [
        p for e in fed.net.transcript.of("server") if e.phase == "aggregate/uploads" for p in e.payloads
    ]
    return np.concatenate([np.asarray(p, dtype=np.uint64).ravel() for p in uploads])


def _pair(crypto: str, paper_literal: bool, transcripts: bool = True, nodes: int = 1) -> LocalGNN4FR:
    train = random_train(n_users=10, n_items=12, density=0.35, seed=2)
    gen = torch.Generator().manual_seed(0)
    u0, v0 = (torch.randn(n, 3, generator=gen, dtype=torch.float64) for n in (10, 12))
    settings = GNN4FRSettings(n_layers=2, seed=1, paper_literal=paper_literal)
    return local_gnn4fr(train, u0, v0, settings, crypto=crypto, transcripts=transcripts, nodes=nodes)  # type: ignore[arg-type]


def _batches():
    train = random_train(n_users=10, n_items=12, density=0.35, seed=2)
    return BPRSampler(train, seed=0).batches(0, 8)


def test_paper_literal_shares_come_from_the_csprng_not_the_seed():
    """Two runs with one seed: identical model, but masked uploads that share no word.

    With shares drawn from the run seed (the old defect) the uploads of the two runs were equal, so
    whoever had ``config.toml`` could regenerate every share and unmask every client's gradient.
    """
    runs = [_pair("real", paper_literal=True) for _ in range(2)]
    for users, pos, neg in _batches():
        for fed in runs:
            fed.server.train_step(users, pos, neg)
    assert torch.equal(runs[0].tables()["item_emb"], runs[1].tables()["item_emb"])
    a, b = (_upload_words(fed) for fed in runs)
    assert len(a) == len(b) > 100 and np.count_nonzero(a == b) == 0
    # the masking arithmetic (a sanity check, not a secrecy proof): uploads look uniform in the ring
    counts = np.bincount((a >> np.uint64(56)).astype(np.int64), minlength=256)
    expected = len(a) / 256
    assert ((counts - expected) ** 2 / expected).sum() < 400  # chi-square, 255 dof, very loose


@pytest.mark.parametrize("paper_literal", [False, True])
def test_modes_identical_and_every_protected_payload_real_and_of_its_booked_size(paper_literal):
    # two nodes: every logical message is sealed on its own, as one client per device would (a single
    # node seals each part as one AEAD message, runtime/batching.py, and its transcript holds that one)
    runs = {m: _pair(m, paper_literal, nodes=2) for m in ("real", "accounted")}
    for users, pos, neg in _batches():
        assert runs["real"].server.train_step(users, pos, neg) == runs["accounted"].server.train_step(
            users, pos, neg
        )
    real, acc = runs["real"], runs["accounted"]
    for name, table in real.tables().items():
        assert torch.equal(table, acc.tables()[name]), name
    assert [(r.phase, r.messages, r.payload_bytes) for r in real.net.ledger.rows()] == [
        (r.phase, r.messages, r.payload_bytes) for r in acc.net.ledger.rows()
    ]
    server_got = real.net.transcript.of("server")
    assert any(e.protected for e in server_got)
    assert all(isinstance(p, bytes) for e in server_got if e.protection == "sealed" for p in e.payloads)
    for role in real.net.transcript.roles():
        for e in real.net.transcript.of(role):
            if e.protection == "sealed" and e.sizes:
                assert len(e.payloads) == len(e.sizes), (role, e.phase)
                assert [len(payload_bytes(p)) for p in e.payloads] == list(e.sizes), (role, e.phase)


def test_the_server_never_receives_a_plaintext_user_row_or_gradient():
    """Transposed backward, real mode: every user embedding or gradient the server gets is sealed."""
    fed = _pair("real", paper_literal=False)
    for users, pos, neg in _batches():
        fed.server.train_step(users, pos, neg)
    kinds = {"user_embedding", "user_gradient", "item_gradient", "item_embedding"}
    for e in fed.net.transcript.of("server"):
        if e.kind in kinds and e.sender != "server":
            assert e.protection == "sealed", e.phase
    phases = {r.phase for r in fed.net.ledger.rows()}
    assert not any(p.startswith("aggregate/") for p in phases)  # no item gradient is summed anywhere
