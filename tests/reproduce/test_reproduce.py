"""`fedgraphrec reproduce`: the table registry, the verdict rule and a tiny end-to-end run."""

from __future__ import annotations

import json
import math

import pytest

from fedgraphrec.reproduce.report import verdict
from fedgraphrec.reproduce.tables import TABLES, reproduce


def test_verdict_rule() -> None:
    assert verdict(0.1937, 0.0, 0.1937) == "matches"
    assert verdict(0.190, 0.0, 0.1937) == "matches"  # within 5 %
    assert verdict(0.170, 0.02, 0.1937) == "within noise"  # 2σ = 0.04 covers the gap
    assert verdict(0.170, 0.001, 0.1937, paper_std=0.0002) == "deviates"
    assert verdict(math.nan, 0.0, 0.1) == "not run"


def test_every_table_names_known_protocols_and_budgets() -> None:
    from fedgraphrec.protocols.registry import REGISTRY as PROTOCOLS

    for t in TABLES.values():
        assert {"cpu", "full"} <= set(t.budgets)
        for row in t.rows:
            assert row.method.partition(":")[0] in PROTOCOLS, row
            assert row.paper


def test_unknown_table_or_row_is_refused(tmp_path) -> None:
    with pytest.raises(KeyError, match="unknown table"):
        reproduce("no-such-table", tmp_path)
    with pytest.raises(KeyError, match="no rows"):
        reproduce("gnn4fr-t1", tmp_path, rows=["NotARow"])


def test_tiny_run_writes_the_side_by_side_report(tmp_path) -> None:
    tiny = ["dataset=synthetic", "epochs=2", "eval_every=1", "dim=8", "n_layers=1", "batch_size=256"]
    report = reproduce("gnn4fr-t1", tmp_path, rows=["LightGCN", "GNN4FR"], overrides=tiny)
    cells = report["rows"][0]["cells"]
    assert set(cells) == {"precision@5", "recall@5"}
    assert cells["precision@5"]["paper"] == 0.3816 and 0.0 <= cells["precision@5"]["ours"] <= 1.0
    # GNN4FR is lossless: its row equals LightGCN's on the same seed and batches
    g = report["rows"][1]["cells"]
    assert abs(g["precision@5"]["ours"] - cells["precision@5"]["ours"]) < 1e-6
    on_disk = json.loads((tmp_path / "reproduce.json").read_text())
    assert on_disk["table"] == "gnn4fr-t1"
    assert "| LightGCN |" in (tmp_path / "reproduce.md").read_text()
    assert (tmp_path / "reproduce.png").stat().st_size > 0
