"""The runs of the integrity audit: model variants, one short run, and what a clean run relays.

:mod:`fedgraphrec.audits.integrity` attacks every sealed phase of every model variant of a protocol
(:data:`VARIANTS`: LP-GCN with LightGCN and LightGCN+, GNN4FR as designed and ``paper_literal``).
Each attempt is one short run (:func:`run_once`: set-up, :data:`STEPS` steps, the prediction stages)
on :data:`NODES` nodes, so that every phase the server relays reaches several nodes and every
attack has an instance. A clean run first tells what there is to attack (:func:`catalogue`): the
phases the server forwards sealed (from its transcript), the plain phases it sends, the stages of
every step and the secure-aggregation phases.

The learner comes from a factory (:data:`LearnerFactory`), so the same runs go through either
engine: in process (:func:`in_process`, :class:`~fedgraphrec.runtime.local.LocalTransport`) or
through the Flower node handler (``fedgraphrec.engines.flower.loopback``, which the CLI passes in;
this layer does not import the engines).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fedgraphrec.attacks.lying_server import LyingServer
from fedgraphrec.data.types import Interactions
from fedgraphrec.protocols.settings import MinibatchSettings
from fedgraphrec.runtime.network import Adversary
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.data import prepare_interactions
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.protocol_learner import ProtocolLearner
from fedgraphrec.training.sampler import BPRSampler

__all__ = [
    "NODES",
    "STEPS",
    "VARIANTS",
    "Catalogue",
    "LearnerFactory",
    "arms",
    "catalogue",
    "in_process",
    "run_once",
]

NODES = 2
"""Nodes per run: every relayed phase then reaches more than one node (no single-node batching)."""
STEPS = 2
"""Steps per run: the least that gives a replay of an earlier step's message and a later step to reset."""
VARIANTS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "lpgcn": [("lightgcn", {"model": "lightgcn"}), ("lightgcn+", {"model": "lightgcn+"})],
    "gnn4fr": [("default", {"paper_literal": False}), ("paper_literal", {"paper_literal": True})],
}
"""Model variants whose sealed phases differ (every other protocol: one variant, ``default``)."""

LearnerFactory = Callable[[TrainConfig, Interactions, Adversary | None], ProtocolLearner]
"""Builds the learner of one run with the adversary attached before set-up (an engine's choice)."""


def in_process(cfg: TrainConfig, data: Interactions, adversary: Adversary | None) -> ProtocolLearner:
    """The in-process engine on :data:`NODES` nodes."""
    return ProtocolLearner(cfg, data, nodes=NODES, adversary=adversary)


def arms(cfg: TrainConfig) -> list[tuple[str, TrainConfig]]:
    """Every model variant of ``cfg.protocol`` in ``real`` crypto mode, float64, without ``verify``."""
    base: dict[str, Any] = {"crypto": "real", "verify": False, "transcripts": False}
    if cfg.protocol in ("lpgcn", "gnn4fr"):
        base.update(dtype="float64", model="lightgcn")
    elif hasattr(cfg.settings, "secure_aggregation"):
        base.update(secure_aggregation=True)
    out = []
    for label, changes in VARIANTS.get(cfg.protocol, [("default", {})]):
        out.append((label, load_config(base=cfg, **{**base, **changes})))
    return out


def run_once(cfg: TrainConfig, factory: LearnerFactory, adversary: Adversary | None) -> ProtocolLearner:
    """Set-up, :data:`STEPS` minibatches or rounds, and (graph protocols) the prediction stages."""
    data = prepare_interactions(cfg)
    learner = factory(cfg, data, adversary)
    if learner.server.schedule == "round":
        for r in range(STEPS):
            learner.train_round(r)
        return learner
    batches = BPRSampler(data.train, seed=cfg.seed).batches(0, cfg.settings_as(MinibatchSettings).batch_size)
    for _ in range(STEPS):
        learner.train_batch(*next(batches))
    if cfg.protocol in ("lpgcn", "gnn4fr"):
        learner.server.predict()
    return learner


@dataclass
class Catalogue:
    """What a clean run relays: the targets of the attacks.

    Attributes:
        sealed: phase → kind of every phase the server sent sealed (or asymmetric) messages in.
        steps: phase → the steps at which it was forwarded.
        plain: phase → kind of the plain parts with content the server sent to nodes.
        stages: every stage name, in first-seen order.
        secagg: the secure-aggregation phases (requests with a ``threshold`` field).
        last_step: the last step of the run.
    """

    sealed: dict[str, str] = field(default_factory=dict)
    steps: dict[str, list[int]] = field(default_factory=dict)
    plain: dict[str, str] = field(default_factory=dict)
    stages: list[str] = field(default_factory=list)
    secagg: list[str] = field(default_factory=list)
    last_step: int = 0


def catalogue(cfg: TrainConfig, factory: LearnerFactory) -> Catalogue:
    """One clean run with an observing adversary: what the server sends, hence what there is to attack."""
    observer = LyingServer("observe")
    run_once(cfg, factory, observer)
    stages: list[str] = []
    for _, stage in observer.stages:
        if stage not in stages:
            stages.append(stage)
    return Catalogue(
        sealed=dict(observer.sealed_kinds),
        steps={p: list(s) for p, s in observer.sealed_steps.items()},
        plain=dict(observer.plain_kinds),
        stages=stages,
        secagg=list(observer.secagg_phases),
        last_step=max((s for s, _ in observer.stages), default=0),
    )
