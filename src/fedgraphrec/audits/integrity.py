"""Integrity audit: a protocol in ``real`` mode against a server that alters what it relays.

For every sealed phase the protocol relays through the server, and for each of the four attacks of
:mod:`fedgraphrec.attacks.active_server` (flip a byte, replay an earlier step's message, swap two
receivers' messages, drop a message), one short run (set-up and a few steps on a small graph) lets
the server carry the attack out once. The attempt is *detected* when a receiver rejects the message
(:class:`~fedgraphrec.crypto.errors.IntegrityError`) and *accepted* when the run goes on as if
nothing happened. The goal is ``accepted = 0`` everywhere. ``integrity.json`` / ``integrity.md``
list attempts, detected and accepted per attack and per phase.

LP-GCN and GNN4FR are attacked on their group-key relays (and the verification answers, degrees
and key wrapping of set-up); FedGRec and the horizontal baselines that aggregate securely (FedMF,
FedNCF, P-GCN) on secure aggregation's pairwise share messages: for the protocols written as party
programs (FedGRec, FedMF) on every share phase a clean run relays, through the transport's
adversary hook, as LP-GCN's relays.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from fedgraphrec.attacks.active_server import ATTACKS, ActiveServer, tamper_inbox
from fedgraphrec.crypto import IntegrityError, secure_sum
from fedgraphrec.runtime import Network
from fedgraphrec.seeding import numpy_rng, torch_generator
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.protocol_learner import SPECS, ProtocolLearner
from fedgraphrec.training.sampler import BPRSampler
from fedgraphrec.training.trainer import prepare_interactions

__all__ = ["INTEGRITY_PROTOCOLS", "audit_integrity"]

INTEGRITY_PROTOCOLS = ("lpgcn", "gnn4fr", "fedgrec", "fedmf", "fedncf", "pgcn")
"""Protocols whose relayed messages are sealed, hence attacked here."""
STEPS = 3
"""Steps per attempt: enough for a replay of an earlier step's message."""


def _graph_run(cfg: TrainConfig, adversary: ActiveServer | None) -> Network:
    """Set-up, ``STEPS`` minibatches and a prediction of LP-GCN or GNN4FR; returns the network."""
    from fedgraphrec.protocols.gnn4fr import GNN4FR
    from fedgraphrec.protocols.lpgcn import LPGCN

    data = prepare_interactions(cfg)
    train = data.train
    n, m = train.shape
    gen = torch_generator(cfg.seed, "audit-integrity-init")
    u0 = torch.randn(n, cfg.dim, generator=gen, dtype=torch.float64) * 0.1
    v0 = torch.randn(m, cfg.dim, generator=gen, dtype=torch.float64) * 0.1
    common: dict[str, Any] = dict(
        n_layers=cfg.n_layers, seed=cfg.seed, crypto="real", transcripts=cfg.transcripts, adversary=adversary
    )
    proto: Any
    if cfg.protocol == "lpgcn":
        proto = LPGCN(train, u0, v0, alpha=cfg.alpha, **common)
    else:
        proto = GNN4FR(train, u0, v0, **common)
    batches = BPRSampler(train, seed=cfg.seed).batches(0, cfg.batch_size)
    for _ in range(STEPS):
        proto.train_step(*next(batches))
    proto.final_embeddings()
    return proto.net


_SECAGG_MODEL = {"fedmf": "mf", "fedncf": "ncf", "pgcn": "lightgcn+"}
"""The backbone each horizontal baseline trains (FedGRec keeps the configured one)."""


def _secagg_run(cfg: TrainConfig, adversary: ActiveServer | None) -> Network:
    """``STEPS`` rounds (or minibatches) of a protocol whose secure-aggregation share routing is attacked."""
    from fedgraphrec.training.learners import make_learner

    arm = dataclasses.replace(
        cfg, crypto="real", secure_aggregation=True, model=_SECAGG_MODEL.get(cfg.protocol, cfg.model), alpha=0
    )
    data = prepare_interactions(arm)
    if arm.protocol in SPECS:  # party programs: the adversary sits in the transport
        programs = ProtocolLearner(arm, data, adversary=adversary)
        for r in range(STEPS):
            if programs.server.schedule == "round":
                programs.train_round(r)
        if programs.server.schedule != "round":
            batches = BPRSampler(data.train, seed=cfg.seed).batches(0, cfg.batch_size)
            for _ in range(STEPS):
                programs.train_batch(*next(batches))
        return programs.net
    learner: Any = make_learner(arm, data)
    if adversary is not None:
        learner.protocol.secure_sum = functools.partial(secure_sum, tamper=tamper_inbox(adversary))
    if hasattr(learner, "train_round"):
        for r in range(STEPS):
            learner.train_round(r)
    else:
        batches = BPRSampler(data.train, seed=cfg.seed).batches(0, cfg.batch_size)
        for _ in range(STEPS):
            learner.train_batch(*next(batches))
    return learner.protocol.net


def _sealed_phases(net: Network) -> list[str]:
    """Phases in which the server forwarded sealed messages (from a clean run's transcript)."""
    phases = []
    for entry in net.transcript.of("client") + net.transcript.of("conv-client"):
        if (
            entry.protection == "sealed"
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
    if graph or cfg.protocol in SPECS:
        clean = runner(dataclasses.replace(cfg, transcripts=True), None)
        phases: list[str | None] = list(_sealed_phases(clean))
    else:
        phases = ["secagg/share-keys"]
    rows: list[dict[str, Any]] = []
    for attack in ATTACKS:
        for phase in phases:
            adv = ActiveServer(attack, phase, numpy_rng(cfg.seed, "audit-integrity", attack, str(phase)))
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
