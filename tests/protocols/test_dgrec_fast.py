"""DGREC's fast group step against the reference step: exact gradients, the decoded mean's distribution,
the ledger, the minibatch distribution.

Statistical tests run at a fixed overall false-alarm rate α = 1e-3 (Bonferroni over coordinates)
with fixed seeds, so they are deterministic; a wrong Binomial count, a dropped coordinate or a
wrong scale moves the decoded distribution by many standard errors.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from scipy import stats

from fedgraphrec.privacy.noise_source import SecureNoise, SeededNoise
from fedgraphrec.privacy.one_bit import decode_scale, prob_plus_one, sum_of_zero_encodings
from fedgraphrec.protocols.dgrec.fast_step import minibatch, touched_rows
from fedgraphrec.protocols.dgrec.sampling import sample_group
from fedgraphrec.protocols.dgrec.settings import DGRECSettings
from fedgraphrec.protocols.dgrec.trainer import DGREC
from fedgraphrec.runtime.network import Network
from fedgraphrec.seeding import numpy_rng

ALPHA = 1e-3


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _data(n_users: int = 40, n_items: int = 30) -> tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]:
    rng = np.random.default_rng(0)
    train = (sp.random(n_users, n_items, density=0.15, random_state=rng, format="lil") > 0).astype(np.float64)
    train = sp.lil_matrix(train)
    train[0, :] = 0  # a user without training items
    train[1, :] = 1  # a user holding every item (no negatives to draw)
    social = (sp.random(n_users, n_users, density=0.15, random_state=rng, format="csr") > 0).astype(float)
    tags = (sp.random(n_items, 6, density=0.3, random_state=rng, format="csr") > 0).astype(float).tocsr()
    return sp.csr_matrix(train), social.tocsr(), tags


def _dgrec(network: Network | None = None, **given: object) -> DGREC:
    train, social, tags = _data()
    model = {"d": 4, "n_interests": 3, "d_interest": 3, "hidden": (4, 4), "max_items": 12, "l2": 0.05}
    s = DGRECSettings(**{**model, "hops": 2, "public_ratio": 0.5, **given})  # type: ignore[arg-type]
    return DGREC(train, social, tags, s, seed=1, network=network)


MODELS = {
    "dgrec": {},
    "mf": {"kind": "mf", "loss_scale": "mean"},
    "lgn": {"kind": "lgn"},
    "bipartite": {"hypergraph": False},  # tag nodes: extra embedding rows
    "no-item-graph": {"item_graph": False, "pearson": False},
}


@pytest.mark.parametrize("name", MODELS)
def test_touched_row_gradients_and_losses_equal_the_dense_ones_bit_for_bit(name: str) -> None:
    """Compact tables: the same losses, the dense gradient on every touched row, zero everywhere else.

    The L2 weight is large (0.05) so that a regulariser reading any other row would show there.
    """
    rec = _dgrec(**MODELS[name])
    assert rec._fast is not None
    users = np.arange(0, 40, 3)
    pos, neg = minibatch(rec.train, users, rec.s.batch, numpy_rng(0, "probe"))
    idx, g = torch.from_numpy(users), rec.graphs
    dense = {k: v[idx].clone().requires_grad_(True) for k, v in rec.models.params.items()}
    has = torch.from_numpy((rec.deg[users] > 0).astype(np.float32))
    n_neg = torch.from_numpy((rec.train.shape[1] - rec.deg[users]).astype(np.float32))
    ref = rec.models.losses(
        dense,
        g.items[idx],
        g.mask[idx],
        g.prop[idx],
        torch.from_numpy(pos),
        torch.from_numpy(neg),
        has,
        n_neg,
    )
    ref.sum().backward()
    fast, p, t = rec._fast.losses(users, pos, neg)
    fast.sum().backward()
    assert torch.equal(fast, ref)
    full, compact = dense["E"].grad, p["E"].grad
    assert full is not None and compact is not None
    assert torch.equal(compact[t.member, t.slot], full[t.member, t.row])
    untouched = torch.ones(full.shape[:2], dtype=torch.bool)
    untouched[t.member, t.row] = False
    assert untouched.any() and bool((full[untouched] == 0).all())
    assert bool((compact.abs().sum(-1) > 0).sum() <= len(t.row))  # nothing outside the touched slots
    for k in dense:
        if k != "E":
            assert torch.equal(p[k].grad, dense[k].grad), k  # type: ignore[arg-type]


# ---------------------------------------------------------------- the decoded mean's distribution
ROWS = np.array([[0, 1, 1], [1, 2, 2], [0, 0, 0], [3, 4, 1], [1, 1, 1]])  # member × rows it touches
GRADS = {  # (member, row) → the member's gradient on that row (d = 2); row 5 nobody touches
    (0, 0): (0.30, -0.02), (0, 1): (0.05, 0.0), (1, 1): (-0.20, 0.07), (1, 2): (0.0, 0.0),
    (2, 0): (0.09, -0.15), (3, 3): (0.01, 0.12), (3, 4): (-0.04, 0.0), (3, 1): (0.11, -0.01),
    (4, 1): (-0.06, 0.03),
}  # fmt: skip
N_ROWS, D, M = 6, 2, 5


def _toy_one_bit(**given: object) -> tuple[DGREC, dict[int, set[int]]]:
    train, social, tags = _data(n_users=8, n_items=N_ROWS)
    s = DGRECSettings(kind="mf", d=D, hops=1, **given)  # type: ignore[arg-type]
    return DGREC(train, social, tags, s, seed=0), {0: {1, 2, 3, 4}, 1: {0}, 2: {0}, 3: {0}, 4: {0}}


def _gradients() -> tuple[np.ndarray, torch.Tensor, torch.Tensor]:
    """The touched layout, the touched gradients ``[K, d]`` and the dense ``[m, n_s]`` equivalent."""
    t = touched_rows(ROWS, N_ROWS)
    touched = torch.tensor([GRADS[(int(v), int(r))] for v, r in zip(t.member, t.row, strict=True)])
    flat = torch.zeros(M, N_ROWS, D)
    flat[t.member, t.row] = touched
    return t, touched, flat.reshape(M, -1)


def _exact_pmf(flat: torch.Tensor, delta: float, beta: float) -> list[np.ndarray]:
    """Per coordinate: the exact law of the sum of the m encodings, over S = -m, …, m."""
    p = prob_plus_one(flat.double(), delta, beta).numpy()
    out = []
    for j in range(flat.shape[1]):
        pmf = np.array([1.0])
        for v in range(flat.shape[0]):
            pmf = np.convolve(pmf, [1 - p[v, j], 0.0, p[v, j]])
        out.append(pmf)
    return out


def _sums(decoded: np.ndarray, c: float) -> np.ndarray:
    """Decoded means back to integer sums of encodings (index into S = -m, …, m shifted by m)."""
    s = np.rint(decoded * M / c).astype(np.int64)
    assert np.allclose(s * c / M, decoded)
    return s + M


def _fit(sample: np.ndarray, pmf: np.ndarray) -> float:
    """Chi-square goodness of fit p-value; bins with expected count < 5 pooled into one."""
    n = len(sample)
    counts = np.bincount(sample, minlength=len(pmf))
    if len(counts) > len(pmf) or counts[pmf == 0].any():
        return 0.0  # a value the law never takes
    big = pmf * n >= 5
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(pmf[big] * n, pmf[~big].sum() * n)
    keep = exp > 0
    if keep.sum() < 2:
        return 1.0
    return float(stats.chisquare(obs[keep], exp[keep]).pvalue)


def _draw_fast(rec: DGREC, reps: int) -> np.ndarray:
    t, touched, _ = _gradients()
    assert rec._fast is not None
    return np.stack([rec._fast.aggregate(M, t, touched, {})["E"].reshape(-1).numpy() for _ in range(reps)])


def test_decoded_means_of_the_two_paths_have_the_same_exact_law() -> None:
    """Per coordinate, 3000 draws per path: both fit the exact law, and the two samples agree."""
    rec, links = _toy_one_bit()
    s = rec.s
    c = decode_scale(s.delta, s.beta)
    _, _, flat = _gradients()
    pmf = _exact_pmf(flat, s.delta, s.beta)
    # the law's first two moments are the closed forms: E = mean clip(g), Var = (c/m)² Σ (1 - μ_v²)
    mu_v = flat.double().clamp(-s.delta, s.delta).numpy() / c
    values = (np.arange(-M, M + 1) * c / M)[None, :]
    mean = np.stack([(values[0] * q).sum() for q in pmf])
    var = np.stack([(values[0] ** 2 * q).sum() for q in pmf]) - mean**2
    assert np.allclose(mean, mu_v.mean(0) * c, atol=1e-12)
    assert np.allclose(var, (c / M) ** 2 * (1 - mu_v**2).sum(0), atol=1e-12)
    reps = 3000
    fast = _draw_fast(rec, reps)
    ref = np.stack(
        [rec._aggregate(flat, links, np.arange(M))[0][0].numpy() for _ in range(reps)]
    )  # every member decodes the same; member 0's
    level = ALPHA / flat.shape[1]
    z = stats.norm.isf(level / 2)
    for j, q in enumerate(pmf):
        f, r = _sums(fast[:, j], c), _sums(ref[:, j], c)
        assert _fit(f, q) > level and _fit(r, q) > level, j
        table = np.stack([np.bincount(f, minlength=2 * M + 1), np.bincount(r, minlength=2 * M + 1)])
        table = table[:, table.sum(0) > 0]
        if table.shape[1] > 1:
            assert stats.chi2_contingency(table).pvalue > level, j
        # the sample moments against the exact ones
        mu4 = ((values[0] - mean[j]) ** 4 * q).sum()
        assert abs(fast[:, j].mean() - mean[j]) < z * math.sqrt(var[j] / reps), j
        assert abs(fast[:, j].var() - var[j]) < z * math.sqrt(max(mu4 - var[j] ** 2, 1e-30) / reps), j


def test_the_fast_sum_under_secure_noise_fits_the_exact_law() -> None:
    """CSPRNG draws (not repeatable): a goodness of fit at 1e-6 per run, so a false alarm is rare."""
    rec, _ = _toy_one_bit(secure_noise=True)
    assert rec.noise.name == "csprng" and rec.path == "fast"
    s = rec.s
    _, _, flat = _gradients()
    fast = _draw_fast(rec, 2000)
    for j, q in enumerate(_exact_pmf(flat, s.delta, s.beta)):
        assert _fit(_sums(fast[:, j], decode_scale(s.delta, s.beta)), q) > 1e-6 / flat.shape[1], j


@pytest.mark.parametrize("source", ["seeded", "csprng"])
def test_sums_of_zero_encodings_are_binomial(source: str) -> None:
    noise = SecureNoise() if source == "csprng" else SeededNoise(generator=torch.Generator().manual_seed(5))
    counts = np.array([0, 1, 2, 63, 64, 65, 121])
    draws = sum_of_zero_encodings(np.tile(counts, (4000, 1)), noise)
    assert draws.shape == (4000, len(counts)) and (draws[:, 0] == 0).all()
    assert ((draws + counts) % 2 == 0).all() and (np.abs(draws) <= counts).all()
    for j, n in enumerate(counts[1:], start=1):
        pmf = stats.binom.pmf(np.arange(n + 1), n, 0.5)
        assert _fit((draws[:, j] + n) // 2, pmf) > (ALPHA if source == "seeded" else 1e-6) / len(counts)
    with pytest.raises(ValueError, match="counts must be >= 0"):
        sum_of_zero_encodings(np.array([3, -1]), noise)


# ---------------------------------------------------------------- ledger, minibatches, paths
@pytest.mark.parametrize("sharing", ["one_bit", "clipped", "plain", "none"])
def test_ledger_rows_of_the_fast_step_equal_the_floods(sharing: str) -> None:
    """The same groups through both paths book the same rows, message counts, bytes and per-user totals."""
    nets = {path: Network(40) for path in ("auto", "reference")}
    recs = {path: _dgrec(nets[path], sharing=sharing, step_path=path) for path in nets}
    assert recs["auto"].path == "fast" and recs["reference"].path == "reference"
    rng = np.random.default_rng(3)
    for centre in range(0, 40, 4):
        links = sample_group(recs["auto"].social, centre, 2, 3, np.ones(40), rng)
        for rec in recs.values():
            rec.group_step(links, numpy_rng(0, "group", centre))
    fast, ref = nets["auto"].ledger, nets["reference"].ledger
    assert fast.rows() == ref.rows()
    assert (fast.client_sent == ref.client_sent).all() and (fast.client_received == ref.client_received).all()
    flooded = sum(r.messages for r in ref.rows() if r.phase.startswith("dgrec/flood"))
    assert (flooded > 0) == (sharing != "none")


def test_minibatches_draw_positives_and_negatives_uniformly() -> None:
    train, _, _ = _data()
    users = np.array([0, 1, 2, 5])
    pos, neg = zip(*(minibatch(train, users, 16, numpy_rng(0, "mb", i)) for i in range(400)), strict=True)
    p, n = np.concatenate(pos, axis=1).T, np.concatenate(neg, axis=1).T  # [draws, user]
    held = set(train[2].indices.tolist())
    assert (p[:, 0] == 0).all()  # no items: positives are padding (has_pos = 0)
    assert set(p[:, 2].tolist()) <= held and not set(n[:, 2].tolist()) & held
    own = np.searchsorted(np.sort(list(held)), p[:, 2])
    assert _fit(own, np.full(len(held), 1 / len(held))) > ALPHA
    others = np.setdiff1d(np.arange(30), list(held))
    assert _fit(np.searchsorted(others, n[:, 2]), np.full(len(others), 1 / len(others))) > ALPHA
    assert len(set(p[:, 1].tolist())) == 30  # holds every item (its negatives cannot avoid them)


def test_the_path_follows_what_is_observed() -> None:
    assert _dgrec().path == "fast"
    assert _dgrec(Network(40, transcripts=True)).path == "reference"  # audits read individual messages
    assert _dgrec(step_path="reference").path == "reference"
    assert _dgrec(sharing="laplace").path == "reference"
    with pytest.raises(ValueError, match="step_path"):
        _dgrec(step_path="fastest")
