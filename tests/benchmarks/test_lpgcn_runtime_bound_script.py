"""``benchmarks/lpgcn_runtime_bound.py``: LP-GCN with the runtime's per-part work stubbed, as a ceiling.

Issue #33's budget for a cheaper runtime (how much of its per-part cost would have to go for
ML-100K to reach 1.5x) rests on this script's ratio. A smoke run on a small synthetic graph checks that the command works, that the
stubbed learners compute the same tables (the stubs changed no number), and that the stubs did take
effect: the bounded learners booked no message and their endpoints checked no stage while training,
when the full ones did (a stub on a method the run never calls would report a ceiling of 1). The
stubs must also be gone once their turn ends, or the full learners would be measured stubbed too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fedgraphrec.runtime.endpoint import NodeEndpoint
from fedgraphrec.runtime.part import Part
from fedgraphrec.runtime.transport import Transport

ROOT = Path(__file__).resolve().parents[2]


def test_the_bound_command_stubs_the_layers_only_for_the_bounded_learners(tmp_path: Path) -> None:
    out = tmp_path / "bound.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "lpgcn_runtime_bound.py"), "--dataset", "synthetic",
           "--layers", "2", "--dim", "4", "--batch-size", "512", "--block", "2", "--passes", "1",
           "--json", str(out)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT, timeout=300)
    report = json.loads(out.read_text())
    assert report["skipped"] == ["booking", "checks", "validation"]
    assert report["same_tables"] is True
    for flags in (report["booked_in_training"], report["checked_in_training"]):
        assert flags == {"full": True, "full#2": True, "bounded": False, "bounded#2": False}
    assert set(report["median_minibatch_seconds"]) == {"full", "bounded", "central"}
    assert report["bounded_over_full_total"] > 0 and len(report["bounded_over_full_per_pass"]) == 1


def test_stubs_hold_only_inside_their_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    from lpgcn_runtime_bound import stubbed

    originals = (Transport._book, Transport._check_payload, NodeEndpoint.handle, Part.__post_init__)
    with pytest.raises(ValueError, match="protection must be one of"):
        Part("p", "k", "client", "server", protection="bogus")  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="inside"), stubbed(["booking", "checks", "validation"]):
        Part("p", "k", "client", "server", protection="bogus")  # type: ignore[arg-type]  # not validated
        assert Transport._book is not originals[0] and NodeEndpoint.handle is not originals[2]
        raise RuntimeError("an error inside a turn")
    assert (Transport._book, Transport._check_payload, NodeEndpoint.handle, Part.__post_init__) == originals
    with pytest.raises(ValueError, match="protection must be one of"):
        Part("p", "k", "client", "server", protection="bogus")  # type: ignore[arg-type]
