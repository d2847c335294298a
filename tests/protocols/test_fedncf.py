"""FedNCF: the batched round equals a user-by-user FedAvg round, and the loss falls over rounds."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from fedgraphrec.models import NCF, NormalizedBipartite
from fedgraphrec.protocols.baselines import FedNCF
from fedgraphrec.protocols.baselines.fedncf import _weights, ncf_pair_logits
from tests.helpers import random_train, rel_err


def _protocol(**kw: object) -> FedNCF:
    train = random_train(12, 25, density=0.2, seed=4)
    graph = NormalizedBipartite.from_train(train, torch.float64)
    model = NCF(graph, 4, 0.3, torch.Generator().manual_seed(1), torch.float64, hidden=(6, 3))
    base: dict[str, object] = dict(
        seed=3, clients_per_round=5, local_steps=3, n_negatives=6, lr=0.05, reg=1e-2, frac_bits=40
    )
    base.update(kw)
    return FedNCF(train, model, **base)  # type: ignore[arg-type]


def _reference_round(p: FedNCF, r: int) -> dict[str, torch.Tensor]:
    m, rs = p.model, p.sample(r)
    N, d = m.item_gmf.shape
    weights = [w.detach().clone() for w in _weights(m)]
    d_items = [torch.zeros(N, d, dtype=torch.float64) for _ in range(2)]
    d_weights = [torch.zeros_like(w) for w in weights]
    counts = torch.zeros(N, dtype=torch.float64)
    users = {}
    for i, u in enumerate(rs.clients):
        Q = torch.from_numpy(rs.queried(i))
        n_pos = int(rs.pos_ptr[i + 1] - rs.pos_ptr[i])
        pg, pm = m.user_gmf[u].detach().clone(), m.user_mlp[u].detach().clone()
        qg, qm = m.item_gmf[Q].detach().clone(), m.item_mlp[Q].detach().clone()
        ws = [w.clone() for w in weights]
        params = [t.requires_grad_(True) for t in (pg, pm, qg, qm, *ws)]
        opt = torch.optim.Adam(params, lr=p.lr)
        pairs = slice(rs.pair_ptr[i], rs.pair_ptr[i + 1])
        ii = torch.from_numpy(rs.pair_pos[pairs] - rs.pos_ptr[i])
        for step in range(p.local_steps):
            opt.zero_grad()
            jj = torch.from_numpy(rs.pair_neg[step, pairs] - rs.neg_ptr[i] + n_pos)
            n = len(ii)
            per = [w.expand(n, *w.shape) for w in ws]
            li = ncf_pair_logits(pg.expand(n, -1), pm.expand(n, -1), qg[ii], qm[ii], per)
            lj = ncf_pair_logits(pg.expand(n, -1), pm.expand(n, -1), qg[jj], qm[jj], per)
            sq = pg.square().sum() + pm.square().sum() + qg[ii].square().sum(1) + qm[ii].square().sum(1)
            sq = sq + qg[jj].square().sum(1) + qm[jj].square().sum(1)
            loss = (F.softplus(-li) + F.softplus(lj) + p.reg / 2 * sq).mean()
            loss.backward()
            opt.step()
        with torch.no_grad():
            d_items[0][Q] += qg - m.item_gmf[Q]
            d_items[1][Q] += qm - m.item_mlp[Q]
            counts[Q] += 1
            for acc, w, w0 in zip(d_weights, ws, weights, strict=True):
                acc += w - w0
            users[int(u)] = (pg.detach(), pm.detach())
    c = counts.clamp_min(1)[:, None]
    out = {"item_gmf": m.item_gmf.detach() + d_items[0] / c, "item_mlp": m.item_mlp.detach() + d_items[1] / c}
    for k, (w, acc) in enumerate(zip(weights, d_weights, strict=True)):
        out[f"w{k}"] = w + acc / len(rs.clients)
    ug, um = m.user_gmf.detach().clone(), m.user_mlp.detach().clone()
    for u, (a, b) in users.items():
        ug[u], um[u] = a, b
    out["user_gmf"], out["user_mlp"] = ug, um
    return out


def test_batched_round_equals_per_user_fedavg() -> None:
    p = _protocol()
    for r in range(2):
        ref = _reference_round(p, r)
        p.train_round(r)
        m = p.model
        for name in ("item_gmf", "item_mlp", "user_gmf", "user_mlp"):
            assert rel_err(getattr(m, name).detach(), ref[name]) < 1e-10, name
        for k, w in enumerate(_weights(m)):
            assert rel_err(w.detach(), ref[f"w{k}"]) < 1e-10, k


def test_loss_falls_and_real_crypto_agrees() -> None:
    a, b = _protocol(), _protocol(crypto="real", clients_per_round=4)
    losses = [a.train_round(r)[0] for r in range(8)]
    assert np.mean(losses[-3:]) < np.mean(losses[:3])
    c = _protocol(clients_per_round=4)
    for r in range(2):
        assert b.train_round(r) == c.train_round(r)
    assert torch.equal(b.model.item_gmf, c.model.item_gmf)
    assert b.net.ledger.rows() == c.net.ledger.rows()
