"""P-GCN's party programs: LightGCN+'s forward through the users' secure sums (exact up to fixed point);
gradients equal a per-client autograd backward through each client's own star (paths through other users
detached), summed; L = 0 is centralized BPR on LightGCN+'s layer-0 tables; one node = three nodes, real =
accounted; the server sees only masked uploads; the ledger books the forward by its formula."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from fedgraphrec.models.lightgcn import LightGCNPlus, fism_operator
from fedgraphrec.models.propagation import NormalizedBipartite
from fedgraphrec.protocols.base import NodeData, shard_of
from fedgraphrec.protocols.baselines.pgcn.client import PGCNClient
from fedgraphrec.protocols.baselines.pgcn.server import PGCNServer
from fedgraphrec.protocols.baselines.pgcn.settings import PGCNSettings
from fedgraphrec.runtime.local import LocalTransport
from fedgraphrec.runtime.network import Network
from tests.helpers import random_train, rel_err

D, LAMBDA = 4, 1e-2


@dataclass
class Fed:
    train: sp.csr_matrix
    oracle: LightGCNPlus
    server: PGCNServer
    programs: dict[int, PGCNClient]
    net: Network

    def step(self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> float:
        return self.server.train_step(users, pos, neg).loss

    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        self.server.predict()
        U = torch.zeros(self.train.shape[0], D, dtype=torch.float64)
        for p in self.programs.values():
            ids, rows, _ = p.prediction()
            U[torch.from_numpy(ids)] = rows
        return U, self.server.items_for_evaluation()


def _make(n_layers: int, nodes: int = 1, crypto: str = "accounted", transcripts: bool = False, seed: int = 0):
    train = random_train(12, 15, seed=seed)
    graph = NormalizedBipartite.from_train(train, torch.float64)
    oracle = LightGCNPlus(graph, train, D, n_layers, 0.5, torch.Generator().manual_seed(seed), torch.float64)
    tables = {k: v.detach().clone() for k, v in oracle.named_parameters()}
    settings = PGCNSettings(n_layers=n_layers, lr=0.05, reg=LAMBDA, frac_bits=44)
    n, m = train.shape
    data = NodeData(sp.csr_matrix(train), tables)
    programs = {k: PGCNClient(settings, ids, data) for k, ids in shard_of(n, list(range(nodes))).items()}
    net = Network(n, crypto=crypto, transcripts=transcripts, protocol="pgcn")  # type: ignore[arg-type]
    server = PGCNServer(settings, LocalTransport(net, programs), n, m, tables)
    server.setup()
    return Fed(train, oracle, server, programs, net)


def _batch(train, rng: np.random.Generator, n: int = 10):
    """Triples with a training positive and a negative outside the user's training items."""
    users, pos, neg = [], [], []
    active = np.flatnonzero(np.diff(train.indptr) > 0)
    while len(users) < n:
        u = int(rng.choice(active))
        items = train.indices[train.indptr[u] : train.indptr[u + 1]]
        j = int(rng.integers(0, train.shape[1]))
        if j in items:
            continue
        users.append(u), pos.append(int(rng.choice(items))), neg.append(j)
    return torch.tensor(users), torch.tensor(pos), torch.tensor(neg)


def _star_reference(train, V0: torch.Tensor, W: torch.Tensor, n_layers: int, users, pos, neg):
    """Autograd per client: propagate with the edges outside its star detached; sum the gradients."""
    R = torch.from_numpy(NormalizedBipartite.from_train(train, torch.float64).csr.toarray())
    F = torch.from_numpy(fism_operator(train).toarray())
    gV, gW = torch.zeros_like(V0), torch.zeros_like(W)
    B = len(users)
    for u in np.unique(users.numpy()):
        v0, w = V0.clone().requires_grad_(True), W.clone().requires_grad_(True)
        Ru = torch.zeros_like(R)
        Ru[u] = R[u]
        U_l, V_l = F @ w, v0
        U0 = U_l
        U_sum, V_sum = U_l.clone(), V_l.clone()
        for _ in range(n_layers):
            U_l, V_l = (
                Ru @ V_l + (R - Ru) @ V_l.detach(),
                Ru.T @ U_l + (R - Ru).T @ U_l.detach(),
            )
            U_sum, V_sum = U_sum + U_l, V_sum + V_l
        U, V = U_sum / (n_layers + 1), V_sum / (n_layers + 1)
        mine = users == u
        x = (U[u] * V[neg[mine]]).sum(-1) - (U[u] * V[pos[mine]]).sum(-1)
        reg = U0[u].square().sum() * mine.sum() + v0[pos[mine]].square().sum() + v0[neg[mine]].square().sum()
        loss = torch.nn.functional.softplus(x).sum() / B + LAMBDA * reg / (2 * B)
        loss.backward()
        gV += v0.grad
        gW += w.grad
    return gV, gW


def test_forward_and_loss_equal_lightgcn_plus() -> None:
    """The layers built through the users' secure sums are LightGCN+'s, up to the fixed point (2^-44)."""
    fed = _make(n_layers=2)
    U, V = fed.embeddings()
    U_ref, V_ref = fed.oracle.frozen_embeddings()
    assert rel_err(U, U_ref) < 1e-11 and rel_err(V, V_ref) < 1e-11
    users, pos, neg = _batch(fed.train, np.random.default_rng(0))
    loss = fed.step(users, pos, neg)
    ref = fed.oracle.batch_loss(users, pos, neg, LAMBDA).total.item()
    assert abs(loss - ref) <= 1e-11 * abs(ref)


@pytest.mark.parametrize("n_layers", [1, 3])
def test_gradients_equal_per_client_star_backward(n_layers: int) -> None:
    fed = _make(n_layers)
    rng = np.random.default_rng(n_layers)
    for _ in range(3):  # several steps: the tables move between them
        V0, W = fed.server.item.clone(), fed.server.item_w.clone()
        users, pos, neg = _batch(fed.train, rng)
        fed.step(users, pos, neg)
        gV, gW = _star_reference(fed.train, V0, W, n_layers, users, pos, neg)
        assert fed.server.item.grad is not None and fed.server.item_w.grad is not None
        assert rel_err(fed.server.item.grad, gV) < 1e-9
        assert rel_err(fed.server.item_w.grad, gW) < 1e-9


def test_dropped_paths_are_the_only_difference() -> None:
    """L = 0 has no path through another user: P-GCN's gradient is LightGCN+'s. L = 2 differs."""
    for n_layers, same in ((0, True), (2, False)):
        fed = _make(n_layers)
        users, pos, neg = _batch(fed.train, np.random.default_rng(5))
        fed.step(users, pos, neg)
        fed.oracle.batch_loss(users, pos, neg, LAMBDA).total.backward()
        got = fed.server.item.grad, fed.server.item_w.grad
        assert got[0] is not None and got[1] is not None
        err = max(rel_err(got[0], fed.oracle.item_emb.grad), rel_err(got[1], fed.oracle.item_w.grad))
        assert (err < 1e-9) if same else (err > 1e-3), (n_layers, err)


def test_no_layers_is_centralized_bpr_on_the_layer0_tables() -> None:
    """L = 0, several steps: the tables follow LightGCN+ (L = 0) trained by Adam in one process."""
    fed = _make(n_layers=0)
    opt = torch.optim.Adam(fed.oracle.parameters(), lr=0.05)
    rng = np.random.default_rng(3)
    for _ in range(5):
        users, pos, neg = _batch(fed.train, rng)
        loss = fed.step(users, pos, neg)
        opt.zero_grad()
        ref = fed.oracle.batch_loss(users, pos, neg, LAMBDA).total
        ref.backward()
        opt.step()
        assert abs(loss - ref.item()) <= 1e-9 * abs(ref.item())
    assert rel_err(fed.server.item, fed.oracle.item_emb.detach()) < 1e-9
    assert rel_err(fed.server.item_w, fed.oracle.item_w.detach()) < 1e-9


def test_training_lowers_the_loss() -> None:
    fed = _make(n_layers=2)
    rng = np.random.default_rng(9)
    batches = [_batch(fed.train, rng, n=40) for _ in range(4)]
    first = [fed.step(*b) for b in batches]
    for _ in range(15):
        for b in batches:
            fed.step(*b)
    last = [fed.step(*b) for b in batches]
    assert np.mean(last) < 0.7 * np.mean(first)


@pytest.mark.parametrize("crypto", ["accounted", "real"])
def test_three_nodes_equal_one_node(crypto: str) -> None:
    """The secure sums add integers, the users compute their own rows: any sharding gives the same model."""
    one, three = _make(2, nodes=1), _make(2, nodes=3, crypto=crypto)
    rng = np.random.default_rng(1)
    for _ in range(3):
        batch = _batch(one.train, rng)
        assert one.step(*batch) == pytest.approx(three.step(*batch), rel=1e-12)
    assert torch.equal(one.server.item, three.server.item) and torch.equal(
        one.server.item_w, three.server.item_w
    )
    (U1, V1), (U3, V3) = one.embeddings(), three.embeddings()
    assert torch.equal(U1, U3) and torch.equal(V1, V3)
    rows = sorted(one.net.ledger.rows(), key=repr)
    assert rows == sorted(three.net.ledger.rows(), key=repr)


def test_server_sees_only_masked_uploads() -> None:
    fed = _make(n_layers=1, crypto="real", transcripts=True)
    users, pos, neg = _batch(fed.train, np.random.default_rng(2), n=20)
    fed.step(users, pos, neg)
    server = fed.net.transcript.of("server")
    # in the clear the server gets only public keys and the unmasking shares the protocol reveals
    plain = {"secagg-advertise-keys", "secagg-unmask"}
    assert server and all(e.protected for e in server if e.kind not in plain)
    assert {e.protection for e in server if e.kind == "secagg-masked-input"} == {"masked"}
    (grads,) = [e for e in server if e.phase == "train/item-gradients/secagg-masked-input"]
    assert sorted(grads.senders or []) == sorted(set(users.tolist()))
    (layer,) = [e for e in server if e.phase == "train/forward/propagate/secagg-masked-input"]
    assert sorted(layer.senders or []) == list(range(12))  # every user takes part in the forward
    n, N = len(set(users.tolist())), fed.train.shape[1]
    assert fed.net.ledger.total_bytes("train/item-gradients/secagg-masked-input") == n * 2 * N * D * 8


@pytest.mark.parametrize("n_layers", [0, 1, 3])
def test_the_forward_is_booked(n_layers: int) -> None:
    """Per step: every user gets ``L`` whole tables and uploads ``L`` masked ``N·d`` vectors; the
    minibatch's users two more tables (``V^(L-1)`` or ``W``, and ``V^(L)``)."""
    fed = _make(n_layers)
    users, pos, neg = _batch(fed.train, np.random.default_rng(4))
    fed.step(users, pos, neg)
    n_active, P, N = fed.train.shape[0], len(set(users.tolist())), fed.train.shape[1]
    table = N * D * 8
    led = fed.net.ledger
    down = led.total_bytes("train/forward/download") + led.total_bytes("train/local/download")
    assert down == (n_layers * n_active + 2 * P) * table
    assert led.total_bytes("train/forward/propagate/secagg-masked-input") == n_layers * n_active * table


def test_a_resumed_run_continues_exactly() -> None:
    """The server's checkpoint holds copies of Adam's moments, not the live ones."""
    import itertools

    from fedgraphrec.training.data import prepare_interactions
    from fedgraphrec.training.loading import load_config
    from fedgraphrec.training.protocol_learner import ProtocolLearner
    from fedgraphrec.training.sampler import BPRSampler

    small = ["dataset_options.n_users=30", "dataset_options.n_items=40", "dtype='float64'"]
    cfg = load_config(
        None, small, protocol="pgcn", model="lightgcn+", dataset="synthetic", dim=4, batch_size=32
    )
    data = prepare_interactions(cfg)
    batches = list(itertools.islice(BPRSampler(data.train, seed=cfg.seed).batches(0, 32), 4))
    run = ProtocolLearner(cfg, data)
    for b in batches[:2]:
        run.train_batch(*b)
    resumed = ProtocolLearner(cfg, data)
    resumed.load_state_dict(run.state_dict())
    for b in batches[2:]:
        assert run.train_batch(*b).loss == resumed.train_batch(*b).loss
    assert all(torch.equal(t, resumed.tables()[k]) for k, t in run.tables().items())
