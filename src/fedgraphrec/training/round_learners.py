"""Learners of round-based training: FedGRec and its family, and Mult-VAE (user batches).

FedPerGNN and FedNCF run as party programs (:class:`~fedgraphrec.training.protocol_learner.ProtocolLearner`).

One epoch of the training loop is one communication round (the papers' "epoch" for FedGRec) or one
pass over the users (Mult-VAE); see :class:`~fedgraphrec.training.learner_base.RoundLearner`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from fedgraphrec.data import Interactions
from fedgraphrec.models.multvae import MultVAE
from fedgraphrec.protocols.fedgrec import FedGRec
from fedgraphrec.runtime import Ledger
from fedgraphrec.seeding import numpy_rng, torch_generator
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.learner_base import (
    DTYPES,
    BatchStats,
    RoundLearner,
    build_model,
    network_options,
)

__all__ = ["FedGRecLearner", "MultVAELearner"]


class FedGRecLearner(RoundLearner):
    """FedGRec: one communication round per epoch (the paper's "epoch"), lossy by design.

    The initial tables are the centralized LightGCN's (same ``init`` stream), so the warm-up can be
    compared with the oracle's propagation. There is no lockstep oracle: FedGRec is not lossless.
    """

    def __init__(self, cfg: TrainConfig, data: Interactions) -> None:
        if cfg.model != "lightgcn" and not (cfg.protocol != "fedgrec" and cfg.model == "mf"):
            raise ValueError(f"{cfg.protocol} runs the lightgcn backbone; got model={cfg.model!r}")
        if cfg.verify:
            raise ValueError(f"{cfg.protocol} is not lossless; --verify applies to lpgcn, gnn4fr and fedmf")
        tables = dict(build_model(cfg, data).named_parameters())
        self.protocol = FedGRec(
            data.train,
            tables["user_emb"].detach(),
            tables["item_emb"].detach(),
            cfg.fedgrec_settings(),
            seed=cfg.seed,
            **network_options(cfg),
            device=cfg.device,
        )
        self.last_round: dict[str, int] = {}

    def train_round(self, round_index: int) -> BatchStats:
        """One round of Algorithm 1; who was lost is kept in :attr:`last_round`."""
        rec = self.protocol.train_round(round_index)
        self.last_round = {
            "clients": rec.clients,
            "clients_lost": rec.lost,
            "clients_recovered": rec.recovered,
        }
        return BatchStats(rec.loss, rec.bpr, rec.reg)

    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Representations for evaluation (spec §5.3)."""
        return self.protocol.final_embeddings()


class MultVAELearner(RoundLearner):
    """Mult-VAE, trained by user minibatches: one epoch is one pass over the users (a "round")."""

    def __init__(self, cfg: TrainConfig, data: Interactions) -> None:
        self.train = data.train.tocsr()
        self.dtype = DTYPES[cfg.dtype]
        self.model = MultVAE(
            self.train.shape[1], generator=torch_generator(cfg.seed, "init"), dtype=self.dtype
        )
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.lr)
        self.beta = cfg.vae_beta
        self.batch_users = cfg.vae_batch_users
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
