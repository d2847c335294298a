"""``benchmarks/flower_runs.py``: where it puts the boundary of set-up, and what it sums.

The committed Flower results (``results/flower/``) compare the ledger's bytes with Flower's before
and after set-up, the one boundary both engines know exactly: Flower's rounds at protocol step -1,
and the ledger's total when the in-process learner is built. These tests hold the Flower side on a
small ``flower.json`` (a prediction pass and an evaluation after set-up, a set-up round named like
no training stage), the ledger's sum and the comparison of two runs' histories.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import flower_runs  # noqa: E402


def _round(op: str, step: int, sent: int, received: int = 0, seconds: float = 0.1) -> dict[str, object]:
    return {"op": op, "label": f"{op}@{step}", "nodes": 2, "replies": 2, "seconds": seconds,
            "sent_bytes": sent, "received_bytes": received}  # fmt: skip


def test_set_up_is_step_minus_one_whatever_the_stage_is_called(tmp_path: Path) -> None:
    rounds = [
        _round("setup/keys", -1, 10),
        _round("warmup/download", -1, 20, 5),  # FedGRec's warm-up: set-up, not training
        _round("train/layer0", 0, 1),
        _round("train/forward", 0, 2),
        _round("train/forward", 1, 200),  # a prediction pass, in a step of its own
        _round("predict/final", 1, 300),
        _round("evaluate", 2, 400),
        _round("train/forward", 3, 4, 1),
    ]
    (tmp_path / "flower.json").write_text(json.dumps({"nodes": [1, 2], "rounds": rounds}))
    parts = flower_runs.flower_rounds(tmp_path)
    assert [r["op"] for r in parts["setup"]] == ["setup/keys", "warmup/download"]
    assert flower_runs.round_summary(parts["setup"])["flower_bytes"] == 35
    assert flower_runs.round_summary(parts["after_setup"])["flower_bytes"] == 908
    stages = flower_runs.per_stage(parts["after_setup"])
    assert stages["train/forward"] == {"rounds": 3, "mean_seconds": pytest.approx(0.1), "flower_bytes": 207}


def test_the_ledger_sum_and_the_rows_compared(tmp_path: Path) -> None:
    rows = [
        "phase,sender,receiver,messages,payload_bytes",
        "setup/public-keys,client,server,3,30",
        "forward/l=1/user-embeddings,client,server,2,7",
        "evaluate/scores,server,client,1,13",
    ]
    (tmp_path / "ledger.json").write_text("{}")  # what Ledger.save writes beside the rows
    (tmp_path / "ledger.csv").write_text("\n".join(rows) + "\n")
    assert flower_runs.ledger_bytes(tmp_path) == 50
    assert flower_runs.training_rows(tmp_path) == sorted(rows[1:3])


def test_runs_that_evaluated_other_epochs_are_not_compared() -> None:
    ref = [{"loss": 2.0, "test": {"recall@20": 0.5}}]
    got = [{"loss": 2.0 * (1 + 1e-12), "test": {"recall@20": 0.5 * (1 - 1e-9)}}]
    diff = flower_runs.largest_difference(got, ref)
    assert diff["loss"] == pytest.approx(1e-12, rel=1e-3) and diff["test_metrics"] == pytest.approx(
        1e-9, rel=1e-3
    )
    with pytest.raises(SystemExit, match="evaluated 2 and 1 epochs"):
        flower_runs.largest_difference(got * 2, ref)
