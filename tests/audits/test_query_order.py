"""What one round of item queries tells the server about positives (issue 30 §4).

The server reads its transcript of one round and names positives from the order of each query and
from negatives regenerated with the run seed; :func:`audit` / ``audit fedncf`` report both.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fedgraphrec.attacks.query_order import order_attack, seeded_attack, separate_by_ranks
from fedgraphrec.audits.queries import fedgrec_ranks, fedncf_ranks, fedpergnn_ranks
from fedgraphrec.audits.report import audit
from fedgraphrec.protocols.fedgrec.sampling import negatives_of
from fedgraphrec.training.data import prepare_interactions
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.protocol_learner import ProtocolLearner

SMALL = ["dataset_options.n_users=40", "dataset_options.n_items=60"]
ROUND = ["dim=4", "K=1", "clients_per_round=10", "n_negatives=8", "local_steps=1", "seed=3"]
"""Shared by the round-based protocols (``K``: FedGRec's only)."""


def _one_round(protocol: str, **extra: Any) -> tuple[Any, Any, Any]:
    model: dict[str, Any] = {"model": "ncf"} if protocol == "fedncf" else {}
    cfg = load_config(None, SMALL, protocol=protocol, dataset="synthetic", transcripts=True, shared=ROUND, **model,
                      **extra)  # fmt: skip
    data = prepare_interactions(cfg)
    learner = ProtocolLearner(cfg, data)
    learner.train_round(0)
    return cfg, learner.net.transcript, data.train


@pytest.mark.parametrize("protocol", ["fedgrec", "fedncf", "fedpergnn"])
def test_the_order_of_a_query_names_no_positive_beyond_chance(protocol: str) -> None:
    cfg, transcript, train = _one_round(protocol)
    leak = order_attack(transcript, train, cfg.settings.n_negatives)
    assert leak.queries == cfg.settings.clients_per_round and leak.named > 0
    # positives first would give precision 1 and recall 1; a sorted query gives about the chance level
    assert leak.precision < leak.chance_precision + 0.2, leak.summary()
    assert leak.recall < 0.9, leak.summary()


def test_separate_by_ranks_names_exactly_the_positives_the_seeded_ranks_expose() -> None:
    rng = np.random.default_rng(0)
    n_items, positives = 30, np.array([2, 3, 4, 11, 20, 21])
    negatives = negatives_of(positives, n_items, 5, np.random.default_rng(7))
    ranks = np.random.default_rng(7).choice(n_items - len(positives), 5, replace=False)
    query = rng.permutation(np.concatenate([positives, negatives]))
    named = separate_by_ranks(query, n_items, len(positives), ranks)
    assert named is not None and set(named.tolist()) <= set(positives.tolist()) and len(named) > 0
    wrong = (ranks + 1) % (n_items - len(positives))  # ranks the client did not draw
    got = separate_by_ranks(query, n_items, len(positives), wrong)
    assert got is None or set(got.tolist()) != set(named.tolist())


@pytest.mark.parametrize(
    ("protocol", "ranks"),
    [("fedgrec", fedgrec_ranks), ("fedncf", fedncf_ranks), ("fedpergnn", fedpergnn_ranks)],
)
def test_the_seeded_attack_replays_the_protocols_draw(protocol: str, ranks: Any) -> None:
    """Whatever it names is a true positive: the server's replay matches the seeded draw exactly."""
    cfg, transcript, train = _one_round(protocol)
    leak = seeded_attack(
        transcript, train, cfg.settings.n_negatives, ranks(cfg.seed, train.shape[1], cfg.settings.n_negatives)
    )
    assert leak.named == leak.correct  # precision 1 whenever the replay names something


def test_fedgrec_negatives_in_real_mode_cannot_be_regenerated_from_the_seed() -> None:
    """``crypto = "real"``: the CSPRNG draws the negatives; ``reproducible`` brings the seeded leak back."""
    for reproducible, leaks in ((True, True), (False, False)):
        cfg, transcript, train = _one_round("fedgrec", crypto="real", reproducible=reproducible)
        ranks = fedgrec_ranks(cfg.seed, train.shape[1], cfg.settings.n_negatives)
        leak = seeded_attack(transcript, train, cfg.settings.n_negatives, ranks)
        if leaks:
            assert leak.recall > 0.3 and leak.precision == 1.0, leak.summary()
        else:
            assert leak.correct <= 0.05 * leak.positives, leak.summary()


@pytest.mark.parametrize("protocol", ["fedgrec", "fedncf", "fedpergnn"])
def test_the_audit_reports_the_positives_named_from_one_round(protocol: str, tmp_path: Path) -> None:
    model: dict[str, Any] = {"model": "ncf"} if protocol == "fedncf" else {}
    cfg = load_config(None, SMALL, protocol=protocol, dataset="synthetic", shared=ROUND, **model)
    report = audit(cfg, 1, tmp_path)
    section = json.loads((tmp_path / "audit.json").read_text())["query_order"]
    assert section == json.loads(json.dumps(report["query_order"]))
    for attack in ("order", "seeded_negatives"):
        assert {"precision", "recall", "chance_precision", "named", "correct"} <= set(section[attack])
    assert "separates positives from one round" in (tmp_path / "audit.md").read_text()
