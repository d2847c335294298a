"""GNN4FR resumed from a checkpoint equals an uninterrupted run (2 nodes).

Each evaluation's prediction is a cycle at a step of its own, and each node's stage order
(:class:`~fedgraphrec.runtime.expect.FlowState`) is saved with the checkpoint: the resumed run must
go on from where every node was, with the same metrics and the same ledger.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fedgraphrec.training.loading import load_config
from fedgraphrec.training.protocol_learner import ProtocolLearner
from fedgraphrec.training.trainer import Trainer

SMALL = [
    "dataset=synthetic", "dataset_options.n_users=24", "dataset_options.n_items=30", "dim=4",
    "n_layers=2", "batch_size=32", "lr=0.05", "ks=[5]", "metric=recall@5", "dtype='float64'",
]  # fmt: skip


class CrashError(Exception):
    pass


def _crash_after_1(epoch: int) -> None:
    if epoch == 1:
        raise CrashError


def _untimed(history: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.endswith("seconds")} for r in history]


@pytest.mark.parametrize(
    ("crypto", "paper_literal"),
    [("accounted", False), ("accounted", True), ("real", False)],
)
def test_gnn4fr_resumes_to_identical_metrics_and_ledger(
    tmp_path: Path, crypto: str, paper_literal: bool
) -> None:
    cfg = load_config(
        None, [*SMALL, f"paper_literal={str(paper_literal).lower()}", "reproducible=true"],
        protocol="gnn4fr", epochs=3, crypto=crypto,
    )  # fmt: skip

    def learner(c, d):  # type: ignore[no-untyped-def]
        return ProtocolLearner(c, d, nodes=2)

    full = Trainer(cfg, tmp_path / "full", progress=False, learner=learner).fit()
    with pytest.raises(CrashError):
        Trainer(cfg, tmp_path / "cut", progress=False, learner=learner, on_epoch_end=_crash_after_1).fit()
    resumed = Trainer(cfg, tmp_path / "cut", progress=False, learner=learner, resume=True).fit()
    assert _untimed(resumed.history) == _untimed(full.history)
    assert (tmp_path / "cut" / "ledger.csv").read_text() == (tmp_path / "full" / "ledger.csv").read_text()
