"""P4GCN protocol: sandwich correctness per backend, in-batch-only updates, transcript, ledger.

P4GCN runs as three party programs over the in-process transport (:class:`P4GCNRun`).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from fedgraphrec.crypto.he import make_backend
from fedgraphrec.crypto.he.base import HEBackend
from fedgraphrec.protocols.p4gcn.driver import P4GCNRun
from fedgraphrec.protocols.p4gcn.roles import CIPHER_PHASES, PH_GRAD, PH_IDS, PH_SETUP_X, PH_SYNC, SOCIAL
from fedgraphrec.protocols.p4gcn.settings import P4GCNSettings
from fedgraphrec.runtime.network import Network

N_USERS, N_ITEMS, DIM = 12, 10, 4


def _data(seed: int = 0) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], sp.csr_matrix]:
    rng = np.random.default_rng(seed)
    users = np.repeat(np.arange(N_USERS), 4)
    items = rng.integers(0, N_ITEMS, size=len(users))
    ratings = rng.integers(1, 6, size=len(users)).astype(float)
    a = np.triu(rng.random((N_USERS, N_USERS)) < 0.3, 1)
    return (users, items, ratings), sp.csr_matrix((a | a.T).astype(float))


def _backend(name: str) -> HEBackend:
    if name == "paillier":
        pytest.importorskip("phe")
        pytest.importorskip("gmpy2")
        return make_backend(name, key_bits=512)
    if name.startswith("ckks"):
        pytest.importorskip("tenseal")
    if name == "ckks-packed":
        return make_backend(name, dim=DIM)
    return make_backend(name)


def _settings(**kw: object) -> P4GCNSettings:
    """Test settings; ``noise=False`` is the method ``p4gcn*``."""
    method = "p4gcn" if kw.pop("noise", True) else "p4gcn*"
    return P4GCNSettings(**{"method": method, "dim": DIM, "batch": 8, "epochs": 1, **kw})  # type: ignore[arg-type]


def _proto(name: str, net: Network | None = None, **kw: object) -> P4GCNRun:
    train, adj = _data()
    return P4GCNRun(
        train, N_USERS, N_ITEMS, adj, _settings(**kw), _backend(name), (1.0, 5.0), seed=3, network=net
    )


@pytest.mark.parametrize("name", ["plain", "paillier", "ckks", "ckks-packed"])
def test_sandwich_forward_equals_lxw_without_noise(name: str) -> None:
    p = _proto(name, noise=False)
    users = np.array([1, 4, 7])
    got = p.p1.social_rows(p.p2.forward(users))
    want = np.asarray(p.p2.lt[users] @ p.p1.x_soc) @ p.p2.w1 * N_USERS
    tol = {"ckks": 1e-4, "ckks-packed": 1e-6}.get(name, 1e-8)
    np.testing.assert_allclose(got, want, atol=tol)


@pytest.mark.parametrize("name", ["plain", "paillier"])
def test_one_backward_step_changes_only_in_batch_rows(name: str) -> None:
    p = _proto(name, noise=True, eps=5.0)
    before = p.p1.x_soc.copy()
    batch_users = set(np.unique(p.users[p.schedule[0]]).tolist())
    assert len(batch_users) < N_USERS
    p.step()
    changed = np.flatnonzero(np.abs(p.p1.x_soc - before).sum(1) > 0)
    assert set(changed.tolist()) <= batch_users and len(changed) > 0


def test_social_transcript_holds_only_ciphertexts() -> None:
    pytest.importorskip("phe")
    net = Network(n_clients=0, crypto="real", transcripts=True)
    p = _proto("paillier", net=net, noise=True)
    p.step()
    got = net.transcript.of(SOCIAL)
    assert got
    for entry in got:
        if entry.phase == PH_IDS:
            assert not entry.protected and entry.kind == "batch_user_ids"
            continue
        assert entry.protected and entry.payloads  # one serialised ciphertext per matrix element
        assert all(isinstance(b, bytes) and len(b) == p.backend.ct_bytes for b in entry.payloads)  # type: ignore[attr-defined]


def test_social_transcript_holds_only_ckks_ciphertexts() -> None:
    seal = pytest.importorskip("tenseal.sealapi")
    net = Network(n_clients=0, crypto="real", transcripts=True)
    p = _proto("ckks-packed", net=net, noise=True)
    p.step()
    assert p.p2.enc_x is not None and all(isinstance(ct, seal.Ciphertext) for ct in p.p2.enc_x.data)
    got = net.transcript.of(SOCIAL)
    assert {e.phase for e in got} == {PH_IDS, PH_SETUP_X, PH_GRAD, PH_SYNC}  # what the social party receives
    for entry in got:
        if entry.phase == PH_IDS:
            continue
        assert entry.protected and entry.payloads  # one serialised ciphertext per packed row or block
        assert all(isinstance(b, bytes) and len(b) > 100_000 for b in entry.payloads)


def test_ledger_equals_ciphertext_formula() -> None:
    p = _proto("plain")
    for e in range(1):
        p.run_epoch(e)
    ct = p.backend.ct_bytes  # type: ignore[attr-defined]
    sum_b = sum(len(np.unique(p.users[i])) for i in p.schedule)
    cipher = sum(p.net.ledger.total_bytes(ph) for ph in CIPHER_PHASES)
    assert cipher == ct * (N_USERS * DIM + 4 * sum_b * DIM)


def test_dp_budget_is_met_and_backends_draw_identical_noise() -> None:
    p = _proto("plain", eps=3.0)
    p.run_epoch(0)
    p.final_release()
    assert 0 < p.p2.accountant.epsilon(1e-4) <= 3.0 + 1e-9
    users = np.array([0, 5])
    plain, real = _proto("plain", eps=3.0), _proto("paillier", eps=3.0)
    a = plain.p1.social_rows(plain.p2.forward(users))
    b = real.p1.social_rows(real.p2.forward(users))
    np.testing.assert_allclose(a, b, atol=1e-8)


def test_noise_free_run_is_deterministic_and_learns() -> None:
    p, q = (_proto("plain", noise=False, epochs=30, lr=0.05) for _ in range(2))
    ratings = p.ratings
    baseline = float(np.mean((ratings - ratings.mean()) ** 2))  # predicting the mean rating
    losses = [p.run_epoch(e) for e in range(30)]
    for e in range(30):
        q.run_epoch(e)
    np.testing.assert_array_equal(p.p1.x_soc, q.p1.x_soc)
    np.testing.assert_array_equal(p.predict(p.users, p.items), q.predict(q.users, q.items))
    train_mse = float(np.mean((p.predict(p.users, p.items) - ratings) ** 2))
    assert losses[-1] < 0.5 * losses[0]
    assert train_mse < 0.5 * baseline, (train_mse, baseline)


def test_default_calibration_is_a_dp_guarantee_independent_of_the_graph() -> None:
    """σ comes from a data-independent bound: two social graphs give the same noise scale."""
    train, adj = _data()
    dense = sp.csr_matrix(np.ones((N_USERS, N_USERS)) - np.eye(N_USERS))
    cfg = _settings(eps=3.0)
    runs = [
        P4GCNRun(train, N_USERS, N_ITEMS, a, cfg, _backend("plain"), (1.0, 5.0), seed=3) for a in (adj, dense)
    ]
    for r in runs:
        assert np.ptp(r.p2.sigma) == 0 and r.releases == 2 * len(r.schedule) + 1
    assert runs[0].p2.sigma[0] == runs[1].p2.sigma[0]
    p = runs[0]
    p.run_epoch(0)
    p.final_release()
    report = p.privacy()
    assert report["dp_guarantee"] is True and report["sensitivity"] == "global"
    assert report["epsilon_spent"] == pytest.approx(3.0, rel=1e-6) and report["delta"] == 1e-4
    local = _proto("plain", eps=3.0, sensitivity="paper-local")
    assert np.ptp(local.p2.sigma) > 0 and local.privacy()["dp_guarantee"] is False
    with pytest.raises(ValueError, match="sensitivity must be one of"):
        _proto("plain", sensitivity="strict")


def test_secure_noise_differs_between_runs_of_one_seed() -> None:
    users = np.arange(N_USERS)

    def release(**kw: object) -> tuple[P4GCNRun, np.ndarray]:
        p = _proto("plain", eps=3.0, **kw)
        return p, p.p1.social_rows(p.p2.forward(users))

    (seeded, a), (_, b) = release(), release()
    assert seeded.privacy()["noise_source"] == "seeded"
    np.testing.assert_array_equal(a, b)  # whoever has the seed regenerates the noise
    (p, c), (_, d) = release(secure_noise=True), release(secure_noise=True)
    assert p.privacy()["noise_source"] == "csprng"
    assert not np.allclose(c, d)
    # the same signal underneath: c - d is the difference of two noises of the calibrated size
    sigma = p.p2.sigma[0] * p.p1.s_x * p.p1.unscale
    assert np.std(c - d) == pytest.approx(np.sqrt(2) * sigma, rel=0.5)
    assert np.std(a - c) == pytest.approx(np.sqrt(2) * sigma, rel=0.5)


@pytest.mark.parametrize("name", ["ckks", "ckks-packed", "paillier"])
def test_real_he_training_matches_plain(name: str) -> None:
    plain, real = _proto("plain", eps=5.0), _proto(name, eps=5.0)
    for _ in range(2):
        plain.step()
        real.step()
    tol = {"ckks": 1e-4, "ckks-packed": 1e-6}.get(name, 1e-8)
    np.testing.assert_allclose(real.p1.x_soc, plain.p1.x_soc, atol=tol)
    users, items = plain.users, plain.items
    np.testing.assert_allclose(real.predict(users, items), plain.predict(users, items), atol=10 * tol)
