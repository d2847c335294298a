"""P-GCN: LightGCN+'s forward exactly; gradients equal a per-client autograd backward through each
client's own star (paths through other users detached), summed; the server sees only masked uploads."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedgraphrec.models import LightGCNPlus, NormalizedBipartite
from fedgraphrec.models.lightgcn import fism_operator
from fedgraphrec.protocols.baselines.pgcn import PGCN
from tests.helpers import random_train, rel_err

D, LAMBDA = 4, 1e-2


def _setup(n_layers: int, crypto: str = "accounted", transcripts: bool = False, seed: int = 0):
    train = random_train(12, 15, seed=seed)
    graph = NormalizedBipartite.from_train(train, torch.float64)
    oracle = LightGCNPlus(graph, train, D, n_layers, 0.5, torch.Generator().manual_seed(seed), torch.float64)
    p = dict(oracle.named_parameters())
    fed = PGCN(
        train, p["item_emb"], p["item_w"], n_layers=n_layers, seed=seed, lr=0.05, reg=LAMBDA,
        crypto=crypto, transcripts=transcripts, frac_bits=44,  # type: ignore[arg-type]
    )  # fmt: skip
    return train, oracle, fed


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
    train, oracle, fed = _setup(n_layers=2)
    U, V = fed.final_embeddings()
    U_ref, V_ref = oracle.frozen_embeddings()
    assert rel_err(U, U_ref) < 1e-12 and rel_err(V, V_ref) < 1e-12
    users, pos, neg = _batch(train, np.random.default_rng(0))
    rec = fed.train_step(users, pos, neg)
    ref = oracle.batch_loss(users, pos, neg, LAMBDA).total.item()
    assert abs(rec.loss - ref) <= 1e-12 * abs(ref)


@pytest.mark.parametrize("n_layers", [1, 3])
def test_gradients_equal_per_client_star_backward(n_layers: int) -> None:
    train, _, fed = _setup(n_layers)
    rng = np.random.default_rng(n_layers)
    for _ in range(3):  # several steps: the tables move between them
        V0, W = fed.item.clone(), fed.item_w.clone()
        users, pos, neg = _batch(train, rng)
        rec = fed.train_step(users, pos, neg)
        gV, gW = _star_reference(train, V0, W, n_layers, users, pos, neg)
        assert rel_err(rec.item_grad, gV) < 1e-9
        assert rel_err(rec.w_grad, gW) < 1e-9


def test_dropped_paths_are_the_only_difference() -> None:
    """L = 0 has no path through another user: P-GCN's gradient is LightGCN+'s. L = 2 differs."""
    for n_layers, same in ((0, True), (2, False)):
        train, oracle, fed = _setup(n_layers)
        users, pos, neg = _batch(train, np.random.default_rng(5))
        rec = fed.train_step(users, pos, neg)
        oracle.batch_loss(users, pos, neg, LAMBDA).total.backward()
        err = max(rel_err(rec.item_grad, oracle.item_emb.grad), rel_err(rec.w_grad, oracle.item_w.grad))
        assert (err < 1e-9) if same else (err > 1e-3), (n_layers, err)


def test_training_lowers_the_loss() -> None:
    train, _, fed = _setup(n_layers=2)
    rng = np.random.default_rng(9)
    batches = [_batch(train, rng, n=40) for _ in range(4)]
    first = [fed.train_step(*b).loss for b in batches]
    for _ in range(30):
        for b in batches:
            fed.train_step(*b)
    last = [fed.train_step(*b).loss for b in batches]
    assert np.mean(last) < 0.7 * np.mean(first)


def test_server_sees_only_masked_uploads() -> None:
    train, _, fed = _setup(n_layers=1, crypto="real", transcripts=True)
    users, pos, neg = _batch(train, np.random.default_rng(2), n=20)
    fed.train_step(users, pos, neg)
    server = fed.net.transcript.of("server")
    # in the clear the server gets only public keys and the unmasking shares the protocol reveals
    plain = {"secagg-advertise-keys", "secagg-unmask"}
    assert server and all(e.protected for e in server if e.kind not in plain)
    assert {e.protection for e in server if e.kind == "secagg-masked-input"} == {"masked"}
    (entry,) = [e for e in server if e.kind == "secagg-masked-input"]
    assert sorted(entry.senders or []) == sorted(set(users.tolist()))
    n, N = len(set(users.tolist())), train.shape[1]
    assert fed.net.ledger.total_bytes("train/item-gradients/secagg-masked-input") == n * 2 * N * D * 8
