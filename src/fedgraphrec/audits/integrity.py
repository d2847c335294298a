"""Integrity audit: a protocol in ``real`` mode against a server that alters what it relays.

For every sealed phase the protocol relays through the server, and for each of the four attacks of
:mod:`fedgraphrec.attacks.active_server` (flip a byte, replay an earlier step's message, swap two
receivers' messages, drop a message), one short run (set-up and a few steps on a small graph) lets
the server carry the attack out once. The attempt is *detected* when a receiver rejects the message
(:class:`~fedgraphrec.crypto.errors.IntegrityError`) and *accepted* when the run goes on as if
nothing happened. The goal is ``accepted = 0`` everywhere. ``integrity.json`` / ``integrity.md``
list attempts, detected and accepted per attack and per phase.

Every protocol runs as party programs, the adversary in the transport. LP-GCN and GNN4FR are
attacked on their group-key relays (and the verification answers, degrees and key wrapping of
set-up); FedGRec and the horizontal baselines that aggregate securely (FedMF, FedNCF, P-GCN) on
secure aggregation's pairwise share messages, in every share phase a clean run relays (P-GCN: the
degrees at set-up, every forward layer, the gradients).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fedgraphrec.attacks.active_server import ATTACKS, ActiveServer
from fedgraphrec.crypto import IntegrityError
from fedgraphrec.runtime import Network
from fedgraphrec.seeding import numpy_rng
from fedgraphrec.training.config import BACKBONES, TrainConfig
from fedgraphrec.training.protocol_learner import ProtocolLearner
from fedgraphrec.training.sampler import BPRSampler
from fedgraphrec.training.trainer import prepare_interactions

__all__ = ["INTEGRITY_PROTOCOLS", "audit_integrity"]

INTEGRITY_PROTOCOLS = ("lpgcn", "gnn4fr", "fedgrec", "fedmf", "fedncf", "pgcn")
"""Protocols whose relayed messages are sealed, hence attacked here."""
STEPS = 3
"""Steps per attempt: enough for a replay of an earlier step's message."""


def _graph_run(cfg: TrainConfig, adversary: ActiveServer | None) -> Network:
    """Set-up, ``STEPS`` minibatches and a prediction of LP-GCN or GNN4FR; returns the network.

    Both run as party programs: the adversary sits in the transport, on every sealed message the
    server forwards.
    """
    alpha = 0 if cfg.protocol == "gnn4fr" else cfg.alpha  # GNN4FR has no virtual items
    arm = dataclasses.replace(
        cfg, crypto="real", model="lightgcn", dtype="float64", verify=False, alpha=alpha
    )
    data = prepare_interactions(arm)
    learner = ProtocolLearner(arm, data, adversary=adversary)
    batches = BPRSampler(data.train, seed=cfg.seed).batches(0, cfg.batch_size)
    for _ in range(STEPS):
        learner.train_batch(*next(batches))
    learner.embeddings()
    return learner.net


def _secagg_run(cfg: TrainConfig, adversary: ActiveServer | None) -> Network:
    """``STEPS`` rounds (or minibatches) of a protocol whose secure-aggregation share routing is attacked."""
    arm = dataclasses.replace(
        cfg, crypto="real", secure_aggregation=True, model=BACKBONES.get(cfg.protocol, cfg.model), alpha=0
    )
    data = prepare_interactions(arm)
    programs = ProtocolLearner(arm, data, adversary=adversary)
    if programs.server.schedule == "round":
        for r in range(STEPS):
            programs.train_round(r)
    else:
        batches = BPRSampler(data.train, seed=cfg.seed).batches(0, cfg.batch_size)
        for _ in range(STEPS):
            programs.train_batch(*next(batches))
    return programs.net


def _sealed_phases(net: Network) -> list[str]:
    """Phases in which the server forwarded sealed messages (from a clean run's transcript)."""
    phases = []
    for entry in net.transcript.of("client") + net.transcript.of("conv-client"):
        if (
            entry.protection in ("sealed", "asymmetric")
            and entry.sender == "server"
            and entry.payloads
            and entry.phase not in phases
        ):
            phases.append(entry.phase)
    return phases


def audit_integrity(cfg: TrainConfig, out_dir: str | Path) -> dict[str, Any]:
    """Run every attack on every sealed phase of ``cfg.protocol``; write ``integrity.json/.md``."""
    if cfg.protocol not in INTEGRITY_PROTOCOLS:
        raise ValueError(
            f"audit integrity: protocol must be one of {', '.join(INTEGRITY_PROTOCOLS)}, got {cfg.protocol!r}"
        )
    out = Path(out_dir)
    graph = cfg.protocol in ("lpgcn", "gnn4fr")
    runner: Callable[[TrainConfig, ActiveServer | None], Network] = _graph_run if graph else _secagg_run
    clean = runner(dataclasses.replace(cfg, transcripts=True), None)
    phases = _sealed_phases(clean)
    rows: list[dict[str, Any]] = []
    for attack in ATTACKS:
        for phase in phases:
            adv = ActiveServer(attack, phase, numpy_rng(cfg.seed, "audit-integrity", attack, phase))
            outcome, message = "accepted", ""
            try:
                runner(cfg, adv)
            except IntegrityError as exc:
                outcome, message = "detected", str(exc)
            if not adv.fired:
                outcome = "no instance"
            rows.append({"attack": attack, "phase": phase, "outcome": outcome, "error": message})
    summary = {
        a: {
            "attempts": sum(r["attack"] == a and r["outcome"] != "no instance" for r in rows),
            "detected": sum(r["attack"] == a and r["outcome"] == "detected" for r in rows),
            "accepted": sum(r["attack"] == a and r["outcome"] == "accepted" for r in rows),
        }
        for a in ATTACKS
    }
    report = {
        "protocol": cfg.protocol,
        "dataset": cfg.dataset,
        "seed": cfg.seed,
        "summary": summary,
        "attempts": rows,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "integrity.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "integrity.md").write_text(_markdown(report))
    return report


def _markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Integrity audit: {report['protocol']} on {report['dataset']} "
        f"(real crypto, seed {report['seed']})",
        "",
        "An active server alters one relayed sealed message per attempt. *detected*: a receiver rejected",
        "it (IntegrityError); *accepted*: the run went on with the altered message. Goal: accepted 0.",
        "",
        "| attack | attempts | detected | accepted |",
        "|---|---|---|---|",
    ]
    for attack, s in report["summary"].items():
        lines.append(f"| {attack} | {s['attempts']} | {s['detected']} | {s['accepted']} |")
    lines += ["", "| attack | phase | outcome |", "|---|---|---|"]
    for r in report["attempts"]:
        lines.append(f"| {r['attack']} | {r['phase']} | {r['outcome']} |")
    never = [r for r in report["attempts"] if r["outcome"] == "no instance"]
    if never:
        lines += ["", f"{len(never)} attempt(s) found no instance of the attack in that phase (e.g. a replay",
                  "needs the phase at an earlier step; set-up runs once) and are not counted."]  # fmt: skip
    return "\n".join(lines) + "\n"
