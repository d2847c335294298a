"""FedPerGNN's party programs: with noise and pseudo items off, a round is exactly a 1-hop federated GNN
trained user by user (autograd reference, explicit neighbour lists); the privacy mechanisms change what
the server sees; the third party sees only tokens; real and accounted crypto give the same numbers; one
node and three nodes give the same numbers (seeded noise included); secure noise is not the seed's."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from fedgraphrec.attacks.upload_inference import upload_inference
from fedgraphrec.evaluation.ranking import evaluate_embeddings
from fedgraphrec.protocols.base import EvalSplits, NodeData, shard_of
from fedgraphrec.protocols.baselines.fedpergnn.client import FedPerGNNClient
from fedgraphrec.protocols.baselines.fedpergnn.server import FedPerGNNServer
from fedgraphrec.protocols.baselines.fedpergnn.settings import FedPerGNNSettings
from fedgraphrec.protocols.baselines.shard_sampling import sample_shard
from fedgraphrec.runtime.local import LocalTransport
from fedgraphrec.runtime.network import Network
from fedgraphrec.runtime.state import state_from_arrays, state_to_arrays
from tests.helpers import random_train, rel_err

D = 4


@dataclass
class Fed:
    """One run's server, nodes and network (what the tests read)."""

    server: FedPerGNNServer
    programs: dict[int, FedPerGNNClient]
    net: Network
    train: sp.csr_matrix

    @property
    def settings(self) -> FedPerGNNSettings:
        return self.server.settings

    @property
    def item(self) -> torch.Tensor:
        return self.server.item

    @property
    def stale(self) -> torch.Tensor:
        return self.server.third_party.stale

    @property
    def user(self) -> torch.Tensor:
        out = torch.empty(self.train.shape[0], D, dtype=torch.float64)
        for p in self.programs.values():
            out[torch.from_numpy(p.clients)] = p.state.user
        return out

    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        self.server.predict()
        out = torch.empty(self.train.shape[0], D, dtype=torch.float64)
        for p in self.programs.values():
            ids, U, _ = p.prediction()
            out[torch.from_numpy(ids)] = U
        return out, self.server.items_for_evaluation()


def _make(train, nodes: int = 1, crypto="accounted", transcripts=False, test=None, **kw) -> Fed:
    gen = torch.Generator().manual_seed(3)
    user0 = torch.randn(train.shape[0], D, generator=gen, dtype=torch.float64) * 0.3
    item0 = torch.randn(train.shape[1], D, generator=gen, dtype=torch.float64) * 0.3
    opts = dict(seed=1, clients_per_round=6, local_steps=3, n_negatives=4, lr=0.05, reg=1e-2, crypto=crypto)
    settings = FedPerGNNSettings(**{**opts, **kw})
    splits = None if test is None else EvalSplits({"test": test}, {"test": [train]})
    data = NodeData(sp.csr_matrix(train), {"user_emb": user0, "item_emb": item0}, splits)
    n, m = train.shape
    programs = {k: FedPerGNNClient(settings, ids, data) for k, ids in shard_of(n, list(range(nodes))).items()}
    net = Network(n, crypto=crypto, transcripts=transcripts, protocol="fedpergnn")
    server = FedPerGNNServer(settings, LocalTransport(net, programs), n, m, {"item_emb": item0})
    server.setup()
    return Fed(server, programs, net, sp.csr_matrix(train))


def _reference_round(fed: Fed, round_index: int, loss: str, expand: bool = True):
    """Each sampled user on its own: neighbours from explicit lists, its own Adam, then the server mean."""
    s, t = fed.settings, fed.train
    t.sort_indices()
    clients = fed.server.sample_clients(round_index)
    rs = sample_shard(
        t,
        clients,
        clients,
        round_index,
        protocol="fedpergnn",
        seed=s.seed,
        n_negatives=s.n_negatives,
        local_steps=s.local_steps,
    )
    user, item, stale = fed.user.clone(), fed.item.clone(), fed.stale.clone()
    holders = [set(np.flatnonzero(t[:, i].toarray().ravel())) for i in range(t.shape[1])]
    sums, counts = torch.zeros_like(item), torch.zeros(item.shape[0], dtype=torch.float64)
    for k, u in enumerate(clients):
        pos = rs.pos_items[rs.pos_ptr[k] : rs.pos_ptr[k + 1]]
        neg = rs.neg_items[rs.neg_ptr[k] : rs.neg_ptr[k + 1]]
        nbr = torch.stack(
            [
                torch.stack([stale[v] for v in holders[i] - {u}]).mean(0)
                if expand and len(holders[i]) > 1
                else torch.zeros(D, dtype=torch.float64)
                for i in pos
            ]
        )
        queried = np.unique(np.concatenate([pos, neg]))
        e = user[u].clone().requires_grad_(True)
        q = item[queried].clone().requires_grad_(True)
        opt = torch.optim.Adam([e, q], lr=s.lr)
        row = {int(i): r for r, i in enumerate(queried)}
        for step in range(s.local_steps):
            opt.zero_grad()
            h = e + (q[[row[int(i)] for i in pos]] + nbr).mean(0) if expand else e
            negs = rs.neg_items[rs.pair_neg[step][rs.pos_ptr[k] : rs.pos_ptr[k + 1]]]
            qi, qj = q[[row[int(i)] for i in pos]], q[[row[int(j)] for j in negs]]
            yi, yj = qi @ h, qj @ h
            per = torch.nn.functional.softplus(yj - yi) if loss == "bpr" else (yi - 1).square() + yj.square()
            sq = e.square().sum() + qi.square().sum(1) + qj.square().sum(1)
            (per + s.reg / 2 * sq).mean().backward()
            opt.step()
        delta = (q.detach() - item[queried]).clone()
        moved = (delta != 0).any(1)
        sums[torch.from_numpy(queried)[moved]] += delta[moved]
        counts[torch.from_numpy(queried)[moved]] += 1
        user[u] = e.detach()
    return user, item + sums / counts.clamp_min(1)[:, None]


@pytest.mark.parametrize(("loss", "nodes"), [("bpr", 1), ("mse", 1), ("bpr", 3)])
def test_noise_off_no_pseudo_is_a_one_hop_federated_gnn(loss: str, nodes: int) -> None:
    fed = _make(random_train(14, 12, density=0.35), nodes, n_pseudo=0, ldp_clip=0.0, ldp_scale=0.0, loss=loss)
    for r in range(3):
        user, item = _reference_round(fed, r, loss)
        fed.server.train_round(r)
        assert rel_err(fed.item, item) < 1e-10 and rel_err(fed.user, user) < 1e-10


def test_expand_off_is_federated_mf_and_uses_no_third_party() -> None:
    fed = _make(
        random_train(14, 12, density=0.35), n_pseudo=0, ldp_clip=0.0, ldp_scale=0.0, local_graph=False
    )
    for r in range(3):
        user, item = _reference_round(fed, r, "bpr", expand=False)
        fed.server.train_round(r)
        assert rel_err(fed.item, item) < 1e-10 and rel_err(fed.user, user) < 1e-10
    U, V = fed.embeddings()
    assert torch.equal(U, fed.user) and torch.equal(V, fed.item)
    ledger = fed.net.ledger
    assert ledger.bytes_between("client", "third-party") == 0 == ledger.bytes_between("third-party", "client")
    assert ledger.bytes_between("client", "server") > 0
    assert not any(r.phase.startswith("setup/") and "key" in r.phase for r in ledger.rows())


def _items_and_values(block, n_items: int = 30) -> tuple[np.ndarray, np.ndarray]:
    """A plain upload's items and item-row values (rows ``(flat index, value)``: items, then counts)."""
    rows = np.asarray(block)
    first = rows[:, 0] < n_items * D
    return np.unique(rows[first, 0].astype(np.int64) // D), rows[first, 1]


def _uploads(fed: Fed) -> list:
    return [e for e in fed.net.transcript.of("server") if e.kind == "plain-upload"]


def test_pseudo_items_and_ldp_change_what_the_server_sees() -> None:
    train = random_train(14, 30, density=0.2)
    clean = _make(train, transcripts=True, n_pseudo=0, ldp_clip=0.0, ldp_scale=0.0)
    guarded = _make(train, transcripts=True, n_pseudo=5, ldp_clip=0.05, ldp_scale=0.01)
    clean.server.train_round(0), guarded.server.train_round(0)
    (c_entry,), (g_entry,) = _uploads(clean), _uploads(guarded)
    assert c_entry.senders == g_entry.senders and len(c_entry.payloads) == 6
    for c_block, g_block in zip(c_entry.payloads, g_entry.payloads, strict=True):
        (c_items, _), (g_items, g_values) = _items_and_values(c_block), _items_and_values(g_block)
        assert len(g_items) == len(c_items) + 5  # five pseudo items per user
        assert np.abs(g_values).max() <= 0.05 + 20 * 0.01 * 10  # clipped, then noised
        assert not np.isin(g_items, c_items).all()
    # the support the server sees is less precise as a guess of the user's items
    p_clean = upload_inference(clean.net.transcript, train, D).summary()["mean_support_precision"]
    p_guard = upload_inference(guarded.net.transcript, train, D).summary()["mean_support_precision"]
    assert p_guard < p_clean


def test_third_party_sees_tokens_and_real_equals_accounted() -> None:
    train = random_train(10, 12, density=0.3)
    real, acc = _make(train, crypto="real", transcripts=True), _make(train)
    (entry,) = [e for e in real.net.transcript.of("third-party") if e.phase == "setup/expand-upload"]
    assert entry.protection == "pseudonymous" and len(entry.payloads) == 10
    tail = D * 8  # each message: 16-byte tokens, then the user's embedding
    for u, blob in zip(entry.senders, entry.payloads, strict=True):
        assert len(blob) == 16 * train[u].nnz + tail
    everything = b"".join(blob[:-tail] for blob in entry.payloads)
    assert all(int(i).to_bytes(8, "little") not in everything for i in range(12))
    # the server relayed public keys and wrapped keys, never the key itself
    for p in real.programs.values():
        assert p.group_key() is not None and p.group_key() == real.programs[0].group_key()
    key = real.programs[0].group_key().to_bytes()
    assert all(
        key not in bytes(b)
        for e in real.net.transcript.of("server")
        for b in e.payloads
        if isinstance(b, bytes)
    )
    for r in range(2):
        real.server.train_round(r), acc.server.train_round(r)
    assert torch.equal(real.item, acc.item) and torch.equal(real.user, acc.user)
    for phase in ("setup/public-keys", "setup/wrapped-key", "setup/expand-upload"):
        assert real.net.ledger.total_bytes(phase) == acc.net.ledger.total_bytes(phase) > 0


def test_training_lowers_the_loss() -> None:
    fed = _make(random_train(20, 15, density=0.3), clients_per_round=20, n_pseudo=2)
    losses = [fed.server.train_round(r).loss for r in range(40)]
    assert np.mean(losses[-5:]) < 0.8 * np.mean(losses[:5])


@pytest.mark.parametrize("noise", ["seeded", "off"])
def test_one_node_and_three_nodes_give_the_same_numbers(noise: str) -> None:
    """Per-client streams: negatives, pairs, pseudo items and seeded noise do not depend on sharding."""
    train, test = random_train(17, 14, density=0.3, seed=1), random_train(17, 14, density=0.15, seed=2)
    kw = (
        dict(n_pseudo=3, ldp_clip=0.05, ldp_scale=0.01)
        if noise == "seeded"
        else dict(n_pseudo=0, ldp_scale=0.0)
    )
    one, three = _make(train, 1, test=test, **kw), _make(train, 3, test=test, **kw)
    for r in range(4):
        a, b = one.server.train_round(r), three.server.train_round(r)
        assert a.loss == pytest.approx(b.loss, rel=1e-12)
    assert rel_err(three.item, one.item) <= 1e-10 and rel_err(three.user, one.user) <= 1e-10
    (U1, V1), (U3, V3) = one.embeddings(), three.embeddings()
    assert rel_err(U3, U1) <= 1e-10 and rel_err(V3, V1) <= 1e-10
    exclude = [sp.csr_matrix(train)]
    m1 = evaluate_embeddings(U1.float(), V1.float(), test, exclude, ks=(5,)).metrics
    m3 = evaluate_embeddings(U3.float(), V3.float(), test, exclude, ks=(5,)).metrics
    assert m1 == m3
    fed1, fed3 = one.server.evaluate([5]), three.server.evaluate([5])  # federated: the nodes score
    assert fed1["test"] == pytest.approx(fed3["test"], rel=1e-10)
    assert fed1["test"]["recall@5"] == pytest.approx(m1["recall@5"], rel=1e-10)
    # the ledger of every phase but the per-node broadcasts is the same
    rows1 = {(r.phase, r.sender, r.receiver): r for r in one.net.ledger.rows()}
    rows3 = {(r.phase, r.sender, r.receiver): r for r in three.net.ledger.rows()}
    assert rows1.keys() == rows3.keys()
    for key, row in rows1.items():
        if key[0] not in ("predict/items", "evaluate/items"):
            assert row == rows3[key], key
    np.testing.assert_array_equal(one.net.ledger.client_sent, three.net.ledger.client_sent)


def test_a_node_state_survives_a_round_trip_through_arrays() -> None:
    """What a Flower node keeps in ``context.state`` between the query and the local stage."""
    train = random_train(14, 12, density=0.35)
    a, b = _make(train), _make(train)
    for fed in (a, b):
        fed.server.train_round(0)
    node = b.programs[0]
    b.server.transport.round  # noqa: B018 (the same server drives both runs)
    orig = node.stage_train_query

    def query_then_reload(step, request):
        reply = orig(step, request)
        node.state = state_from_arrays(type(node.state), state_to_arrays(node.state))
        return reply

    node.stage_train_query = query_then_reload  # type: ignore[method-assign]
    a.server.train_round(1), b.server.train_round(1)
    assert torch.equal(a.item, b.item) and torch.equal(a.user, b.user)


def _uploaded_values(fed: Fed) -> np.ndarray:
    fed.server.train_round(0)
    (entry,) = _uploads(fed)
    return np.concatenate([_items_and_values(p)[1] for p in entry.payloads])


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
