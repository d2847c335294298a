"""Secure initial tables on the Flower engine (issue 30 §3): supported, one table for every party.

Under ``--crypto real`` with default settings the initial tables come from a per-run key the
ServerApp draws from ``os.urandom`` and sends in each node's hello; every node derives the same
tables from it. The tests drive the real node handler over the stand-in grid: a secure-init LP-GCN
run on three nodes equals the in-process run started from the same key (so every node derived the
ServerApp's tables), its tables are not the run seed's, and a node told to draw secure tables without
a key refuses rather than drawing tables of its own.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("flwr", reason="the Flower engine needs the extra fedgraphrec[flower]")

from flwr.app import ConfigRecord, RecordDict

from fedgraphrec.engines.flower import node as flower_node
from fedgraphrec.engines.flower.learner import FlowerLearner
from fedgraphrec.engines.flower.node import handle_party
from fedgraphrec.runtime.flower.parts import encode_message
from fedgraphrec.runtime.message import Message
from fedgraphrec.training import protocol_learner as pl
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.protocol_learner import initial_tables
from fedgraphrec.training.trainer import Trainer
from tests.engines.test_flower_lpgcn import _assert_same_run, _cfg, _in_process, stand_in  # noqa: F401
from tests.engines.test_flower_party import NODES, _Grid

KEY = bytes(range(32))


def test_secure_init_runs_on_flower_and_equals_in_process_from_the_same_key(
    stand_in: None,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # real crypto's default (secure tables); seeded virtual items only so the two ledgers compare
    cfg = load_config(base=dataclasses.replace(_cfg(), reproducible=None), secure_virtual_items=False)
    assert cfg.randomness()["init"] == "csprng"
    monkeypatch.setattr(pl, "init_key", lambda c: KEY)  # both engines draw this run's key
    flower_node._node_data.cache_clear()
    grid = _Grid(NODES)
    made: list[FlowerLearner] = []

    def flower(c: TrainConfig, d: Any) -> FlowerLearner:
        made.append(FlowerLearner(c, d, grid, NODES, timeout=5.0))  # type: ignore[arg-type]
        return made[0]

    got = Trainer(cfg, tmp_path / "flower", progress=False, learner=flower).fit()
    ref_trainer, ref = _in_process(cfg, tmp_path / "local")
    _assert_same_run(got, ref, made[0], ref_trainer)
    assert got.summary["randomness"]["init"] == "csprng"
    seeded = initial_tables(load_config(base=cfg, reproducible=True), ref_trainer.data)
    secure = initial_tables(cfg, ref_trainer.data, KEY)
    assert not (seeded["item_emb"] == secure["item_emb"]).any()  # nothing the seed regenerates


def test_a_node_told_to_draw_secure_tables_without_a_key_refuses() -> None:
    cfg = dataclasses.replace(_cfg(), reproducible=None)
    content = encode_message(Message(), {"stage": "setup/keys", "step": -1, "protocol": "lpgcn"})
    content["hello"] = ConfigRecord(
        {"config": json.dumps(cfg.to_dict(), sort_keys=True), "clients": [0, 1, 2]}
    )  # a hello without the run's init_key
    flower_node._node_data.cache_clear()
    with pytest.raises(RuntimeError, match="init_key"):
        handle_party(content, RecordDict())
