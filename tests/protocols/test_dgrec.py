"""DGREC: group sampling bounds, flooding completeness over the runtime network, transcripts free of
raw gradients and private items, per-user model independence, unbiased group updates."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from fedgraphrec.privacy.one_bit import decode_scale, encode
from fedgraphrec.protocols.dgrec.gossip import flood, message_bytes
from fedgraphrec.protocols.dgrec.model import ModelConfig
from fedgraphrec.protocols.dgrec.sampling import sample_group, sampling_weights
from fedgraphrec.protocols.dgrec.settings import DGRECSettings
from fedgraphrec.protocols.dgrec.trainer import DGREC
from fedgraphrec.runtime.network import Network
from fedgraphrec.runtime.peer import PeerTransport


def _random_graph(n: int, p: float, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    a = sp.random(n, n, density=p, random_state=rng, format="csr")
    a = ((a + a.T) > 0).astype(np.float64).tocsr()
    a.setdiag(0)
    a.eliminate_zeros()
    return a


def _diameter_ok(links: dict[int, set[int]], centre: int, hops: int) -> bool:
    dist = {centre: 0}
    frontier = [centre]
    while frontier:
        nxt = []
        for v in frontier:
            for w in links[v]:
                if w not in dist:
                    dist[w] = dist[v] + 1
                    nxt.append(w)
        frontier = nxt
    return len(dist) == len(links) and max(dist.values()) <= hops


@pytest.mark.parametrize("seed", range(5))
def test_group_size_bound_and_connectivity(seed: int) -> None:
    adj = _random_graph(600, 0.05, seed)  # mean degree ≈ 60, so the bound is the binding limit
    rng = np.random.default_rng(seed)
    w = sampling_weights(rng.random(600) + 0.1, rng.integers(0, 5, 600).astype(float))
    for centre in range(0, 600, 60):
        links = sample_group(adj, centre, 4, 3, w, rng)
        assert len(links) <= 1 + 3 + 9 + 27 + 81
        assert all(v in links[w_] for v, ns in links.items() for w_ in ns)  # symmetric
        assert all(adj[v, w_] for v, ns in links.items() for w_ in ns)  # only real edges
        assert _diameter_ok(links, centre, 4)


def test_sampling_prefers_high_loss_low_count() -> None:
    adj = sp.csr_matrix(np.array([[0, 1, 1], [1, 0, 0], [1, 0, 0]], dtype=float))
    w = sampling_weights(np.array([1.0, 10.0, 1.0]), np.array([0.0, 0.0, 50.0]))
    rng = np.random.default_rng(0)
    picks = [next(iter(sample_group(adj, 0, 1, 1, w, rng)[0])) for _ in range(500)]
    assert np.mean(np.asarray(picks) == 1) > 0.9
    with pytest.raises(ValueError, match="fanout"):
        sample_group(adj, 0, 1, 0, w, rng)


def test_flooding_delivers_every_encoded_vector_in_2h_rounds_and_ledger_counts_links() -> None:
    adj = _random_graph(300, 0.04, 1)
    rng = np.random.default_rng(1)
    links = sample_group(adj, 0, 3, 3, np.ones(300), rng)
    n_s = 37
    gen = torch.Generator().manual_seed(0)
    msgs = {v: (1000 + i, encode(torch.randn(n_s), 0.1, 1.0, gen)) for i, v in enumerate(sorted(links))}
    net = Network(300, transcripts=True)
    held = flood(links, msgs, 3, PeerTransport(net))
    ids = {m[0] for m in msgs.values()}
    assert all(set(h) == ids for h in held.values())
    # each member receives every other member's message exactly once (de-duplicated flooding)
    assert net.ledger.total_messages() == len(links) * (len(links) - 1)
    assert net.ledger.total_bytes() == len(links) * (len(links) - 1) * message_bytes(n_s)
    # with too few rounds a long group is incomplete
    path = {0: {1}, 1: {0, 2}, 2: {1, 3}, 3: {2}}
    short = flood(path, {v: (v, torch.ones(1, dtype=torch.int8)) for v in path}, 1)
    assert len(short[0]) < 4


def _toy(seed: int = 0) -> tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]:
    rng = np.random.default_rng(seed)
    n_users, n_items = 40, 30
    train = sp.random(n_users, n_items, density=0.15, random_state=rng, format="csr")
    train.data[:] = 1.0
    social = _random_graph(n_users, 0.15, seed)
    tags = (sp.random(n_items, 6, density=0.3, random_state=rng, format="csr") > 0).astype(float).tocsr()
    return train.tocsr(), social, tags


def test_no_raw_gradient_or_private_item_in_any_transcript() -> None:
    train, social, tags = _toy()
    net = Network(40, transcripts=True)
    s = DGRECSettings(d=4, n_interests=3, d_interest=3, hidden=(4, 4), public_ratio=0.5)
    rec = DGREC(train, social, tags, s, seed=3, network=net)
    private = rec.train - rec.public.multiply(rec.train)
    private.eliminate_zeros()
    for c in range(5):
        rec.step(c)
    got = net.transcript.of("user")
    kinds = {e.kind for e in got}
    assert kinds == {"public_items", "one_bit_gradient"}
    for e in got:
        if e.kind == "one_bit_gradient":
            for x in e.payloads:
                assert x.dtype == torch.int8 and set(x.unique().tolist()) <= {-1, 1}
        else:
            assert e.senders is not None and len(e.payloads) > 0
            for sender, items in zip(e.senders, e.payloads, strict=True):
                priv = set(private[sender].indices.tolist())
                assert not priv & set(items.tolist())
    assert net.ledger.total_bytes() > 0


def test_group_update_is_decoded_mean_and_outsiders_untouched() -> None:
    train, social, tags = _toy(1)
    s = DGRECSettings(d=4, n_interests=3, d_interest=3, hidden=(4, 4), hops=1, fanout=2)
    rec = DGREC(train, social, tags, s, seed=0)
    before = {k: v.clone() for k, v in rec.models.params.items()}
    rec.step(0)
    moved = (rec.models.params["E"] - before["E"]).flatten(1).abs().sum(1) > 0
    members = np.flatnonzero(moved.numpy())
    assert 0 in members and len(members) <= 3
    # every member applied the same decoded update: lr · c · (mean of ±1 over |U| messages)
    delta = (rec.models.params["E"][members] - before["E"][members]).abs()
    c = decode_scale(s.delta, s.beta)
    grid = delta / (s.lr * c / len(members))
    assert torch.allclose(grid, grid.round(), atol=1e-3)
    assert torch.allclose(delta[0], delta[-1])


def test_memory_is_linear_in_users_and_items() -> None:
    from fedgraphrec.protocols.dgrec.model import UserModels

    m = UserModels(10, 50, ModelConfig(d=8), torch.Generator().manual_seed(0))
    assert m.params["E"].shape == (10, 50, 8)
    assert torch.equal(m.params["E"][0], m.params["E"][9])  # identical start for everyone

    def mem(n: int, items: int) -> int:
        return UserModels(n, items, ModelConfig(d=8), torch.Generator().manual_seed(0)).memory_bytes()

    # linear in users (no state shared across or between pairs of users) and affine in items, with
    # exactly one d-float row per (user, item): an n×n or m×m table anywhere would break these
    assert mem(20, 50) == 2 * mem(10, 50) and mem(30, 50) == 3 * mem(10, 50)
    assert mem(10, 150) - mem(10, 100) == mem(10, 100) - mem(10, 50) == 10 * 50 * 8 * 4
    per_user = m.memory_bytes() / 10
    # Flixster: 3,000 users × 3,000 items at d = 16 stays far below 8 GB
    est = 3000 * (3000 * 16 * 4 + (per_user - 50 * 8 * 4))
    assert est < 8e9


def test_communication_formula_ratio_is_dr_over_2h() -> None:
    from fedgraphrec.protocols.dgrec.trainer import comm_bits_formula

    ours, floats = comm_bits_formula(1000, 4, 3)
    assert ours == 2 * 4 * 1000 * 40 and floats == 64 * 1000 * 40
    assert floats / ours == 8


def test_a_peer_refuses_flood_messages_from_outside_its_links_out_of_round_or_malformed() -> None:
    from fedgraphrec.crypto.errors import IntegrityError
    from fedgraphrec.protocols.dgrec.gossip import UserPeer, flood_tree
    from fedgraphrec.runtime.peer import PeerMessage

    t = PeerTransport(Network(4))
    tree = flood_tree({0: {1}, 1: {0, 2}, 2: {1}}, 0)
    size = message_bytes(5)
    for v in range(4):
        t.register(v, UserPeer(v, frozenset(), np.zeros(0, np.int64), 0))
    for v in range(3):
        t.peers[v].join(tree[v], (10 + v, torch.ones(5, dtype=torch.int8)), "one_bit_gradient", size)  # type: ignore[attr-defined]
        t.peers[v].start_round("dgrec/flood/round=0")  # type: ignore[attr-defined]
    x = torch.ones(5, dtype=torch.int8)

    def forged(sender: int, receiver: int, phase: str = "dgrec/flood/round=0", **kw: object) -> PeerMessage:
        args: dict = {"payload": x, "size": size, "tag": 99, **kw}
        return PeerMessage(phase, "one_bit_gradient", sender, receiver, **args)

    with pytest.raises(IntegrityError, match="expected peers"):
        t.send([forged(2, 0)])  # 2 is not 0's neighbour in the group
    with pytest.raises(IntegrityError, match="not expected at all"):
        t.send([forged(2, 3)])  # 3 is not in the group
    with pytest.raises(IntegrityError, match="phase"):
        t.send([forged(1, 0, "dgrec/flood/round=1")])  # a later round's message now
    with pytest.raises(IntegrityError, match="wrong shape or dtype"):
        t.send([forged(1, 0, payload=torch.ones(5))])
    with pytest.raises(IntegrityError, match="delivered twice"):
        t.send([forged(1, 0, tag=10)])  # 0's own id coming back


def test_public_item_lists_are_refused_after_set_up() -> None:
    from fedgraphrec.crypto.errors import IntegrityError
    from fedgraphrec.runtime.peer import PeerMessage

    train, social, tags = _toy()
    rec = DGREC(train, social, tags, DGRECSettings(d=4, n_interests=3, d_interest=3, hidden=(4, 4)), seed=0)
    assert all(len(p.received_public) == len(p.neighbours) for p in rec.peers.values())
    u, v = (int(x) for x in np.transpose(rec.social.nonzero())[0])
    late = PeerMessage("dgrec/public_items", "public_items", u, v, np.zeros(1, np.int64), 8)
    with pytest.raises(IntegrityError, match="not expected at all"):
        rec.transport.send([late])
