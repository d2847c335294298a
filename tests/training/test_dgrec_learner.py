"""DGREC's learner: epochs, full-catalogue scores, a checkpoint that resumes the same run, randomness."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.data.types import Interactions
from fedgraphrec.protocols.dgrec.settings import DGRECSettings
from fedgraphrec.reproduce.dgrec_runs import train_epochs
from fedgraphrec.training.dgrec_learner import DGRECData, DGRECLearner


def _data() -> DGRECData:
    rng = np.random.default_rng(0)
    train = (sp.random(30, 25, density=0.2, random_state=rng, format="csr") > 0).astype(np.float64).tocsr()
    test = (sp.random(30, 25, density=0.05, random_state=rng, format="csr") > 0).astype(np.float64).tocsr()
    test = (test - test.multiply(train)).tocsr()
    test.eliminate_zeros()
    social = (sp.random(30, 30, density=0.2, random_state=rng, format="csr") > 0).astype(np.float64).tocsr()
    inter = Interactions(name="toy", n_users=30, n_items=25, train=train, test=test)
    return DGRECData(inter, social, sp.identity(25, format="csr"))


def _learner(
    crypto: str = "accounted", reproducible: bool | None = None, transcripts: bool = False, **given: object
) -> DGRECLearner:
    s = DGRECSettings.for_variant("dmf", d=4, centres_per_epoch=8, **given).for_run(0, crypto, reproducible)
    return DGRECLearner(s, _data(), transcripts=transcripts)


def test_a_checkpoint_resumes_the_same_run() -> None:
    whole = _learner()
    for e in range(3):
        whole.train_round(e)
    first = _learner()
    first.train_round(0)
    state = first.state_dict()
    assert all(isinstance(v, torch.Tensor | int | dict) for v in state.values())  # no pickled objects
    resumed = _learner()
    resumed.load_state_dict(state)
    for e in (1, 2):
        resumed.train_round(e)
    for k, v in whole.rec.models.params.items():
        assert torch.equal(v, resumed.rec.models.params[k]), k
    assert whole.ledger.total_bytes() == resumed.ledger.total_bytes() > 0


def test_scores_rank_the_catalogue_and_the_loop_evaluates() -> None:
    learner = _learner()
    scores = learner.score_users(torch.arange(5))
    assert scores.shape == (5, 25) and torch.isfinite(scores).all()
    curve, metrics, _ = train_epochs(
        lambda cfg, _: learner, learner.data.interactions, learner.settings,
        protocol="dgrec", seed=0, epochs=2, eval_every=1,
    )  # fmt: skip
    assert [c["epoch"] for c in curve] == [1, 2] and all("test" in c for c in curve)
    assert set(metrics) == {"recall@20", "ndcg@20"}
    assert learner.run_summary()["variant"] == "dmf" and learner.pop_deviation() is None


def test_reproducible_follows_the_crypto_mode_unless_given() -> None:
    assert _learner("accounted").rec.noise.name == "seeded"
    real = _learner("real")
    assert real.rec.noise.name == "csprng" and real.settings.secure_sampling
    assert _learner("real", reproducible=True).rec.noise.name == "seeded"


def test_the_summary_says_which_group_step_ran() -> None:
    """Fast where no individual message is observed; the reference with transcripts, laplace or forced."""
    assert _learner().run_summary()["dgrec_path"] == "fast"
    assert _learner("real").run_summary()["dgrec_path"] == "fast"  # CSPRNG draws on the fast path too
    assert _learner(transcripts=True).run_summary()["dgrec_path"] == "reference"
    assert _learner(step_path="reference").run_summary()["dgrec_path"] == "reference"
    assert _learner(sharing="laplace").run_summary()["dgrec_path"] == "reference"
