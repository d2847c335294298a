"""DGREC learns under one-bit LDP sharing: the Eq.-2 loss scale, the unbiased decoded group mean.

The planted dataset: 4 user groups, each interacting only with its own quarter of the items; friends
are drawn within the group and the item tags are the quarters. A model that learned anything ranks a
user's unseen in-group items first (recall@20 near 1); random ranking gets ≈ 20/110.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from fedgraphrec.evaluation.reference import expected_random_recall, reference_metrics
from fedgraphrec.privacy.one_bit import decode_scale
from fedgraphrec.protocols.dgrec.model import ModelConfig
from fedgraphrec.protocols.dgrec.settings import DGRECSettings
from fedgraphrec.protocols.dgrec.trainer import DGREC
from fedgraphrec.seeding import numpy_rng


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """Tiny batched tensors: intra-op threads only contend (30 s instead of 2 s on a busy machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _planted(n_users: int = 80, n_items: int = 120, groups: int = 4) -> tuple[sp.csr_matrix, ...]:
    rng = np.random.default_rng(0)
    per = n_items // groups
    group = np.arange(n_users) % groups
    train, test, src, dst = [], [], [], []
    for u in range(n_users):
        items = rng.choice(per, 15, replace=False) + group[u] * per
        train += [(u, i) for i in items[:10]]
        test += [(u, i) for i in items[10:]]
        friends = rng.choice(np.flatnonzero(group == group[u]), 4, replace=False)
        src += [u] * len(friends)
        dst += friends.tolist()

    def csr(pairs: list[tuple[int, int]], shape: tuple[int, int]) -> sp.csr_matrix:
        u, i = np.asarray(pairs).T
        return sp.csr_matrix((np.ones(len(u)), (u, i)), shape=shape)

    item_tag = [(i, i // per) for i in range(n_items)]
    return (
        csr(train, (n_users, n_items)),
        csr(test, (n_users, n_items)),
        csr(list(zip(src, dst, strict=True)), (n_users, n_users)),
        csr(item_tag, (n_items, groups)),
    )


def _dgrec(loss_scale: str, sharing: str = "one_bit", step_path: str = "auto") -> tuple[DGREC, sp.csr_matrix]:
    train, test, social, tags = _planted()
    model = dict(d=8, n_interests=3, d_interest=6, hidden=(16, 8), loss_scale=loss_scale)
    s = DGRECSettings(**model, hops=2, fanout=3, lr=0.6, sharing=sharing, max_items=64, step_path=step_path)  # type: ignore[arg-type]
    return DGREC(train, social, tags, s, seed=0), test


@pytest.mark.parametrize("path", ["fast", "reference"])
def test_one_bit_dgrec_beats_random_and_popularity_on_a_planted_structure(path: str) -> None:
    """One epoch (every user a centre once) of one-bit DGREC at the paper's δ = 0.1, β = 1, on each path."""
    rec, test = _dgrec("eq2", step_path="auto" if path == "fast" else "reference")
    assert rec.path == path
    rec.epoch(0)
    ours = rec.evaluate(test, [rec.train])["recall@20"]
    chance = expected_random_recall(rec.train, test)
    assert chance == pytest.approx(20 / 110)
    assert reference_metrics("random", rec.train, test)["recall@20"] < 0.3
    assert reference_metrics("popularity", rec.train, test)["recall@20"] < 0.3
    assert ours > 0.5 and ours > 3 * chance  # measured 0.72; the per-pair mean scale gives 0.26


def test_eq2_loss_is_the_per_pair_mean_times_the_number_of_unobserved_items() -> None:
    """Known answer: BPR part of Eq. 3 under ``eq2`` = |I_u^-| × the ``mean`` scale's, Pearson/L2 equal."""
    values = {}
    for scale in ("eq2", "mean"):
        rec, _ = _dgrec(scale)
        users = np.arange(6)
        idx = torch.from_numpy(users)
        p = {k: v[idx] for k, v in rec.models.params.items()}
        values[scale] = rec._losses(p, users, numpy_rng(0, "probe")).detach()
        rec.models.cfg = ModelConfig(**{**rec.models.cfg.__dict__, "pearson": False, "l2": 0.0})
        values[scale + "-bpr"] = rec._losses(p, users, numpy_rng(0, "probe")).detach()
    n_neg = torch.full((6,), 120.0 - 10.0)
    assert torch.allclose(values["eq2-bpr"], n_neg * values["mean-bpr"], rtol=1e-5)
    rest = values["eq2"] - values["eq2-bpr"]
    assert torch.allclose(rest, values["mean"] - values["mean-bpr"], atol=1e-5)


@pytest.mark.parametrize("step_path", ["auto", "reference"])
def test_negatives_are_drawn_from_the_unobserved_items_only(step_path: str) -> None:
    rec, _ = _dgrec("eq2", step_path=step_path)
    users = np.arange(80)
    pos, neg, has, n_neg = rec._batch(users, numpy_rng(0, "probe"))
    for r, u in enumerate(users):
        held = set(rec.train[u].indices)
        assert set(pos[r].tolist()) <= held and not set(neg[r].tolist()) & held
    assert (n_neg == 110).all() and (has == 1).all()


def test_decoded_group_mean_is_unbiased_known_answer() -> None:
    """The trainer's one-bit path: the average decoded mean → the mean of the clipped gradients.

    Three members with known gradients (some beyond δ = 0.1): the known answer per coordinate is
    mean(clip(g_v)); over R repetitions the average decoded value lies within 5 standard errors
    (each decoded coordinate is a mean of ±c values, c = δ(e^β+1)/(e^β−1)).
    """
    rec, _ = _dgrec("eq2")
    g = torch.tensor(
        [[0.30, -0.05, 0.0, 0.08], [0.02, -0.20, 0.0, 0.08], [-0.01, -0.05, 0.0, 0.08]], dtype=torch.float64
    )
    known = torch.tensor([(0.1 + 0.02 - 0.01) / 3, (-0.05 - 0.1 - 0.05) / 3, 0.0, 0.08], dtype=torch.float64)
    assert torch.allclose(g.clamp(-0.1, 0.1).mean(0), known)
    links = {0: {1, 2}, 1: {0}, 2: {0}}
    reps = 3000
    est = torch.stack([rec._aggregate(g, links, np.arange(3))[0][0] for _ in range(reps)]).mean(0)  # member 0
    se = decode_scale(0.1, 1.0) / math.sqrt(3 * reps)
    assert torch.all((est - known).abs() < 5 * se), (est, known, se)
    assert abs(est[0].item() - g[:, 0].mean().item()) > 5 * se  # the unclipped mean is not the answer
