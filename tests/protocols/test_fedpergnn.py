"""FedPerGNN: with noise and pseudo items off, a round is exactly a 1-hop federated GNN trained user by
user (autograd reference, explicit neighbour lists); the privacy mechanisms change what the server sees;
the third party sees only tokens; real and accounted crypto give the same numbers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedgraphrec.attacks import upload_inference
from fedgraphrec.protocols.baselines.fedpergnn import FedPerGNN
from tests.helpers import random_train, rel_err

D = 4


def _make(train, crypto="accounted", transcripts=False, **kw) -> FedPerGNN:
    gen = torch.Generator().manual_seed(3)
    user0 = torch.randn(train.shape[0], D, generator=gen, dtype=torch.float64) * 0.3
    item0 = torch.randn(train.shape[1], D, generator=gen, dtype=torch.float64) * 0.3
    opts = dict(seed=1, clients_per_round=6, local_steps=3, n_negatives=4, lr=0.05, reg=1e-2)
    return FedPerGNN(train, user0, item0, crypto=crypto, transcripts=transcripts, **{**opts, **kw})


def _reference_round(fed: FedPerGNN, round_index: int, loss: str, expand: bool = True):
    """Each sampled user on its own: neighbours from explicit lists, its own Adam, then the server mean."""
    rs = fed.sample(round_index)
    t = fed.train
    user, item = fed.user.clone(), fed.item.clone()
    holders = [set(np.flatnonzero(t[:, i].toarray().ravel())) for i in range(t.shape[1])]
    sums, counts = torch.zeros_like(item), torch.zeros(item.shape[0], dtype=torch.float64)
    for k, u in enumerate(rs.clients):
        pos = rs.pos_items[rs.pos_ptr[k] : rs.pos_ptr[k + 1]]
        neg = rs.neg_items[rs.neg_ptr[k] : rs.neg_ptr[k + 1]]
        nbr = torch.stack(
            [
                torch.stack([fed.stale[v] for v in holders[i] - {u}]).mean(0)
                if len(holders[i]) > 1
                else torch.zeros(D, dtype=torch.float64)
                for i in pos
            ]
        )
        queried = np.unique(np.concatenate([pos, neg]))
        e = user[u].clone().requires_grad_(True)
        q = item[queried].clone().requires_grad_(True)
        opt = torch.optim.Adam([e, q], lr=fed.lr)
        row = {int(i): r for r, i in enumerate(queried)}
        for step in range(fed.local_steps):
            opt.zero_grad()
            h = e + (q[[row[int(i)] for i in pos]] + nbr).mean(0) if expand else e
            negs = rs.neg_items[rs.pair_neg[step][rs.pair_ptr[k] : rs.pair_ptr[k + 1]]]
            qi, qj = q[[row[int(i)] for i in pos]], q[[row[int(j)] for j in negs]]
            yi, yj = qi @ h, qj @ h
            per = torch.nn.functional.softplus(yj - yi) if loss == "bpr" else (yi - 1).square() + yj.square()
            sq = e.square().sum() + qi.square().sum(1) + qj.square().sum(1)
            (per + fed.reg / 2 * sq).mean().backward()
            opt.step()
        delta = (q.detach() - item[queried]).clone()
        moved = (delta != 0).any(1)
        sums[torch.from_numpy(queried)[moved]] += delta[moved]
        counts[torch.from_numpy(queried)[moved]] += 1
        user[u] = e.detach()
    return user, item + sums / counts.clamp_min(1)[:, None]


@pytest.mark.parametrize("loss", ["bpr", "mse"])
def test_noise_off_no_pseudo_is_a_one_hop_federated_gnn(loss: str) -> None:
    fed = _make(random_train(14, 12, density=0.35), n_pseudo=0, ldp_clip=0.0, ldp_scale=0.0, loss=loss)
    for r in range(3):
        user, item = _reference_round(fed, r, loss)
        fed.train_round(r)
        assert rel_err(fed.item, item) < 1e-10 and rel_err(fed.user, user) < 1e-10


def test_expand_off_is_federated_mf_and_uses_no_third_party() -> None:
    fed = _make(random_train(14, 12, density=0.35), n_pseudo=0, ldp_clip=0.0, ldp_scale=0.0, expand=False)
    for r in range(3):
        user, item = _reference_round(fed, r, "bpr", expand=False)
        fed.train_round(r)
        assert rel_err(fed.item, item) < 1e-10 and rel_err(fed.user, user) < 1e-10
    U, V = fed.final_embeddings()
    assert torch.equal(U, fed.user) and torch.equal(V, fed.item)
    assert fed.net.ledger.bytes_between("client", "third-party") == 0
    assert fed.net.ledger.bytes_between("third-party", "client") == 0
    assert fed.net.ledger.bytes_between("client", "server") > 0


def test_pseudo_items_and_ldp_change_what_the_server_sees() -> None:
    train = random_train(14, 30, density=0.2)
    clean = _make(train, transcripts=True, n_pseudo=0, ldp_clip=0.0, ldp_scale=0.0)
    guarded = _make(train, transcripts=True, n_pseudo=5, ldp_clip=0.05, ldp_scale=0.01)
    clean.train_round(0), guarded.train_round(0)
    (c_entry,) = [e for e in clean.net.transcript.of("server") if e.kind == "plain-upload"]
    (g_entry,) = [e for e in guarded.net.transcript.of("server") if e.kind == "plain-upload"]
    for (c_starts, _), (g_starts, g_vals) in zip(
        [p[0] for p in c_entry.payloads], [p[0] for p in g_entry.payloads], strict=True
    ):
        assert len(g_starts) == len(c_starts) + 5  # five pseudo items per user
        assert np.abs(g_vals).max() <= 0.05 + 20 * 0.01 * 10  # clipped, then noised
        assert not np.isin(g_starts, c_starts).all()
    # the support the server sees is less precise as a guess of the user's items
    p_clean = upload_inference(clean.net.transcript, train, D).summary()["mean_support_precision"]
    p_guard = upload_inference(guarded.net.transcript, train, D).summary()["mean_support_precision"]
    assert p_guard < p_clean


def test_third_party_sees_tokens_and_real_equals_accounted() -> None:
    train = random_train(10, 12, density=0.3)
    real, acc = _make(train, crypto="real", transcripts=True), _make(train)
    (entry,) = real.net.transcript.of("third-party")
    assert all(isinstance(tok, bytes) and len(tok) == 16 for payload in entry.payloads for tok in payload)
    everything = b"".join(tok for payload in entry.payloads for tok in payload)
    assert all(int(i).to_bytes(8, "little") not in everything for i in range(12))
    for r in range(2):
        real.train_round(r), acc.train_round(r)
    assert torch.equal(real.item, acc.item) and torch.equal(real.user, acc.user)
    assert real.net.ledger.total_bytes("setup") == acc.net.ledger.total_bytes("setup")


def test_training_lowers_the_loss() -> None:
    fed = _make(random_train(20, 15, density=0.3), clients_per_round=20, n_pseudo=2)
    losses = [fed.train_round(r)[0] for r in range(40)]
    assert np.mean(losses[-5:]) < 0.8 * np.mean(losses[:5])


def _uploaded_values(fed: FedPerGNN) -> np.ndarray:
    fed.train_round(0)
    (entry,) = [e for e in fed.net.transcript.of("server") if e.kind == "plain-upload"]
    return np.concatenate([np.asarray(p[0][1]).ravel() for p in entry.payloads])


def test_secure_noise_cannot_be_regenerated_from_the_seed() -> None:
    """Seeded LDP noise is the same in two runs of one seed (so whoever has the seed can subtract it);
    secure noise is not, while the clipped signal underneath is the same."""
    train = random_train(14, 30, density=0.2)
    opts = dict(transcripts=True, n_pseudo=0, ldp_clip=0.05, ldp_scale=0.01)
    seeded = [_uploaded_values(_make(train, **opts)) for _ in range(2)]
    np.testing.assert_array_equal(seeded[0], seeded[1])
    secure = [_uploaded_values(_make(train, secure_noise=True, **opts)) for _ in range(2)]
    diff = secure[0] - secure[1]
    assert np.all(diff != 0)
    # two independent Laplace(λ) draws differ with standard deviation 2λ
    assert diff.std() == pytest.approx(2 * 0.01, rel=0.3)
