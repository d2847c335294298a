"""The server recovers FedGRec users' interactions by intersecting their queries across rounds."""

from __future__ import annotations

import pytest
import torch

from fedgraphrec.attacks.query_intersection import query_intersection
from fedgraphrec.protocols.fedgrec import SPEC
from fedgraphrec.protocols.fedgrec.settings import FedGRecSettings
from tests.helpers import ProgramsRun, random_train


def _run(transcripts: bool, rounds: int = 12) -> tuple[ProgramsRun, object]:
    train = random_train(40, 200, density=0.08, seed=3)
    g = torch.Generator().manual_seed(0)
    settings = FedGRecSettings(K=1, clients_per_round=20, local_steps=1, n_negatives=30, seed=1)
    tables = {"user_emb": torch.randn(40, 4, generator=g), "item_emb": torch.randn(200, 4, generator=g)}
    p = ProgramsRun(SPEC, settings, train, tables, transcripts=transcripts)
    for r in range(rounds):
        p.server.train_round(r)
    return p, train


def test_intersection_converges_to_the_private_items() -> None:
    p, train = _run(True)
    result = query_intersection(p.net.transcript, train, min_rounds=2)  # type: ignore[arg-type]
    assert len(result.users) > 20
    assert (result.recall == 1.0).all()  # positives are in every query
    often = result.rounds_seen >= 4
    assert often.any() and result.precision[often].mean() > 0.95
    assert result.exact_fraction > 0.9
    p2, _ = _run(True, rounds=3)  # fewer queries per user: more surviving negatives
    early = query_intersection(p2.net.transcript, train, min_rounds=2)  # type: ignore[arg-type]
    assert early.precision.mean() < result.precision.mean()


def test_needs_transcripts() -> None:
    p, train = _run(False, rounds=1)
    with pytest.raises(ValueError, match="transcripts on"):
        query_intersection(p.net.transcript, train)  # type: ignore[arg-type]
