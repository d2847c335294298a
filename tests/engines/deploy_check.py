"""The check every deployment test makes: a loopback SuperLink run writes the in-process run.

A helper module (not a test file): it starts a local federation of ``nodes`` SuperNodes, submits
``cfg`` with ``flwr run`` and compares the deployed run folder's test metrics (<= 1e-10 relative)
and training ledger rows with the same configuration run in process over as many nodes.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fedgraphrec.engines.flower.local import local_federation
from fedgraphrec.engines.flower.party_app import deploy
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.protocol_learner import ProtocolLearner
from fedgraphrec.training.trainer import Trainer


def assert_deploy_equals_in_process(
    cfg: TrainConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nodes: int = 2
) -> None:
    """Deploy ``cfg`` on a loopback SuperLink with ``nodes`` SuperNodes; same metrics and ledger."""
    root = Path(__file__).resolve().parents[2]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    with local_federation(tmp_path / "fed", nodes) as fed:
        summary = deploy(
            cfg, tmp_path / "flower", nodes, fed.connection, env=fed.env, timeout=120, limit_s=900
        )
    ref = Trainer(
        cfg, tmp_path / "local", progress=False, learner=lambda c, d: ProtocolLearner(c, d, nodes=nodes)
    ).fit()
    for name, value in ref.summary["test"].items():
        assert summary["test"][name] == pytest.approx(value, rel=1e-10, abs=1e-12)
    rows = [
        sorted(ln for ln in (d / "ledger.csv").read_text().splitlines()[1:] if not ln.startswith("evaluate/"))
        for d in (tmp_path / "flower", tmp_path / "local")
    ]
    assert rows[0] == rows[1]
