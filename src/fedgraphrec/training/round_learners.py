"""Learners of round-based training: FedNCF, FedPerGNN, and Mult-VAE (user batches).

The FedGRec family runs as party programs (:class:`~fedgraphrec.training.protocol_learner.ProtocolLearner`).

One epoch of the training loop is one communication round (the papers' "epoch" for FedGRec) or one
pass over the users (Mult-VAE); see :class:`~fedgraphrec.training.learner_base.RoundLearner`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from fedgraphrec.data import Interactions
from fedgraphrec.models import NCF
from fedgraphrec.models.multvae import MultVAE
from fedgraphrec.protocols.baselines import FedNCF, FedPerGNN
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

__all__ = ["FedNCFLearner", "FedPerGNNLearner", "MultVAELearner"]


class _LossRoundLearner(RoundLearner):
    """A learner whose protocol's round returns ``(loss, clients)`` and loses no client."""

    protocol: FedNCF | FedPerGNN
    last_round: dict[str, int]

    def train_round(self, round_index: int) -> BatchStats:
        """One protocol round; the loss is all data term (these protocols report no separate L2)."""
        loss, n = self.protocol.train_round(round_index)
        self.last_round = {"clients": n, "clients_lost": 0, "clients_recovered": 0}
        return BatchStats(loss, loss, 0.0)


class FedNCFLearner(_LossRoundLearner):
    """FedNCF by rounds (one epoch = one round), evaluated through the NeuMF scorer."""

    def __init__(self, cfg: TrainConfig, data: Interactions) -> None:
        if cfg.model != "ncf":
            raise ValueError(f"fedncf trains NeuMF; use --model ncf (got {cfg.model!r})")
        if cfg.verify:
            raise ValueError("fedncf is not lossless (FedAvg of local models); --verify does not apply")
        model = build_model(cfg, data)
        assert isinstance(model, NCF)
        self.model = model
        self.protocol = FedNCF(
            data.train,
            model,
            seed=cfg.seed,
            clients_per_round=cfg.clients_per_round,
            local_steps=cfg.local_steps,
            n_negatives=cfg.n_negatives,
            lr=cfg.lr,
            reg=cfg.reg,
            **network_options(cfg),
            frac_bits=cfg.frac_bits,
            secagg_threshold=cfg.secagg_threshold,
            secagg_semi_honest=cfg.secagg_semi_honest,
        )
        self.last_round: dict[str, int] = {}

    @torch.no_grad()
    def score_users(self, users: torch.Tensor) -> torch.Tensor:
        """NeuMF scores with the users' own rows and the server's items and weights."""
        return self.model.score_users(users).float()


class FedPerGNNLearner(_LossRoundLearner):
    """FedPerGNN by rounds (one epoch = one round); users score with their local GNN's ``h_u``."""

    protocol: FedPerGNN

    def __init__(self, cfg: TrainConfig, data: Interactions) -> None:
        if cfg.model not in ("lightgcn", "mf"):
            raise ValueError(
                f"fedpergnn trains user and item tables; use --model lightgcn (got {cfg.model!r})"
            )
        if cfg.verify:
            raise ValueError("fedpergnn is lossy (stale neighbours, LDP noise); --verify does not apply")
        tables = dict(build_model(cfg, data).named_parameters())
        self.protocol = FedPerGNN(
            data.train,
            tables["user_emb"].detach(),
            tables["item_emb"].detach(),
            seed=cfg.seed,
            clients_per_round=cfg.clients_per_round,
            local_steps=cfg.local_steps,
            n_negatives=cfg.n_negatives,
            lr=cfg.lr,
            reg=cfg.reg,
            loss=cfg.loss,
            n_pseudo=cfg.n_pseudo,
            ldp_clip=cfg.ldp_clip,
            ldp_scale=cfg.ldp_scale,
            secure_noise=cfg.secure_noise,
            expand=cfg.local_graph,
            **network_options(cfg),
        )
        self.last_round: dict[str, int] = {}

    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Users' local-GNN representations and the server's item table."""
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
