"""The centralized oracle's learner and :func:`make_learner` (every federated protocol: ``ProtocolLearner``).

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
from fedgraphrec.runtime import Ledger
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.learner_base import (
    BatchStats,
    Learner,
    RoundLearner,
    build_model,
)
from fedgraphrec.training.protocol_learner import SPECS, ProtocolLearner
from fedgraphrec.training.round_learners import MultVAELearner

__all__ = [
    "BatchStats",
    "CentralLearner",
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


def make_learner(cfg: TrainConfig, data: Interactions) -> CentralLearner | RoundLearner | ProtocolLearner:
    """The learner for ``cfg.protocol`` (party programs where the protocol has them)."""
    if cfg.protocol in SPECS:
        return ProtocolLearner(cfg, data)
    if cfg.protocol == "central" and cfg.model == "multvae":
        return MultVAELearner(cfg, data)
    if cfg.protocol == "central":
        return CentralLearner(cfg, data)
    raise ValueError(f"unknown protocol {cfg.protocol!r}")
