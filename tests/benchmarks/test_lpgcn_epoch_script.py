"""``benchmarks/lpgcn_epoch.py`` runs end to end on a tiny synthetic graph (the fixed-cost command).

The issue-#33 figures come from this script; a smoke run keeps its command lines working: the
``--users`` option sizes the synthetic graph, and the report holds the three sides and the
``accounted`` run's deviation from the centralized one (same initial tables, same batches).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]


def test_the_fixed_cost_command_reports_every_side(tmp_path: Path) -> None:
    out = tmp_path / "fixed.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "lpgcn_epoch.py"), "--dataset", "synthetic",
           "--users", "12", "--batch-size", "8", "--layers", "2", "--dim", "4", "--crypto", "real",
           "--block", "2", "--repeats", "1", "--json", str(out)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT, timeout=300)
    report = json.loads(out.read_text())
    assert report["dataset"] == "synthetic" and report["config"]["users"] == 12
    # 12 users with 94 training interactions, 8 triples a batch (the registry's default graph: 593)
    assert report["batches_per_epoch"] == report["timed_batches"] == 12
    for key in ("central_median_batch_seconds", "accounted_epoch_seconds", "lpgcn_epoch_seconds"):
        assert report[key] > 0
    assert report["max_relative_parameter_deviation"] < 1e-5
    # the machine beside the figures: the same code gives other ratios on another CPU
    assert report["machine"]["torch_cpu_capability"] and report["machine"]["torch"] == torch.__version__
