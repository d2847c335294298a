"""Item updates leak the user's items without secure aggregation, and nothing with it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedgraphrec.attacks.upload_inference import upload_inference
from fedgraphrec.protocols.fedgrec import SPEC
from fedgraphrec.protocols.fedgrec.settings import FedGRecSettings
from tests.helpers import ProgramsRun, random_train


def _run(secure: bool, crypto: str, loss: str = "bpr") -> tuple[ProgramsRun, object]:
    train = random_train(16, 60, density=0.12, seed=5)
    g = torch.Generator().manual_seed(0)
    settings = FedGRecSettings(
        K=0, clients_per_round=8, local_steps=5, n_negatives=12, lr=0.05, loss=loss, secure_aggregation=secure,
        seed=2,
    )  # fmt: skip
    tables = {
        "user_emb": torch.randn(16, 4, generator=g) * 0.3,
        "item_emb": torch.randn(60, 4, generator=g) * 0.3,
    }
    p = ProgramsRun(SPEC, settings, train, tables, crypto=crypto, transcripts=True)
    for r in range(3):
        p.server.train_round(r)
    return p, train


@pytest.mark.parametrize("loss", ["bpr", "mse"])  # FedeRank, FCF
def test_unprotected_updates_reveal_the_items(loss: str) -> None:
    p, train = _run(secure=False, crypto="accounted", loss=loss)
    result = upload_inference(p.net.transcript, train, dim=4)  # type: ignore[arg-type]
    s = result.summary()
    assert s["mean_auc"] > 0.95
    assert s["mean_support_precision"] > 2 * s["mean_random_precision"]


def test_secure_aggregation_leaves_a_random_guess() -> None:
    p, train = _run(secure=True, crypto="real")
    result = upload_inference(p.net.transcript, train, dim=4)  # type: ignore[arg-type]
    assert len(result.auc) == 24 and np.isnan(result.support_precision).all()
    assert abs(result.summary()["mean_auc"] - 0.5) < 0.1
