"""The centralized oracle's learner: a model and its Adam on minibatches of BPR triples.

It trains ``central`` runs, and every lossless protocol's ``--verify`` trains it in lockstep
(:class:`~fedgraphrec.training.protocol_learner.ProtocolLearner`), from the protocol's own
backbone, learning rate and L2 weight.
"""

from __future__ import annotations

from typing import Any

import torch

from fedgraphrec.data.types import Interactions
from fedgraphrec.models.ncf import NCF
from fedgraphrec.protocols.settings import MinibatchSettings
from fedgraphrec.runtime.ledger import Ledger
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.learner_base import BatchStats, build_model

__all__ = ["CentralLearner"]


class CentralLearner:
    """A centralized model with its Adam optimizer (the oracle)."""

    def __init__(self, cfg: TrainConfig, data: Interactions) -> None:
        settings = cfg.settings
        if not isinstance(settings, MinibatchSettings):
            raise TypeError(f"protocol {cfg.protocol} does not train on minibatches; no centralized oracle")
        self.model = build_model(cfg, data)
        self.reg = settings.reg
        self.score_users = self._score_users if isinstance(self.model, NCF) else None
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=settings.lr)

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
