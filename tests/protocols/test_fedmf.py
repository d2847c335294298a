"""FedMF's party programs: exactly centralized BPR-MF (float64, fixed-point secure sum) on one node
and on three, the server sees only masked uploads, and the ledger counts the whole-table downloads
and dense uploads."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedgraphrec.crypto.fixed_point import FixedPoint
from fedgraphrec.models.mf import BPRMF
from fedgraphrec.models.propagation import NormalizedBipartite
from fedgraphrec.protocols.baselines.fedmf import SPEC
from fedgraphrec.protocols.baselines.fedmf.settings import FedMFSettings
from tests.helpers import ProgramsRun, random_train, rel_err

D = 4


def _setup(crypto: str, nodes: int = 1, transcripts: bool = False, seed: int = 0):
    train = random_train(12, 15, seed=seed)
    graph = NormalizedBipartite.from_train(train, torch.float64)
    oracle = BPRMF(graph, D, 0.5, torch.Generator().manual_seed(seed), torch.float64)
    params = {k: v.detach().clone() for k, v in oracle.named_parameters()}
    settings = FedMFSettings(lr=0.05, reg=1e-2, frac_bits=40)
    fed = ProgramsRun(SPEC, settings, train, params, nodes=nodes, crypto=crypto, transcripts=transcripts)
    return fed, oracle, torch.optim.Adam(oracle.parameters(), lr=0.05)


def _batch(rng: np.random.Generator, n: int = 9) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    users = torch.from_numpy(rng.integers(0, 12, n))
    pos = torch.from_numpy(rng.integers(0, 15, n))
    neg = torch.from_numpy(rng.integers(0, 15, n))
    return users, pos, neg


@pytest.mark.parametrize("nodes", [1, 3])
@pytest.mark.parametrize("crypto", ["accounted", "real"])
def test_steps_equal_centralized_bpr_mf(crypto: str, nodes: int) -> None:
    fed, oracle, opt = _setup(crypto, nodes)
    rng = np.random.default_rng(1)
    for _ in range(5):
        users, pos, neg = _batch(rng)
        rec = fed.server.train_step(users, pos, neg)
        opt.zero_grad()
        out = oracle.batch_loss(users, pos, neg, 1e-2)
        out.total.backward()
        opt.step()
        assert abs(rec.loss - out.total.item()) <= 1e-10 * abs(out.total.item())
        ref = dict(oracle.named_parameters())
        assert rel_err(fed.server.item, ref["item_emb"].detach()) < 1e-10
        assert rel_err(fed.gather(lambda p: p.state.user), ref["user_emb"].detach()) < 1e-10


def test_server_sees_only_masked_uploads() -> None:
    fed, _, _ = _setup("real", transcripts=True)
    users, pos, neg = _batch(np.random.default_rng(2), n=20)
    fed.server.train_step(users, pos, neg)
    (entry,) = [e for e in fed.net.transcript.of("server") if e.kind == "secagg-masked-input"]
    assert entry.protected and sorted(entry.senders or []) == sorted(set(users.tolist()))
    everything = np.concatenate([np.asarray(y).ravel() for y in entry.payloads])
    top = np.bincount((everything >> np.uint64(60)).astype(np.int64), minlength=16)
    assert top.min() > 0.4 * top.mean()  # high bits spread over the ring, not small fixed-point numbers
    plain_range = FixedPoint(40).scale * 100  # a plain gradient encoding would sit near 0 (mod 2^64)
    near_zero = np.minimum(everything, np.uint64(0) - everything) < np.uint64(plain_range)
    assert near_zero.mean() < 0.01


def test_ledger_whole_table_down_dense_vector_up() -> None:
    fed, _, _ = _setup("accounted")
    users, pos, neg = _batch(np.random.default_rng(3))
    fed.server.train_step(users, pos, neg)
    n = len(set(users.tolist()))
    led = fed.net.ledger
    assert led.total_bytes("train/download-items") == n * 15 * D * 8
    assert led.total_bytes("train/item-gradients/secagg-masked-input") == n * 15 * D * 8
