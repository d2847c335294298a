"""`audit integrity`: an active server's flips, replays, swaps and drops are all caught."""

from __future__ import annotations

import json

import pytest

from fedgraphrec.attacks.active_server import ActiveServer
from fedgraphrec.audits.integrity import audit_integrity
from fedgraphrec.training import load_config

SMALL = ["dataset_options.n_users=24", "dataset_options.n_items=30"]


@pytest.mark.parametrize("protocol", ["lpgcn", "gnn4fr", "fedgrec", "fedmf", "fedncf", "pgcn"])
def test_every_attack_is_detected_and_none_accepted(tmp_path, protocol):
    cfg = load_config(None, SMALL, protocol=protocol, dataset="synthetic", dim=4, n_layers=2, batch_size=32)
    report = audit_integrity(cfg, tmp_path)
    for attack, s in report["summary"].items():
        assert s["attempts"] > 0, attack
        assert s["detected"] == s["attempts"] and s["accepted"] == 0, (attack, s)
    assert json.loads((tmp_path / "integrity.json").read_text())["summary"] == report["summary"]
    assert "| replay |" in (tmp_path / "integrity.md").read_text()
    detected = [r["error"] for r in report["attempts"] if r["outcome"] == "detected"]
    assert all("rejected" in e or "never arrived" in e or "failed" in e for e in detected)


def test_the_attacks_change_what_is_delivered():
    """The adversary really alters the batch (so a detection is not an artefact)."""
    batch = [b"aaaa", b"bbbb", b"cccc"]
    for attack in ("flip", "swap", "drop"):
        adv = ActiveServer(attack)
        out = adv.forward("p", 0, list(batch), None)
        assert adv.fired and out != batch, attack
    replay = ActiveServer("replay")
    assert replay.forward("p", 0, list(batch), None) == batch and not replay.fired
    out = replay.forward("p", 1, [b"xxxx", b"yyyy", b"zzzz"], None)
    assert replay.fired and any(o in batch for o in out)
