"""Learners: what the training loop drives, centralized or federated.

The loop in :mod:`fedgraphrec.experiments.train` only needs a learner that trains on one minibatch of
triples, exposes final embeddings for evaluation, and checkpoints its state. The centralized oracle
and every protocol implement this, so one loop (early stopping, checkpoints, run folder) serves all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from fedgraphrec.data import Interactions
from fedgraphrec.experiments.config import TrainConfig
from fedgraphrec.models import BPRMF, NCF, NGCF, GraphRecommender, LightGCN, LightGCNPlus, NormalizedBipartite
from fedgraphrec.models.multvae import MultVAE
from fedgraphrec.protocols.baselines import FedMF, FedNCF
from fedgraphrec.protocols.fedgrec import FedGRec
from fedgraphrec.protocols.gnn4fr import GNN4FR
from fedgraphrec.protocols.lpgcn.protocol import LPGCN
from fedgraphrec.runtime import Ledger
from fedgraphrec.seeding import numpy_rng, torch_generator

__all__ = [
    "BatchStats",
    "CentralLearner",
    "FedGRecLearner",
    "FedMFLearner",
    "FedNCFLearner",
    "LPGCNLearner",
    "Learner",
    "MultVAELearner",
    "build_model",
    "make_learner",
]

DTYPES = {"float32": torch.float32, "float64": torch.float64}


@dataclass(frozen=True)
class BatchStats:
    """Loss of one minibatch, split into its BPR and regulariser parts."""

    loss: float
    bpr: float
    reg: float


class Learner(Protocol):
    """What the training loop needs from a model or protocol."""

    def train_batch(self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> BatchStats:
        """Train on one minibatch of BPR triples."""
        ...

    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Final user and item embeddings for evaluation."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from :meth:`state_dict`."""
        ...

    @property
    def ledger(self) -> Ledger | None:
        """Communication ledger (``None`` for centralized training)."""
        ...

    def pop_deviation(self) -> float | None:
        """Largest deviation from the oracle since the last call (``None`` when not verifying)."""
        ...


def build_model(cfg: TrainConfig, data: Interactions) -> GraphRecommender:
    """The centralized model named by ``cfg.model``, initialised from the run seed's ``init`` stream."""
    dtype = DTYPES[cfg.dtype]
    graph = NormalizedBipartite.from_train(data.train, dtype=dtype)
    gen = torch_generator(cfg.seed, "init")
    if cfg.model == "lightgcn":
        return LightGCN(graph, cfg.dim, cfg.n_layers, cfg.init_std, gen, dtype)
    if cfg.model == "lightgcn+":
        return LightGCNPlus(graph, data.train, cfg.dim, cfg.n_layers, cfg.init_std, gen, dtype)
    if cfg.model == "ncf":
        hidden = tuple(cfg.ncf_hidden) or ((32, 16, 8) if cfg.protocol == "fedncf" else None)
        return NCF(graph, cfg.dim, cfg.init_std, gen, dtype, hidden=hidden)
    if cfg.model == "ngcf":
        return NGCF(graph, cfg.dim, cfg.n_layers, cfg.init_std, gen, dtype)
    return BPRMF(graph, cfg.dim, cfg.init_std, gen, dtype)


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
        oracle = CentralLearner(cfg, data)  # draws the tables once; rows are handed to their owners
        tables = oracle.parameters_for_verification()
        self.protocol = LPGCN(
            data.train,
            tables.get("user_emb"),
            tables["item_emb"],
            n_layers=cfg.n_layers,
            alpha=cfg.alpha,
            seed=cfg.seed,
            lr=cfg.lr,
            reg=cfg.reg,
            crypto="real" if cfg.crypto == "real" else "accounted",
            transcripts=cfg.transcripts,
            item_w0=tables.get("item_w"),
            paper_literal=cfg.paper_literal,
        )
        self.oracle = oracle if cfg.verify else None
        self.max_deviation = 0.0

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
        oracle = CentralLearner(cfg, data)
        tables = oracle.parameters_for_verification()
        self.protocol = GNN4FR(  # type: ignore[assignment]
            data.train,
            tables["user_emb"],
            tables["item_emb"],
            n_layers=cfg.n_layers,
            seed=cfg.seed,
            lr=cfg.lr,
            reg=cfg.reg,
            crypto="real" if cfg.crypto == "real" else "accounted",
            transcripts=cfg.transcripts,
        )
        self.oracle = oracle if cfg.verify else None
        self.max_deviation = 0.0


class FedMFLearner(LPGCNLearner):
    """FedMF (BPR-MF with securely aggregated item gradients), verifiable against centralized BPR-MF."""

    def __init__(self, cfg: TrainConfig, data: Interactions) -> None:
        if cfg.model != "mf":
            raise ValueError(f"fedmf is matrix factorisation; use --model mf (got {cfg.model!r})")
        if cfg.alpha:
            raise ValueError("fedmf has no virtual items; alpha applies to lpgcn only (set alpha=0)")
        oracle = CentralLearner(cfg, data)
        tables = oracle.parameters_for_verification()
        self.protocol = FedMF(  # type: ignore[assignment]
            data.train,
            tables["user_emb"],
            tables["item_emb"],
            seed=cfg.seed,
            lr=cfg.lr,
            reg=cfg.reg,
            crypto="real" if cfg.crypto == "real" else "accounted",
            transcripts=cfg.transcripts,
            frac_bits=cfg.frac_bits,
            secagg_threshold=cfg.secagg_threshold,
        )
        self.oracle = oracle if cfg.verify else None
        self.max_deviation = 0.0


class FedGRecLearner:
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
            crypto="real" if cfg.crypto == "real" else "accounted",
            transcripts=cfg.transcripts,
            device=cfg.device,
        )
        self.last_round: dict[str, int] = {}

    @property
    def ledger(self) -> Ledger | None:
        """The protocol's communication ledger."""
        return self.protocol.net.ledger

    def train_round(self, round_index: int) -> BatchStats:
        """One round of Algorithm 1; who was lost is kept in :attr:`last_round`."""
        rec = self.protocol.train_round(round_index)
        self.last_round = {
            "clients": rec.clients,
            "clients_lost": rec.lost,
            "clients_recovered": rec.recovered,
        }
        return BatchStats(rec.loss, rec.bpr, rec.reg)

    def train_batch(self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> BatchStats:
        """FedGRec samples its own users and negatives per round; minibatches do not apply."""
        raise TypeError("FedGRec trains by rounds: call train_round")

    def pop_deviation(self) -> float | None:
        """Not verified against an oracle."""
        return None

    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Representations for evaluation (spec §5.3)."""
        return self.protocol.final_embeddings()

    def state_dict(self) -> dict[str, Any]:
        """Server tables, users' stored embeddings, ledger."""
        return self.protocol.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.protocol.load_state_dict(state)


class FedNCFLearner:
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
            crypto="real" if cfg.crypto == "real" else "accounted",
            transcripts=cfg.transcripts,
            frac_bits=cfg.frac_bits,
            secagg_threshold=cfg.secagg_threshold,
        )
        self.last_round: dict[str, int] = {}

    @property
    def ledger(self) -> Ledger | None:
        """The protocol's ledger."""
        return self.protocol.net.ledger

    def train_round(self, round_index: int) -> BatchStats:
        """One FedNCF round."""
        loss, n = self.protocol.train_round(round_index)
        self.last_round = {"clients": n, "clients_lost": 0, "clients_recovered": 0}
        return BatchStats(loss, loss, 0.0)

    @torch.no_grad()
    def score_users(self, users: torch.Tensor) -> torch.Tensor:
        """NeuMF scores with the users' own rows and the server's items and weights."""
        return self.model.score_users(users).float()

    def train_batch(self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> BatchStats:
        """FedNCF trains by rounds."""
        raise TypeError("FedNCF trains by rounds: call train_round")

    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """NeuMF is evaluated through :meth:`score_users`."""
        raise TypeError("FedNCF is evaluated through score_users")

    def pop_deviation(self) -> float | None:
        """No oracle."""
        return None

    def state_dict(self) -> dict[str, Any]:
        """Model and ledger."""
        return self.protocol.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.protocol.load_state_dict(state)


class MultVAELearner:
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

    def train_batch(self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> BatchStats:
        """Mult-VAE does not train on triples."""
        raise TypeError("Mult-VAE trains on user rows: call train_round")

    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Mult-VAE has no item embeddings to dot with; use :meth:`score_users`."""
        raise TypeError("Mult-VAE is evaluated through score_users")

    def pop_deviation(self) -> float | None:
        """No oracle."""
        return None

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


def make_learner(cfg: TrainConfig, data: Interactions) -> CentralLearner | LPGCNLearner | FedGRecLearner:
    """The learner for ``cfg.protocol``."""
    if cfg.protocol == "central" and cfg.model == "multvae":
        return MultVAELearner(cfg, data)  # type: ignore[return-value]
    if cfg.protocol == "central":
        return CentralLearner(cfg, data)
    if cfg.protocol == "lpgcn":
        return LPGCNLearner(cfg, data)
    if cfg.protocol == "gnn4fr":
        return GNN4FRLearner(cfg, data)
    if cfg.protocol in ("fedgrec", "federank", "fcf"):
        return FedGRecLearner(cfg, data)
    if cfg.protocol == "fedmf":
        return FedMFLearner(cfg, data)
    if cfg.protocol == "fedncf":
        return FedNCFLearner(cfg, data)  # type: ignore[return-value]
    raise ValueError(f"unknown protocol {cfg.protocol!r}")
