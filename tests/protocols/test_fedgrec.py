"""FedGRec's party programs: warm-up = LightGCN propagation, the latent invariant, batched round =
per-user reference, reductions (-last with K=1, K=0 = federated BPR-MF), dropout through secure
aggregation, the ledger against spec §3.5's per-user formulas, and three nodes = one node."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from benchmarks.fedgrec_reference import reference_round
from fedgraphrec.crypto.secagg.wire import SecAggAbortError
from fedgraphrec.models.propagation import NormalizedBipartite, propagate_layers
from fedgraphrec.protocols.fedgrec import SPEC
from fedgraphrec.protocols.fedgrec.sampling import sample_round
from fedgraphrec.protocols.fedgrec.settings import FedGRecSettings
from tests.helpers import ProgramsRun, random_train, rel_err

D = 4
EXACT = dict(frac_bits=40)  # fixed-point resolution 2^-40 ≈ 9e-13 per contribution


def _tables(train: sp.csr_matrix, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    M, N = train.shape
    return torch.randn(M, D, generator=g, dtype=torch.float64) * 0.3, torch.randn(
        N, D, generator=g, dtype=torch.float64
    ) * 0.3


def _settings(**kw: object) -> FedGRecSettings:
    base: dict[str, object] = dict(
        K=2, clients_per_round=6, local_steps=3, n_negatives=5, lr=0.05, reg=1e-2, seed=7, **EXACT
    )
    base.update(kw)
    return FedGRecSettings(**base)  # type: ignore[arg-type]


class Run(ProgramsRun):
    """FedGRec's programs with the old object's views: ``E``, ``U``, ``sample(r)``, ``train_round(r)``."""

    def __init__(
        self,
        train: sp.csr_matrix,
        crypto: str = "accounted",
        nodes: int = 1,
        transcripts: bool = False,
        **kw: object,
    ) -> None:
        user0, item0 = _tables(train)
        self.settings = _settings(**kw)
        self.train = train
        tables = {"user_emb": user0, "item_emb": item0}
        super().__init__(SPEC, self.settings, train, tables, nodes, crypto, transcripts)

    @property
    def E(self) -> torch.Tensor:
        return self.server.E

    @property
    def U(self) -> torch.Tensor:
        return self.gather(lambda p: p.state.user)

    def sample(self, r: int):
        s = self.settings
        return sample_round(self.train, r, s)

    def train_round(self, r: int):
        return self.server.train_round(r)

    def final_embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        self.server.predict()
        return self.gather(lambda p: p.state.final), self.server.items_for_evaluation()


def _graph_t(train: sp.csr_matrix) -> torch.Tensor:
    return torch.from_numpy(NormalizedBipartite.from_train(train, torch.float64).csr.T.toarray())


class TestWarmUp:
    @pytest.mark.parametrize("K", [1, 3])
    def test_equals_lightgcn_propagation(self, K: int) -> None:
        train = random_train(15, 19, seed=1)
        p = Run(train, K=K)
        user0, item0 = _tables(train)
        us, vs = propagate_layers(NormalizedBipartite.from_train(train, torch.float64), user0, item0, K)
        U = p.U
        for k in range(K + 1):
            assert rel_err(p.E[k], vs[k]) < 1e-10
            assert rel_err(U[k], us[k]) < 1e-10

    def test_real_crypto_gives_identical_tables_and_ledger(self) -> None:
        train = random_train(8, 9, seed=2)
        a, b = Run(train, "accounted", K=1), Run(train, "real", K=1)
        assert torch.equal(a.E, b.E) and torch.equal(a.U, b.U)
        assert a.net.ledger.rows() == b.net.ledger.rows()


class TestRound:
    @pytest.mark.parametrize(
        "extra",
        [
            dict(),
            dict(aggregation="concat"),
            dict(aggregation="last", K=3),
            dict(item_agg="mean_touched"),
            dict(K=0),
            dict(K=0, loss="mse", reg=1e-3, local_steps=1),  # FCF
            dict(K=1, loss="mse", aggregation="concat"),
            dict(optimizer="sgd", lr=0.5),
            dict(batch_mode="all_pairs"),
            dict(batch_mode="all_pairs", K=1, loss="mse", aggregation="last"),
        ],
    )
    def test_batched_round_equals_per_user_reference(self, extra: dict[str, object]) -> None:
        train = random_train(14, 30, density=0.2, seed=3)
        p = Run(train, **extra)  # type: ignore[arg-type]
        for r in range(3):
            E_ref, U_ref = reference_round(p.settings, p.E, p.U, train, p.sample(r))
            p.train_round(r)
            assert rel_err(p.E, E_ref) < 1e-10
            assert rel_err(p.U, U_ref) < 1e-10

    def test_latent_invariant_holds_after_rounds(self) -> None:
        train = random_train(20, 25, seed=4)
        p = Run(train, K=3, clients_per_round=5)
        for r in range(8):
            p.train_round(r)
        RT, U = _graph_t(train), p.U
        for k in range(3):
            assert rel_err(p.E[k + 1], RT @ U[k]) < 1e-10

    def test_last_with_K1_equals_mean_with_K1(self) -> None:
        train = random_train(12, 16, seed=5)
        a, b = Run(train, K=1), Run(train, K=1, aggregation="last")
        for r in range(4):
            a.train_round(r)
            b.train_round(r)
        assert torch.equal(a.E, b.E) and torch.equal(a.U, b.U)
        ua, va = a.final_embeddings()
        ub, vb = b.final_embeddings()
        assert torch.equal(ua, ub) and torch.equal(va, vb)

    def test_K0_is_federated_bpr_mf(self) -> None:
        """K = 0: no latents at all; the round is per-user BPR-MF with summed item deltas (FedeRank)."""
        train = random_train(12, 20, seed=6)
        p = Run(train, K=0)
        assert p.E.shape[0] == 1 and p.net.ledger.total_bytes("warmup/propagate") == 0
        for r in range(3):
            E_ref, U_ref = reference_round(p.settings, p.E, p.U, train, p.sample(r))
            p.train_round(r)
            assert rel_err(p.E, E_ref) < 1e-10 and rel_err(p.U, U_ref) < 1e-10
        users, items = p.final_embeddings()
        assert torch.equal(users, p.U[0]) and torch.equal(items, p.E[0])

    def test_real_secure_aggregation_gives_identical_round(self) -> None:
        train = random_train(9, 11, seed=7)
        a = Run(train, "accounted", K=1, clients_per_round=5, dropout_after=0.2)
        b = Run(train, "real", K=1, clients_per_round=5, dropout_after=0.2)
        for r in range(2):
            ra, rb = a.train_round(r), b.train_round(r)
            assert ra == rb
        assert torch.equal(a.E, b.E) and torch.equal(a.U, b.U)
        assert a.net.ledger.rows() == b.net.ledger.rows()

    def test_same_seed_same_numbers(self) -> None:
        train = random_train(10, 12, seed=8)
        a, b = Run(train), Run(train)
        for r in range(2):
            a.train_round(r)
            b.train_round(r)
        assert torch.equal(a.E, b.E)


@pytest.mark.parametrize("crypto", ["accounted", "real"])
def test_three_nodes_equal_one_node(crypto: str) -> None:
    """Shards replay the round's public streams: same draws, same sums, same numbers and ledger."""
    train = random_train(17, 23, density=0.25, seed=14)
    kw = dict(K=2, clients_per_round=9, dropout_before=0.15, dropout_after=0.15)
    one, three = Run(train, crypto, nodes=1, **kw), Run(train, crypto, nodes=3, **kw)  # type: ignore[arg-type]
    for r in range(3):
        a, b = one.train_round(r), three.train_round(r)
        assert (a.clients, a.clients_lost, a.clients_recovered) == (
            b.clients,
            b.clients_lost,
            b.clients_recovered,
        )
        assert abs(a.loss - b.loss) <= 1e-10 * abs(a.loss)
    assert rel_err(three.E, one.E) < 1e-10 and rel_err(three.U, one.U) < 1e-10
    for x, y in zip(one.final_embeddings(), three.final_embeddings(), strict=True):
        assert rel_err(y, x) < 1e-10

    def rows(run):
        return {(r.phase, r.sender, r.receiver): (r.messages, r.payload_bytes) for r in run.net.ledger.rows()}

    one_rows, three_rows = rows(one), rows(three)
    assert {k: v for k, v in three_rows.items() if not k[0].startswith("predict")} == {
        k: v for k, v in one_rows.items() if not k[0].startswith("predict")
    }
    assert np.array_equal(one.net.ledger.client_sent, three.net.ledger.client_sent)


class TestDropout:
    def test_users_lost_before_upload_keep_their_state(self) -> None:
        train = random_train(16, 14, seed=9)
        p = Run(train, clients_per_round=10, dropout_before=0.3, dropout_after=0.1)
        rs = p.sample(0)
        U_before = p.U.clone()
        rec = p.train_round(0)
        assert rec.clients_lost == 3 and rec.clients_recovered == 1 and len(rs.drop_before) == 3
        lost = torch.from_numpy(rs.drop_before)
        U = p.U
        assert torch.equal(U[:, lost], U_before[:, lost])
        kept = torch.from_numpy(np.setdiff1d(rs.clients, rs.drop_before))
        assert not torch.equal(U[0, kept], U_before[0, kept])
        RT = _graph_t(
            train
        )  # the invariant survives dropouts: lost users contributed nothing and kept nothing
        for k in range(2):
            assert rel_err(p.E[k + 1], RT @ U[k]) < 1e-10

    def test_refuses_below_threshold(self) -> None:
        train = random_train(16, 14, seed=10)
        p = Run(
            train, clients_per_round=10, dropout_before=0.6, secagg_threshold=0.5, secagg_semi_honest=True
        )
        with pytest.raises(SecAggAbortError, match="only 4 clients left, below the threshold 5"):
            p.train_round(0)

    def test_a_threshold_at_or_below_half_needs_the_semi_honest_flag(self) -> None:
        with pytest.raises(ValueError, match=r"secagg_threshold must exceed 0.5 \(t > n/2\).*dropouts"):
            FedGRecSettings(secagg_threshold=0.5)
        assert FedGRecSettings(secagg_threshold=0.5, secagg_semi_honest=True).secagg_threshold == 0.5
        assert FedGRecSettings().secagg_threshold > 0.5

    def test_bad_settings_name_the_parameter(self) -> None:
        with pytest.raises(ValueError, match="aggregation"):
            FedGRecSettings(aggregation="max")
        with pytest.raises(ValueError, match="dropout_before"):
            FedGRecSettings(dropout_before=1.5)


class TestLedger:
    def test_per_user_bytes_match_spec_formulas(self) -> None:
        """Spec §3.5: download (K+1)|T̃_u|d floats; upload (K+1)Nd ring words (here 8 bytes each)."""
        train = random_train(12, 40, density=0.15, seed=11)
        K, d, N = 2, D, 40
        p = Run(train, K=K, n_negatives=7)
        sent0, recv0 = p.net.ledger.client_sent.copy(), p.net.ledger.client_received.copy()
        rs = p.sample(0)
        p.train_round(0)
        q = np.diff(rs.pos_ptr) + np.diff(rs.neg_ptr)
        led = p.net.ledger
        assert led.bytes_between("server", "client", "train/download") == int(((K + 1) * q * d * 8).sum())
        assert led.total_bytes("train/query") == int((q * 4).sum())
        assert led.total_bytes("train/upload/secagg-masked-input") == len(rs.clients) * (K + 1) * N * d * 8
        S = len(rs.clients)
        per_user_sent = led.client_sent - sent0
        expected = q * 4 + (K + 1) * N * d * 8 + 68 + (S - 1) * 112 + 40 * S
        assert np.array_equal(per_user_sent[rs.clients], expected)
        per_user_recv = led.client_received - recv0
        expected_recv = (K + 1) * q * d * 8 + 68 * S + (S - 1) * 112 + 4 * S
        assert np.array_equal(per_user_recv[rs.clients], expected_recv)
        others = np.setdiff1d(np.arange(12), rs.clients)
        assert (per_user_sent[others] == 0).all() and (per_user_recv[others] == 0).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_round_matches_cpu() -> None:
    train = random_train(14, 30, density=0.2, seed=12)
    cpu, gpu = Run(train), Run(train, device="cuda")
    for r in range(3):
        assert cpu.train_round(r) == gpu.train_round(r)
    assert rel_err(gpu.E.cpu(), cpu.E) < 1e-10 and rel_err(gpu.U.cpu(), cpu.U) < 1e-10
    assert cpu.net.ledger.rows() == gpu.net.ledger.rows()


def test_server_receives_only_masked_uploads() -> None:
    """Real secure aggregation: every upload the server holds is a uniform-looking ring vector."""
    train = random_train(10, 12, seed=13)
    p = Run(
        train, "real", K=1, clients_per_round=6, local_steps=2, n_negatives=4, frac_bits=32, transcripts=True
    )
    p.train_round(0)
    masked = [e for e in p.net.transcript.of("server") if e.kind == "secagg-masked-input"]
    assert [e.phase for e in masked][-1] == "train/upload/secagg-masked-input"
    everything = np.concatenate([np.asarray(y).ravel() for e in masked for y in e.payloads])
    top = np.bincount((everything >> np.uint64(60)).astype(np.int64), minlength=16)
    assert top.min() > 0.5 * top.mean()  # a plain fixed-point delta would sit near 0 mod 2^64
    assert all(e.protected for e in masked)
