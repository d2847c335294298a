"""FedMF: exactly centralized BPR-MF (float64, fixed-point secure sum), the server sees only masked
uploads, and the ledger counts the whole-table downloads and dense uploads."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedgraphrec.crypto.sharing import FixedPoint
from fedgraphrec.models import BPRMF, NormalizedBipartite
from fedgraphrec.protocols.baselines import FedMF
from tests.helpers import random_train, rel_err

D = 4


def _setup(crypto: str, transcripts: bool = False, seed: int = 0) -> tuple[FedMF, BPRMF, torch.optim.Adam]:
    train = random_train(12, 15, seed=seed)
    graph = NormalizedBipartite.from_train(train, torch.float64)
    oracle = BPRMF(graph, D, 0.5, torch.Generator().manual_seed(seed), torch.float64)
    params = dict(oracle.named_parameters())
    fed = FedMF(
        train,
        params["user_emb"],
        params["item_emb"],
        seed=seed,
        lr=0.05,
        reg=1e-2,
        crypto=crypto,
        transcripts=transcripts,
        frac_bits=40,  # type: ignore[arg-type]
    )
    return fed, oracle, torch.optim.Adam(oracle.parameters(), lr=0.05)


def _batch(rng: np.random.Generator, n: int = 9) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    users = torch.from_numpy(rng.integers(0, 12, n))
    pos = torch.from_numpy(rng.integers(0, 15, n))
    neg = torch.from_numpy(rng.integers(0, 15, n))
    return users, pos, neg


@pytest.mark.parametrize("crypto", ["accounted", "real"])
def test_steps_equal_centralized_bpr_mf(crypto: str) -> None:
    fed, oracle, opt = _setup(crypto)
    rng = np.random.default_rng(1)
    for _ in range(5):
        users, pos, neg = _batch(rng)
        rec = fed.train_step(users, pos, neg)
        opt.zero_grad()
        out = oracle.batch_loss(users, pos, neg, 1e-2)
        out.total.backward()
        opt.step()
        assert abs(rec.loss - out.total.item()) <= 1e-10 * abs(out.total.item())
        ref = dict(oracle.named_parameters())
        for name, table in fed.parameters_by_name().items():
            assert rel_err(table, ref[name].detach()) < 1e-10, name


def test_server_sees_only_masked_uploads() -> None:
    fed, _, _ = _setup("real", transcripts=True)
    users, pos, neg = _batch(np.random.default_rng(2), n=20)
    fed.train_step(users, pos, neg)
    (entry,) = [e for e in fed.net.transcript.of("server") if e.kind == "secagg-masked-input"]
    assert entry.protected and sorted(entry.senders or []) == sorted(set(users.tolist()))
    everything = np.concatenate([np.asarray(y) for y in entry.payloads])
    top = np.bincount((everything >> np.uint64(60)).astype(np.int64), minlength=16)
    assert top.min() > 0.4 * top.mean()  # high bits spread over the ring, not small fixed-point numbers
    plain_range = FixedPoint(40).scale * 100  # a plain gradient encoding would sit near 0 (mod 2^64)
    near_zero = np.minimum(everything, np.uint64(0) - everything) < np.uint64(plain_range)
    assert near_zero.mean() < 0.01


def test_ledger_whole_table_down_dense_vector_up() -> None:
    fed, _, _ = _setup("accounted")
    users, pos, neg = _batch(np.random.default_rng(3))
    fed.train_step(users, pos, neg)
    n = len(set(users.tolist()))
    led = fed.net.ledger
    assert led.total_bytes("train/download-items") == n * 15 * D * 8
    assert led.total_bytes("train/item-gradients/secagg-masked-input") == n * 15 * D * 8
