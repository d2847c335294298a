"""Minibatch learners (the centralized oracle, LP-GCN, GNN4FR, FedMF) and :func:`make_learner`.

The loop in :mod:`fedgraphrec.training.trainer` only needs a learner that trains on one minibatch of
triples (or one round, :mod:`.round_learners`), exposes final embeddings or scores for evaluation,
and checkpoints its state. The centralized oracle and every protocol implement this, so one loop
(early stopping, checkpoints, run folder) serves all.
"""

from __future__ import annotations

from typing import Any

import torch

from fedgraphrec.data import Interactions
from fedgraphrec.models import NCF
from fedgraphrec.protocols.baselines import FedMF
from fedgraphrec.protocols.gnn4fr import GNN4FR
from fedgraphrec.protocols.lpgcn.protocol import LPGCN
from fedgraphrec.runtime import Ledger
from fedgraphrec.training.config import ROUND_PROTOCOLS, TrainConfig
from fedgraphrec.training.learner_base import (
    BatchStats,
    Learner,
    RoundLearner,
    build_model,
    network_options,
)
from fedgraphrec.training.protocol_learner import SPECS, ProtocolLearner
from fedgraphrec.training.round_learners import (
    FedGRecLearner,
    MultVAELearner,
)

__all__ = [
    "BatchStats",
    "CentralLearner",
    "FedGRecLearner",
    "FedMFLearner",
    "LPGCNLearner",
    "Learner",
    "MultVAELearner",
    "build_model",
    "make_learner",
]


class CentralLearner:
    """A centralized model with its Adam optimizer (the oracle)."""

    def __init__(self, cfg: TrainConfig, data: Interactions) -> None:
        self.model = build_model(cfg, data)
        self.reg = cfg.reg
        self.score_users = self._score_users if isinstance(self.model, NCF) else None
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.lr)

    @property
    def ledger(self) -> Ledger | None:
        """Centralized training communicates nothing."""
        return None

    def train_batch(self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> BatchStats:
        """Autograd step of the LightGCN BPR loss."""
        self.optimizer.zero_grad(set_to_none=True)
        out = self.model.batch_loss(users, pos, neg, self.reg)
        out.total.backward()
        self.optimizer.step()
        return BatchStats(out.total.item(), out.bpr.item(), out.reg.item())

    def pop_deviation(self) -> float | None:
        """The oracle does not verify itself."""
        return None

    @torch.no_grad()
    def _score_users(self, users: torch.Tensor) -> torch.Tensor:
        assert isinstance(self.model, NCF)
        return self.model.score_users(users).float()

    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Final embeddings of the model."""
        return self.model.frozen_embeddings()

    def parameters_for_verification(self) -> dict[str, torch.Tensor]:
        """The learnable tables a lossless protocol must reproduce, by name."""
        return {k: v.detach() for k, v in self.model.named_parameters()}

    def state_dict(self) -> dict[str, Any]:
        """Model and optimizer state."""
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore model and optimizer."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])


class LPGCNLearner:
    """LP-GCN, optionally verified against the centralized oracle in lockstep.

    With ``cfg.verify`` the oracle takes the same minibatches from the same initial tables, and
    :attr:`max_deviation` holds the largest relative difference of the parameters after any step
    since the last :meth:`pop_deviation`.
    """

    def __init__(self, cfg: TrainConfig, data: Interactions) -> None:
        if cfg.model not in ("lightgcn", "lightgcn+"):
            raise ValueError(f"lpgcn runs the lightgcn or lightgcn+ backbone; got model={cfg.model!r}")
        tables = self._oracle_tables(cfg, data)
        self.protocol = LPGCN(
            data.train,
            tables.get("user_emb"),
            tables["item_emb"],
            n_layers=cfg.n_layers,
            alpha=cfg.alpha,
            seed=cfg.seed,
            lr=cfg.lr,
            reg=cfg.reg,
            **network_options(cfg),
            item_w0=tables.get("item_w"),
            paper_literal=cfg.paper_literal,
            secret_cover=cfg.secure_virtual_items,
        )

    def _oracle_tables(self, cfg: TrainConfig, data: Interactions) -> dict[str, torch.Tensor]:
        """The centralized model's initial tables (drawn once; rows go to their owners).

        Keeps the model as the lockstep oracle when ``cfg.verify``.
        """
        oracle = CentralLearner(cfg, data)
        self.oracle = oracle if cfg.verify else None
        self.max_deviation = 0.0
        return oracle.parameters_for_verification()

    @property
    def ledger(self) -> Ledger | None:
        """The protocol's communication ledger."""
        return self.protocol.net.ledger

    def train_batch(self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> BatchStats:
        """One minibatch of Algorithm 1 (and of the oracle, when verifying)."""
        rec = self.protocol.train_step(users, pos, neg)
        if self.oracle is not None:
            self.oracle.train_batch(users, pos, neg)
            reference = self.oracle.parameters_for_verification()
            for name, fed in self.protocol.parameters_by_name().items():
                ref = reference[name]
                dev = ((fed.detach() - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
                self.max_deviation = max(self.max_deviation, dev)
        return BatchStats(rec.loss, rec.bpr, rec.reg)

    def pop_deviation(self) -> float | None:
        """Largest deviation since the last call (``None`` when not verifying)."""
        if self.oracle is None:
            return None
        dev, self.max_deviation = self.max_deviation, 0.0
        return dev

    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Final embeddings as the clients and server hold them."""
        return self.protocol.final_embeddings()

    def state_dict(self) -> dict[str, Any]:
        """Owners' parameters, their Adam states, the ledger (and the oracle's state)."""
        p = self.protocol
        state: dict[str, Any] = {
            "tables": {k: v.detach().clone() for k, v in p.parameters_by_name().items()},
            "optimizer": p.optimizer.state_dict(),
            "ledger": p.net.ledger.state_dict(),
        }
        if self.oracle is not None:
            state["oracle"] = self.oracle.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore parameters, optimizer, ledger (set-up is re-run deterministically)."""
        p = self.protocol
        with torch.no_grad():
            for name, param in p.parameters_by_name().items():
                param.copy_(state["tables"][name])
        p.optimizer.load_state_dict(state["optimizer"])
        p.net.ledger.load_state_dict(state["ledger"])
        if self.oracle is not None and "oracle" in state:
            self.oracle.load_state_dict(state["oracle"])


class GNN4FRLearner(LPGCNLearner):
    """GNN4FR (LightGCN backbone), optionally verified against the oracle; shares LP-GCN's plumbing."""

    def __init__(self, cfg: TrainConfig, data: Interactions) -> None:
        if cfg.model != "lightgcn":
            raise ValueError(f"gnn4fr runs the lightgcn backbone; got model={cfg.model!r}")
        if cfg.alpha:
            raise ValueError("gnn4fr has no virtual items; alpha applies to lpgcn only (set alpha=0)")
        tables = self._oracle_tables(cfg, data)
        self.protocol = GNN4FR(  # type: ignore[assignment]
            data.train,
            tables["user_emb"],
            tables["item_emb"],
            n_layers=cfg.n_layers,
            seed=cfg.seed,
            lr=cfg.lr,
            reg=cfg.reg,
            **network_options(cfg),
        )


class FedMFLearner(LPGCNLearner):
    """FedMF (BPR-MF with securely aggregated item gradients), verifiable against centralized BPR-MF."""

    def __init__(self, cfg: TrainConfig, data: Interactions) -> None:
        if cfg.model != "mf":
            raise ValueError(f"fedmf is matrix factorisation; use --model mf (got {cfg.model!r})")
        if cfg.alpha:
            raise ValueError("fedmf has no virtual items; alpha applies to lpgcn only (set alpha=0)")
        tables = self._oracle_tables(cfg, data)
        self.protocol = FedMF(  # type: ignore[assignment]
            data.train,
            tables["user_emb"],
            tables["item_emb"],
            seed=cfg.seed,
            lr=cfg.lr,
            reg=cfg.reg,
            **network_options(cfg),
            frac_bits=cfg.frac_bits,
            secagg_threshold=cfg.secagg_threshold,
            secagg_semi_honest=cfg.secagg_semi_honest,
        )


def make_learner(
    cfg: TrainConfig, data: Interactions
) -> CentralLearner | LPGCNLearner | RoundLearner | ProtocolLearner:
    """The learner for ``cfg.protocol`` (party programs where the protocol has them)."""
    if cfg.protocol in SPECS:
        return ProtocolLearner(cfg, data)
    if cfg.protocol == "central" and cfg.model == "multvae":
        return MultVAELearner(cfg, data)
    if cfg.protocol == "central":
        return CentralLearner(cfg, data)
    if cfg.protocol == "lpgcn":
        return LPGCNLearner(cfg, data)
    if cfg.protocol == "gnn4fr":
        return GNN4FRLearner(cfg, data)
    if cfg.protocol in ROUND_PROTOCOLS:
        return FedGRecLearner(cfg, data)
    if cfg.protocol == "fedmf":
        return FedMFLearner(cfg, data)
    raise ValueError(f"unknown protocol {cfg.protocol!r}")
