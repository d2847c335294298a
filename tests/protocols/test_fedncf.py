"""FedNCF's party programs: the batched round equals a user-by-user FedAvg round, the loss falls over
rounds, real and accounted secure aggregation agree, one node and three nodes give the same model and
the same metrics, and users evaluate through the NeuMF scorer on their nodes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import scipy.sparse as sp
import torch
import torch.nn.functional as F

from fedgraphrec.evaluation.ranking import evaluate_scores
from fedgraphrec.models.ncf import NCF
from fedgraphrec.models.propagation import NormalizedBipartite
from fedgraphrec.protocols.base import EvalSplits, NodeData, shard_of
from fedgraphrec.protocols.baselines.fedncf.client import FedNCFClient
from fedgraphrec.protocols.baselines.fedncf.local import ncf_pair_logits
from fedgraphrec.protocols.baselines.fedncf.server import FedNCFServer
from fedgraphrec.protocols.baselines.fedncf.settings import FedNCFSettings
from fedgraphrec.protocols.baselines.shard_sampling import sample_shard
from fedgraphrec.runtime.local import LocalTransport
from fedgraphrec.runtime.network import Network
from tests.helpers import random_train, rel_err

D = 4


@dataclass
class Fed:
    server: FedNCFServer
    programs: dict[int, FedNCFClient]
    net: Network
    train: sp.csr_matrix

    def users(self) -> tuple[torch.Tensor, torch.Tensor]:
        n = self.train.shape[0]
        g, m = torch.empty(n, D, dtype=torch.float64), torch.empty(n, D, dtype=torch.float64)
        for p in self.programs.values():
            g[torch.from_numpy(p.clients)], m[torch.from_numpy(p.clients)] = (
                p.state.user_gmf,
                p.state.user_mlp,
            )
        return g, m


def _make(nodes: int = 1, crypto: str = "accounted", test=None, **kw: object) -> Fed:
    train = random_train(12, 25, density=0.2, seed=4)
    graph = NormalizedBipartite.from_train(train, torch.float64)
    model = NCF(graph, D, 0.3, torch.Generator().manual_seed(1), torch.float64, hidden=(6, 3))
    tables = {k: v.detach().clone() for k, v in model.named_parameters()}
    base: dict[str, object] = dict(
        seed=3, clients_per_round=5, local_steps=3, n_negatives=6, lr=0.05, reg=1e-2, frac_bits=40, dim=D,
        ncf_hidden=(6, 3),
    )  # fmt: skip
    settings = FedNCFSettings(**{**base, **kw})  # type: ignore[arg-type]
    splits = None if test is None else EvalSplits({"test": test}, {"test": [train]})
    data = NodeData(sp.csr_matrix(train), tables, splits)
    n, m = train.shape
    programs = {k: FedNCFClient(settings, ids, data) for k, ids in shard_of(n, list(range(nodes))).items()}
    net = Network(n, crypto=crypto, protocol="fedncf")  # type: ignore[arg-type]
    server_tables = {k: v for k, v in tables.items() if not k.startswith("user_")}
    server = FedNCFServer(settings, LocalTransport(net, programs), n, m, server_tables)
    server.setup()
    return Fed(server, programs, net, sp.csr_matrix(train))


def _reference_round(p: Fed, r: int) -> dict[str, torch.Tensor]:
    s, srv = p.server.settings, p.server
    clients = srv.sample_clients(r)
    rs = sample_shard(
        p.train, clients, clients, r, protocol="fedncf", seed=s.seed, n_negatives=s.n_negatives,
        local_steps=s.local_steps,
    )  # fmt: skip
    item_gmf, item_mlp = srv.item_gmf, srv.item_mlp
    user_gmf, user_mlp = p.users()
    N = item_gmf.shape[0]
    weights = [w.clone() for w in srv.weights]
    d_items = [torch.zeros(N, D, dtype=torch.float64) for _ in range(2)]
    d_weights = [torch.zeros_like(w) for w in weights]
    counts = torch.zeros(N, dtype=torch.float64)
    users = {}
    for i, u in enumerate(clients):
        pos = rs.pos_items[rs.pos_ptr[i] : rs.pos_ptr[i + 1]]
        negs_all = rs.neg_items[rs.neg_ptr[i] : rs.neg_ptr[i + 1]]
        Q = torch.from_numpy(np.concatenate([pos, negs_all]))
        n_pos = len(pos)
        pg, pm = user_gmf[u].clone(), user_mlp[u].clone()
        qg, qm = item_gmf[Q].clone(), item_mlp[Q].clone()
        ws = [w.clone() for w in weights]
        params = [t.requires_grad_(True) for t in (pg, pm, qg, qm, *ws)]
        opt = torch.optim.Adam(params, lr=s.lr)
        ii = torch.arange(n_pos)
        for step in range(s.local_steps):
            opt.zero_grad()
            jj = torch.from_numpy(
                rs.pair_neg[step, rs.pos_ptr[i] : rs.pos_ptr[i + 1]] - rs.neg_ptr[i] + n_pos
            )
            n = len(ii)
            per = [w.expand(n, *w.shape) for w in ws]
            li = ncf_pair_logits(pg.expand(n, -1), pm.expand(n, -1), qg[ii], qm[ii], per)
            lj = ncf_pair_logits(pg.expand(n, -1), pm.expand(n, -1), qg[jj], qm[jj], per)
            sq = pg.square().sum() + pm.square().sum() + qg[ii].square().sum(1) + qm[ii].square().sum(1)
            sq = sq + qg[jj].square().sum(1) + qm[jj].square().sum(1)
            loss = (F.softplus(-li) + F.softplus(lj) + s.reg / 2 * sq).mean()
            loss.backward()
            opt.step()
        with torch.no_grad():
            d_items[0][Q] += qg - item_gmf[Q]
            d_items[1][Q] += qm - item_mlp[Q]
            counts[Q] += 1
            for acc, w, w0 in zip(d_weights, ws, weights, strict=True):
                acc += w - w0
            users[int(u)] = (pg.detach(), pm.detach())
    c = counts.clamp_min(1)[:, None]
    out = {"item_gmf": item_gmf + d_items[0] / c, "item_mlp": item_mlp + d_items[1] / c}
    for k, (w, acc) in enumerate(zip(weights, d_weights, strict=True)):
        out[f"w{k}"] = w + acc / len(clients)
    for u, (a, b) in users.items():
        user_gmf[u], user_mlp[u] = a, b
    out["user_gmf"], out["user_mlp"] = user_gmf, user_mlp
    return out


@pytest.mark.parametrize("nodes", [1, 3])
def test_batched_round_equals_per_user_fedavg(nodes: int) -> None:
    p = _make(nodes)
    for r in range(2):
        ref = _reference_round(p, r)
        p.server.train_round(r)
        got = dict(zip(("user_gmf", "user_mlp"), p.users(), strict=True))
        got |= {"item_gmf": p.server.item_gmf, "item_mlp": p.server.item_mlp}
        for name, value in got.items():
            assert rel_err(value, ref[name]) < 1e-10, name
        for k, w in enumerate(p.server.weights):
            assert rel_err(w, ref[f"w{k}"]) < 1e-10, k


def test_loss_falls_and_real_crypto_agrees() -> None:
    a = _make()
    losses = [a.server.train_round(r).loss for r in range(8)]
    assert np.mean(losses[-3:]) < np.mean(losses[:3])
    b, c = _make(2, crypto="real", clients_per_round=4), _make(2, clients_per_round=4)
    for r in range(2):
        assert b.server.train_round(r) == c.server.train_round(r)
    assert torch.equal(b.server.item_gmf, c.server.item_gmf)
    assert b.net.ledger.rows() == c.net.ledger.rows()
    assert any(r.phase == "train/upload/secagg-masked-input" for r in b.net.ledger.rows())


def test_one_node_and_three_nodes_score_the_same() -> None:
    test = random_train(12, 25, density=0.15, seed=9)
    one, three = _make(1, test=test), _make(3, test=test)
    for r in range(3):
        one.server.train_round(r), three.server.train_round(r)
    for name in ("item_gmf", "item_mlp"):
        assert rel_err(getattr(three.server, name), getattr(one.server, name)) <= 1e-10
    for a, b in zip(one.users(), three.users(), strict=True):
        assert rel_err(b, a) <= 1e-10
    fed1, fed3 = one.server.evaluate([5]), three.server.evaluate([5])
    assert fed1["test"] == pytest.approx(fed3["test"], rel=1e-10)
    # the nodes' scorers are NeuMF's: the same metrics as the centralized evaluator of those scores
    request = one.server.evaluation_parts()
    from fedgraphrec.runtime.message import Message

    score = one.programs[0].scorer(Message(dict(request)))
    train = one.train
    central = evaluate_scores(score, train.shape[0], train.shape[1], test, [train], ks=(5,)).metrics
    assert fed1["test"]["recall@5"] == pytest.approx(central["recall@5"], rel=1e-10)
