"""`audit integrity`: every attack class fires on every target, outcomes and coverage are accounted.

Three levels: the classification of one attempt against toy nodes that accept or refuse (the ring
protocol, plain and strict); the coverage accounting and the CLI's exit status on a faked audit; and
the real audit of every protocol in process (payload attacks: all detected; every class: 100 %
coverage; accepted 0 everywhere, on both engines).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from fedgraphrec.attacks.active_server import ATTACKS, ActiveServer
from fedgraphrec.attacks.lying_server import LyingServer
from fedgraphrec.audits import integrity
from fedgraphrec.audits.integrity import CLASSES, attacks_for, audit_integrity
from fedgraphrec.audits.integrity_runs import Catalogue, in_process
from fedgraphrec.cli._app import app
from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.protocols.base import ProtocolSpec
from fedgraphrec.protocols.registry import REGISTRY
from fedgraphrec.runtime import endpoint
from fedgraphrec.runtime.expect import StageFlow, flow
from fedgraphrec.runtime.message import Message
from fedgraphrec.training.loading import load_config
from tests import ring_protocol
from tests.ring_protocol import RingClient

SMALL = ["dataset_options.n_users=24", "dataset_options.n_items=30"]
PROTOCOLS = ["lpgcn", "gnn4fr", "fedgrec", "fedmf", "fedncf", "pgcn"]


def _cfg(protocol: str) -> Any:
    small = ["dim=4", "n_layers=2", "batch_size=32"]  # each where the protocol has it
    return load_config(None, SMALL, protocol=protocol, dataset="synthetic", shared=small)


def test_the_attacks_change_what_is_delivered() -> None:
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


def test_replay_uses_the_same_receivers_earlier_message() -> None:
    """With several nodes, a phase's batches differ per node: the replay is per receiver."""
    replay = ActiveServer("replay")
    replay.forward("p", 0, [b"a0"], np.array([1]))  # node A
    replay.forward("p", 0, [b"b0", b"y0"], np.array([2, 4]))  # node B
    out = replay.forward("p", 1, [b"a1"], np.array([1]))  # node A again
    assert replay.fired and out == [b"a0"]  # A's own earlier message, not B's


# ---------------------------------------------------------------------------- one attempt, toy nodes
LAX = flow(
    first=["setup"],
    after={s: ["setup", "send", "receive", "evaluate"] for s in ("setup", "send", "receive", "evaluate")},
    new_step=["setup", "send", "receive", "evaluate"],
    repeats={s: 99 for s in ("setup", "send", "receive", "evaluate")},
)
"""Any stage after any other, again and again: a node without a stage order."""


class LaxRing(RingClient):
    """A node without the defences: any stage order, and (with :func:`lax`) no check of the labels."""

    def stage_flow(self) -> StageFlow:
        return LAX


class CrashingRing(LaxRing):
    """A client that fails on anything unusual without saying why (an error, not a detection)."""

    def stage_receive(self, step: int, request: Message) -> Message:
        if request["rows"].protection != "sealed":
            raise ValueError("cannot use these rows")
        return super().stage_receive(step, request)


LAX_SPEC = ProtocolSpec("lax-ring", ring_protocol.RingServer, LaxRing, ("item_emb",))
CRASHING = ProtocolSpec("crashing-ring", ring_protocol.RingServer, CrashingRing, ("item_emb",))
LAX_ENTRY = dataclasses.replace(ring_protocol.ENTRY, name="lax-ring", programs=LAX_SPEC)
CRASHING_ENTRY = dataclasses.replace(ring_protocol.ENTRY, name="crashing-ring", programs=CRASHING)


@pytest.fixture
def rings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(REGISTRY, "ring", ring_protocol.ENTRY)
    monkeypatch.setitem(REGISTRY, "lax-ring", LAX_ENTRY)
    monkeypatch.setitem(REGISTRY, "crashing-ring", CRASHING_ENTRY)


def _ring(name: str) -> Any:
    settings = ["dataset_options.n_users=10", "dataset_options.n_items=12", "dim=4", "dtype='float64'"]
    return load_config(None, settings, protocol=name, dataset="synthetic", crypto="real", batch_size=64)


@pytest.mark.parametrize(
    ("protocol", "attack", "target", "outcome"),
    [
        ("lax-ring", "downgrade", "ring/rows", "accepted"),
        ("ring", "downgrade", "ring/rows", "detected"),
        ("crashing-ring", "downgrade", "ring/rows", "error"),
        ("ring", "relabel", "ring/rows", "detected"),  # the node's label check (and its AD) refuse it
        ("lax-ring", "rerun", "receive", "accepted"),
        ("ring", "rerun", "receive", "detected"),
        ("lax-ring", "reset", "session", "accepted"),
        ("ring", "reset", "session", "detected"),
        ("ring", "downgrade", "no/such-phase", "no instance"),
        ("ring", "flip", "ring/rows", "detected"),
    ],
)
def test_one_attempt_is_classified_by_what_the_node_did(
    rings: None, monkeypatch: pytest.MonkeyPatch, protocol: str, attack: str, target: str, outcome: str
) -> None:
    if protocol != "ring":  # a node without the defences: it reads the labels the server wrote
        monkeypatch.setattr(endpoint, "check_parts", lambda *args: None)
    known = {"ring/rows": "user_embedding", "ring/other": "user_embedding"}
    adv = integrity._adversary(attack, target, Catalogue(sealed=known, last_step=1), 0)
    got, message = integrity._attempt(_ring(protocol), in_process, adv)
    assert got == outcome, message
    assert bool(message) == (outcome in ("detected", "error")), message


def test_a_leak_after_a_forged_session_counts_as_accepted(
    rings: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    adv = LyingServer("reset-accounted")

    def leaky(cfg: Any, factory: Any, adversary: LyingServer) -> None:
        adversary._fire("s", 1, 1)
        adversary.leaked = True
        raise ValueError("the server's own check of the unsealed reply")

    monkeypatch.setattr(integrity, "run_once", leaky)
    assert integrity._attempt(_ring("ring"), in_process, adv)[0] == "accepted"


# ---------------------------------------------------------------------------- coverage, faked runs
def _fake(monkeypatch: pytest.MonkeyPatch, fires: Any, raises: type[Exception] | None) -> None:
    cat = Catalogue(
        sealed={"a": "k", "b": "k"}, steps={"a": [0, 1], "b": [0]}, plain={"p": "k"},
        stages=["s1", "s2"], secagg=["agg"], last_step=1,
    )  # fmt: skip
    monkeypatch.setattr(integrity, "catalogue", lambda cfg, factory: cat)

    def run(cfg: Any, factory: Any, adv: Any) -> None:
        target = getattr(adv, "target", None) or getattr(adv, "phase", None) or "session"
        if fires(target):
            if isinstance(adv, ActiveServer):
                adv.fired_at = (target, 0)
            else:
                adv._fire("s", 0, 0, "b" if adv.attack == "cross-phase" else "")
            if raises is not None:
                raise raises("refused")

    monkeypatch.setattr(integrity, "run_once", run)


def test_coverage_below_100_percent_fails_the_audit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fake(monkeypatch, lambda t: t != "b", IntegrityError)
    report = audit_integrity(_cfg("fedmf"), tmp_path, engine="flower")
    assert not report["coverage_ok"] and not report["passed"] and report["accepted"] == 0
    assert report["coverage"]["flip"]["missing"] == ["default:b"]
    assert report["coverage"]["flip"]["percent"] == 50.0
    assert report["coverage"]["cross-phase"]["missing"] == []  # "b" was the replayed phase
    assert report["coverage"]["replay"]["required"] == ["default:a"]  # "b" runs at one step only
    assert report["coverage"]["count"]["required"] == ["default:a", "default:b"]  # plain: tried, not required
    assert {r["target"] for r in report["attempts"] if r["attack"] == "count"} == {"a", "b", "p"}
    assert report["summary"]["threshold"]["detected"] == 1 and report["summary"]["rerun"]["attempts"] == 2
    assert "FAILED" in (tmp_path / "integrity.md").read_text()
    assert json.loads((tmp_path / "integrity.json").read_text())["coverage_ok"] is False


def test_full_coverage_and_nothing_accepted_passes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fake(monkeypatch, lambda t: True, IntegrityError)
    report = audit_integrity(_cfg("fedmf"), tmp_path, engine="inprocess")
    assert report["passed"] and report["coverage_ok"]
    assert set(report["summary"]) == set(attacks_for("inprocess"))
    assert set(report["classes"]) == set(CLASSES.values()) - {"malformed records"}
    assert all(s["detected"] == s["attempts"] > 0 for s in report["summary"].values())
    _fake(monkeypatch, lambda t: True, None)
    report = audit_integrity(_cfg("fedmf"), tmp_path, engine="inprocess")
    assert report["coverage_ok"] and not report["passed"]
    assert report["classes"]["session reset"] == {"attempts": 1, "detected": 0, "errors": 0, "accepted": 1}


@pytest.mark.parametrize("passed", [True, False])
def test_the_cli_exits_non_zero_when_the_audit_fails(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, passed: bool
) -> None:
    seen: list[str] = []

    def fake(cfg: Any, out: Path, *, engine: str, factory: Any) -> dict[str, Any]:
        seen.append(engine)
        out.mkdir(parents=True, exist_ok=True)
        (out / "integrity.md").write_text(f"# {engine}\n")
        return {"passed": passed}

    monkeypatch.setattr(integrity, "audit_integrity", fake)
    result = CliRunner().invoke(
        app, ["audit", "integrity", "fedmf", "--engine", "both", "--out", str(tmp_path)]
    )
    assert result.exit_code == (0 if passed else 1), result.output
    assert seen == ["inprocess", "flower"] and (tmp_path / "flower" / "integrity.md").exists()


# ---------------------------------------------------------------------------- the real audit
@pytest.fixture(scope="module")
def full_reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every attack on every protocol, in process (computed once for the tests below)."""
    return {p: audit_integrity(_cfg(p), tmp_path_factory.mktemp(p)) for p in PROTOCOLS}


@pytest.mark.slow
def test_every_class_covers_every_sealed_phase_of_every_variant(full_reports: dict[str, Any]) -> None:
    for protocol, report in full_reports.items():
        assert report["coverage_ok"], (protocol, {a: c["missing"] for a, c in report["coverage"].items()})
        variants = [v["variant"] for v in report["variants"]]
        assert len(variants) == (2 if protocol in ("lpgcn", "gnn4fr") else 1)
        for attack, s in report["summary"].items():  # every attack that has a target was tried
            assert s["attempts"] > 0 or not report["coverage"][attack]["required"], (protocol, attack)
        secagg = protocol not in ("lpgcn", "gnn4fr")
        assert bool(report["coverage"]["threshold"]["required"]) == secagg, protocol
        assert secagg or report["coverage"]["cross-phase"]["required"], protocol
        for attack in ATTACKS:  # the AEAD's part: already holds
            s = report["summary"][attack]
            assert s["detected"] == s["attempts"] and s["accepted"] == 0, (protocol, attack, s)
    lightgcn_plus = full_reports["lpgcn"]["variants"][1]
    assert "update/user-gradients" in lightgcn_plus["sealed_phases"]


@pytest.mark.slow
def test_no_attack_of_any_class_is_accepted(full_reports: dict[str, Any]) -> None:
    for protocol, report in full_reports.items():
        assert report["passed"], (protocol, {c: s for c, s in report["classes"].items() if s["accepted"]})
        for name, s in report["classes"].items():
            assert s["accepted"] == 0 and s["errors"] == 0, (protocol, name, s)


def test_the_audit_refuses_unknown_protocols_engines_and_attacks(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="protocol must be one of"):
        audit_integrity(_cfg("fcf"), tmp_path)
    with pytest.raises(ValueError, match="engine must be"):
        audit_integrity(_cfg("fedmf"), tmp_path, engine="ray")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown attack"):
        audit_integrity(_cfg("fedmf"), tmp_path, attacks=["truncate"])  # Flower only


@pytest.fixture(scope="module")
def flower_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every attack on FedMF through the Flower node handler (real records, in process)."""
    pytest.importorskip("flwr", reason="the Flower engine needs the extra fedgraphrec[flower]")
    from fedgraphrec.engines.flower.loopback import loopback_learner

    return audit_integrity(
        _cfg("fedmf"), tmp_path_factory.mktemp("flower"), engine="flower", factory=loopback_learner
    )


@pytest.mark.slow
def test_the_flower_audit_has_every_class_and_full_coverage(flower_report: dict[str, Any]) -> None:
    assert flower_report["engine"] == "flower" and flower_report["coverage_ok"]
    tried = {a for a, s in flower_report["summary"].items() if s["attempts"]}
    assert tried >= {"downgrade", "relabel", "rerun", "reset", "reset-accounted", "threshold", *ATTACKS}
    assert tried >= {"truncate", "dtype", "shape", "count"}
    assert all(flower_report["summary"][a]["accepted"] == 0 for a in ATTACKS)


@pytest.mark.slow
def test_no_attack_is_accepted_on_flower(flower_report: dict[str, Any]) -> None:
    assert flower_report["passed"], {c: s for c, s in flower_report["classes"].items() if s["accepted"]}
