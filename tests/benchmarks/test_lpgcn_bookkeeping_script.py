"""``benchmarks/lpgcn_bookkeeping.py`` runs end to end on a small synthetic graph.

Issue #33's floor argument rests on this script's two figures: LP-GCN without its bookkeeping (the
same tables, so the stubs changed no number) and the layers of the epoch, each timed where it runs.
A smoke run keeps the command working and checks that every layer was actually timed: a wrapper on
a method the run never calls would report a layer of zero. The same holds for the model's
arithmetic inside the client programs (sparse products, local BPR, Adam), which must be a part of
the stage bodies, not more; and, in ``real`` mode, for the sealing inside the node endpoint.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_bookkeeping_command_times_every_layer_of_the_epoch(tmp_path: Path) -> None:
    out = tmp_path / "bookkeeping.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "lpgcn_bookkeeping.py"), "--dataset", "synthetic",
           "--layers", "2", "--dim", "4", "--batch-size", "512", "--block", "2", "--repeats", "1",
           "--crypto", "real", "--json", str(out)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT, timeout=300)
    report = json.loads(out.read_text())
    assert report["same_tables"] is True
    layers = report["breakdown_over_central_epoch"]
    parts = ("client_stage_bodies", "node_endpoint", "transport", "server_program")
    for key in parts:
        assert layers[key] > 0, key
    assert math.isclose(sum(layers[k] for k in parts), layers["lpgcn_epoch"], rel_tol=1e-9)
    assert 0 < layers["node_sealing"] < layers["node_endpoint"]  # real mode: the AEAD work, timed inside
    arithmetic = ("client_sparse_products", "client_local_bpr", "client_adam")
    for key in arithmetic:
        assert layers[key] > 0, key
    assert math.isclose(sum(layers[k] for k in arithmetic), layers["client_arithmetic"], rel_tol=1e-9)
    assert 0 < layers["client_protocol_work"] < layers["client_stage_bodies"]
    assert math.isclose(
        layers["client_arithmetic"] + layers["client_protocol_work"],
        layers["client_stage_bodies"],
        rel_tol=1e-9,
    )
    assert report["machine"]["cpus"] and report["machine"]["torch_cpu_capability"]
