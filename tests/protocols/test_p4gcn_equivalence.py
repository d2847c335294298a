"""P4GCN's party programs compute the plaintext reference and the numbers the former class computed.

The former single-process class (``protocols/p4gcn/protocol.py``, messages through
``Network.transmit``) was checked bit for bit against the programs before it was deleted (commit
"P4GCN tests on the programs"); its numbers on this data are kept here as a regression
(:data:`FORMER_LOSSES`, :data:`FORMER_PREDICTIONS`). The centralized reference below computes
Algorithm 1 in plaintext without any message, from the same seed streams.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto.he.plain import PlainBackend
from fedgraphrec.models.propagation import NormalizedBipartite
from fedgraphrec.privacy.matrix_gaussian import clip_frobenius, normalized_adjacency
from fedgraphrec.protocols.p4gcn.driver import P4GCNRun
from fedgraphrec.protocols.p4gcn.recommender import Recommender
from fedgraphrec.protocols.p4gcn.schedule import batch_schedule
from fedgraphrec.protocols.p4gcn.settings import P4GCNSettings
from fedgraphrec.seeding import seeded_generator

N_USERS, N_ITEMS, DIM, SEED = 12, 10, 4, 3
FORMER_LOSSES = [1.5631000478986652, 1.5618127151371175]
"""Mean batch MSE of epochs 1–2 (``eps = 5``, seeded noise) of the former class."""
FORMER_PREDICTIONS = [3.0002946059834605, 3.0035024951416043, 3.004552310742143, 3.0042048333719307,
                      3.00282298675403, 3.0033256770910564]  # fmt: skip
"""Its predictions of the first six training records after the evaluation release."""


def _data() -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], sp.csr_matrix]:
    rng = np.random.default_rng(0)
    users = np.repeat(np.arange(N_USERS), 4)
    items = rng.integers(0, N_ITEMS, size=len(users))
    ratings = rng.integers(1, 6, size=len(users)).astype(float)
    a = np.triu(rng.random((N_USERS, N_USERS)) < 0.3, 1)
    return (users, items, ratings), sp.csr_matrix((a | a.T).astype(float))


def _reference(
    train: tuple[np.ndarray, ...], adj: sp.csr_matrix, s: P4GCNSettings
) -> tuple[list[float], Recommender]:
    """Algorithm 1 without noise, in plaintext, in one place: no parties, no messages, no HE."""
    users, items, ratings = train
    sched_ss, p1_ss, p2_ss = np.random.SeedSequence(SEED).spawn(3)
    schedule = batch_schedule(len(users), s.batch, s.epochs, np.random.default_rng(sched_ss))
    binary = sp.csr_matrix((np.ones(len(users)), (users, items)), shape=(N_USERS, N_ITEMS))
    graph = NormalizedBipartite.from_train(binary, dtype=torch.float64)
    model = Recommender(graph, s.backbone, s.dim, s.layers, s.beta, s.fusion, s.lr, s.social_lr, s.clip,
                        PlainBackend(), (1.0, 5.0), seeded_generator(int(p1_ss.generate_state(1)[0])))  # fmt: skip
    w1 = clip_frobenius(np.random.default_rng(p2_ss).standard_normal((s.dim, s.dim)), s.clip)
    lt = normalized_adjacency(adj, scale=1.0)  # L̃ without the 1/N the protocol scales out again
    per_epoch = -(-len(users) // s.batch)
    losses: list[float] = []
    for idx in schedule:
        b = np.unique(users[idx])
        y = np.asarray(lt[b] @ model.x_soc) @ w1
        loss, enc_g = model.local_step(b, y, users[idx], items[idx], ratings[idx])
        _, _, s_g = model._pending  # type: ignore[misc]
        g = enc_g.data * s_g
        delta = np.asarray(sp.csr_matrix(lt[b][:, b]) @ g) @ w1.T
        model.apply_social_update(PlainBackend().encrypt(delta / s_g / model.unscale))
        losses.append(loss)
    return [float(np.mean(losses[e * per_epoch : (e + 1) * per_epoch])) for e in range(s.epochs)], model


def test_programs_equal_the_plaintext_reference_without_noise() -> None:
    train, adj = _data()
    s = P4GCNSettings(method="p4gcn*", dim=DIM, batch=8, epochs=3, lr=0.05)
    run = P4GCNRun(train, N_USERS, N_ITEMS, adj, s, PlainBackend(2048), (1.0, 5.0), seed=SEED)
    got = [run.run_epoch(e) for e in range(s.epochs)]
    want, model = _reference(train, adj, s)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(run.p1.x_soc, model.x_soc, rtol=1e-10, atol=1e-14)
    users, items = train[0], train[1]
    y = torch.from_numpy(model.y_cache[users])
    ref = model.predict(torch.from_numpy(users), torch.from_numpy(items), y).detach().numpy()
    np.testing.assert_allclose(run.predict(users, items), ref, rtol=1e-12)


def test_programs_reproduce_the_former_class() -> None:
    train, adj = _data()
    s = P4GCNSettings(dim=DIM, batch=8, epochs=2, eps=5.0)
    run = P4GCNRun(train, N_USERS, N_ITEMS, adj, s, PlainBackend(2048), (1.0, 5.0), seed=SEED)
    np.testing.assert_allclose([run.run_epoch(e) for e in range(2)], FORMER_LOSSES, rtol=1e-13)
    run.final_release()
    np.testing.assert_allclose(run.predict(train[0], train[1])[:6], FORMER_PREDICTIONS, rtol=1e-13)
