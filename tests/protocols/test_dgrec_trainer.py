"""DGREC trainer: the Laplace noise of w/non-sharing, per-user evaluation, the plain-sharing update."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from fedgraphrec.evaluation.ranking import evaluate_embeddings
from fedgraphrec.privacy.noise_source import laplace_from_uniform
from fedgraphrec.protocols.dgrec.settings import DGRECSettings
from fedgraphrec.protocols.dgrec.trainer import DGREC
from fedgraphrec.seeding import numpy_rng


def test_laplace_noise_is_finite_at_the_edge_and_has_the_right_scale() -> None:
    edge = laplace_from_uniform(torch.tensor([0.0, 0.5, 1.0 - 2**-24]), 0.2)
    assert torch.isfinite(edge).all()  # torch.rand returns exact zeros: no infinite noise
    assert edge[1] == 0.0
    draws = laplace_from_uniform(torch.rand(200_000, generator=torch.Generator().manual_seed(0)), 0.2)
    assert abs(float(draws.mean())) < 0.005
    assert abs(float(draws.abs().mean()) - 0.2) < 0.005  # E|X| = b for Laplace(0, b)


def _toy_mf(hops: int = 1) -> DGREC:
    rng = np.random.default_rng(0)
    train = (sp.random(30, 25, density=0.2, random_state=rng, format="csr") > 0).astype(np.float64).tocsr()
    social = (sp.random(30, 30, density=0.2, random_state=rng, format="csr") > 0).astype(np.float64).tocsr()
    tags = sp.identity(25, format="csr")
    s = DGRECSettings(kind="mf", d=4, sharing="plain", hops=hops, lr=0.5)
    return DGREC(train, social, tags, s, seed=0)


def test_per_user_evaluation_equals_the_central_evaluator_on_the_same_embeddings() -> None:
    """DGREC.evaluate (each user's own model, train masked) = evaluate_embeddings, overall and on a subset."""
    rec = _toy_mf()
    g = torch.Generator().manual_seed(1)
    users, items = torch.randn(30, 4, generator=g), torch.randn(25, 4, generator=g)
    rec.models.params["E"][:] = items
    rec.models.params["user"][:] = users
    test = (sp.random(30, 25, density=0.1, random_state=2, format="csr") > 0).astype(np.float64).tocsr()
    test = (test - test.multiply(rec.train)).tocsr()
    test.eliminate_zeros()
    for subset in (None, np.arange(0, 30, 3)):
        ours = rec.evaluate(test, [rec.train], users=subset)
        ref = evaluate_embeddings(users, items, test, [rec.train], ks=(20,), users=subset).metrics
        assert ours["recall@20"] == pytest.approx(ref["recall@20"])
        assert ours["ndcg@20"] == pytest.approx(ref["ndcg@20"])


def test_plain_group_step_applies_the_mean_item_gradient_to_every_member_and_nobody_else() -> None:
    """A plain-sharing step moves every member's item table by lr · (group mean) and outsiders not at all."""
    rec = _toy_mf()
    links = {0: {1, 2}, 1: {0}, 2: {0}}
    before = {k: v.clone() for k, v in rec.models.params.items()}
    grads = rec.local_gradients(np.array([0, 1, 2]), numpy_rng(0, "probe"))
    rec.group_step(links, numpy_rng(0, "probe"))  # same stream: the same minibatches
    moved = before["E"] - rec.models.params["E"]
    expected = rec.s.lr * grads.mean(0).reshape(25, 4)
    for v in (0, 1, 2):
        assert torch.allclose(moved[v], expected, atol=1e-6)
    assert moved[3:].abs().sum() == 0 and (before["user"][3:] == rec.models.params["user"][3:]).all()
    assert not torch.equal(before["user"][0], rec.models.params["user"][0])


def test_a_diverged_member_stops_training_with_a_clear_error() -> None:
    """A NaN model must raise at once, not poison the Eq.-4 weights (numpy: 'Probabilities contain NaN')."""
    rec = _toy_mf()
    rec.models.params["user"][2] = float("nan")
    with pytest.raises(FloatingPointError, match=r"users \[2\].*lr=0.5"):
        rec.group_step({0: {1, 2}, 1: {0}, 2: {0}}, numpy_rng(0, "probe"))


def _toy_one_bit(secure: bool) -> DGREC:
    rng = np.random.default_rng(0)
    train = (sp.random(30, 25, density=0.2, random_state=rng, format="csr") > 0).astype(np.float64).tocsr()
    social = (sp.random(30, 30, density=0.2, random_state=rng, format="csr") > 0).astype(np.float64).tocsr()
    s = DGRECSettings(kind="mf", d=4, hops=1, lr=0.5, secure_noise=secure)
    return DGREC(train, social, sp.identity(25, format="csr"), s, seed=0)


def test_secure_noise_draws_one_bit_encodings_the_seed_cannot_regenerate() -> None:
    links = {0: {1, 2}, 1: {0}, 2: {0}}
    runs = {secure: [_toy_one_bit(secure) for _ in range(2)] for secure in (False, True)}
    for recs in runs.values():
        for rec in recs:
            rec.group_step(links, numpy_rng(0, "probe"))
    seeded, secure = runs[False], runs[True]
    assert seeded[0].noise.name == "seeded" and secure[0].noise.name == "csprng"
    assert torch.equal(seeded[0].models.params["E"], seeded[1].models.params["E"])
    assert not torch.equal(secure[0].models.params["E"], secure[1].models.params["E"])
