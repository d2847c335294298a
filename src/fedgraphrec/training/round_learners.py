"""The round-based learner that is not a protocol: Mult-VAE (user batches).

Every federated protocol runs as party programs
(:class:`~fedgraphrec.training.protocol_learner.ProtocolLearner`). One epoch of Mult-VAE is one pass
over the users; see :class:`~fedgraphrec.training.learner_base.RoundLearner`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from fedgraphrec.data.types import Interactions
from fedgraphrec.models.multvae import MultVAE
from fedgraphrec.protocols.central import CentralSettings
from fedgraphrec.runtime.ledger import Ledger
from fedgraphrec.seeding import numpy_rng, torch_generator
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.learner_base import (
    DTYPES,
    BatchStats,
    RoundLearner,
)

__all__ = ["MultVAELearner"]


class MultVAELearner(RoundLearner):
    """Mult-VAE, trained by user minibatches: one epoch is one pass over the users (a "round")."""

    def __init__(self, cfg: TrainConfig, data: Interactions) -> None:
        settings = cfg.settings
        if not isinstance(settings, CentralSettings):
            raise TypeError(f"Mult-VAE is a centralized model; protocol {cfg.protocol} does not train it")
        self.train = data.train.tocsr()
        self.dtype = DTYPES[cfg.dtype]
        self.model = MultVAE(
            self.train.shape[1], generator=torch_generator(cfg.seed, "init"), dtype=self.dtype
        )
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=settings.lr)
        self.beta = settings.vae_beta
        self.batch_users = settings.vae_batch_users
        self.seed = cfg.seed
        self.users = np.flatnonzero(np.diff(self.train.indptr) > 0)
        self.last_round: dict[str, int] = {}

    @property
    def ledger(self) -> Ledger | None:
        """Centralized: no communication."""
        return None

    def _rows(self, users: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(self.train[users].toarray()).to(self.dtype)

    def train_round(self, epoch: int) -> BatchStats:
        """One pass over the users in a seeded order; returns the mean loss (``reg`` = the KL term)."""
        order = numpy_rng(self.seed, "multvae", epoch).permutation(self.users)
        total = nll = kl = 0.0
        batches = 0
        self.model.train()
        for start in range(0, len(order), self.batch_users):
            self.optimizer.zero_grad(set_to_none=True)
            out = self.model.loss(self._rows(order[start : start + self.batch_users]), self.beta)
            out.total.backward()
            self.optimizer.step()
            total, nll, kl, batches = (
                total + out.total.item(),
                nll + out.nll.item(),
                kl + out.kl.item(),
                batches + 1,
            )
        return BatchStats(total / batches, nll / batches, kl / batches)

    def score_users(self, users: torch.Tensor) -> torch.Tensor:
        """Logits over every item for these users, from their training rows."""
        return self.model.scores(self._rows(users.numpy())).float()

    def state_dict(self) -> dict[str, Any]:
        """Network, optimizer and the random generator (dropout and noise continue exactly)."""
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "generator": self.model.gen.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.model.gen.set_state(state["generator"])
