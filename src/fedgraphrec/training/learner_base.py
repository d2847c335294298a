"""What the training loop drives: the learner interface, the model factory and the round base.

The loop in :mod:`fedgraphrec.training.trainer` needs a learner that trains (on one minibatch of
triples, or on one round for round-based protocols), gives evaluation embeddings or scores, and
checkpoints its state; :mod:`.learners` and :mod:`.round_learners` implement it for every model
and protocol.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict

import torch

from fedgraphrec.data import Interactions
from fedgraphrec.models import BPRMF, NCF, NGCF, GraphRecommender, LightGCN, LightGCNPlus, NormalizedBipartite
from fedgraphrec.privacy.noise_source import SecureNoise
from fedgraphrec.runtime import CryptoMode, Ledger
from fedgraphrec.seeding import torch_generator
from fedgraphrec.training.config import TrainConfig

__all__ = [
    "DTYPES",
    "BatchStats",
    "Learner",
    "NetworkOptions",
    "RoundLearner",
    "build_model",
    "init_generator",
    "network_options",
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


class NetworkOptions(TypedDict):
    """Keyword arguments every protocol's constructor takes for its :class:`~fedgraphrec.runtime.Network`."""

    crypto: CryptoMode
    transcripts: bool


def network_options(cfg: TrainConfig) -> NetworkOptions:
    """Crypto mode and transcripts of a run, as protocol constructor arguments."""
    return {"crypto": "real" if cfg.crypto == "real" else "accounted", "transcripts": cfg.transcripts}


def init_generator(cfg: TrainConfig) -> torch.Generator:
    """The generator that draws the initial tables: the run seed's public ``init`` stream.

    With ``secure_init`` it is keyed by 63 bits from :mod:`secrets` instead, and :func:`build_model`
    then redraws every embedding table from a ChaCha20 keystream (Mersenne Twister is not a CSPRNG:
    its outputs would betray its state), so only the dense weights (NCF's MLP) come from it.
    """
    if cfg.secure_init:
        return torch.Generator().manual_seed(secrets.randbits(63))
    return torch_generator(cfg.seed, "init")


def _redraw_tables_securely(model: GraphRecommender, cfg: TrainConfig, data: Interactions) -> None:
    """Redraw every embedding table from an ``os.urandom``-keyed ChaCha20 keystream.

    An embedding table is a ``rows × dim`` parameter with one row per user or item; its new values are
    N(0, init_std²) draws from :class:`~fedgraphrec.privacy.noise_source.SecureNoise`.

    Why: LP-GCN's server sees plaintext item rows (``sync/l=0``); with tables from the run seed it could
    regenerate the initial table and match rows to learn the item id behind every token.
    """
    noise = SecureNoise()
    n_users, n_items = data.train.shape
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() == 2 and param.shape[0] in (n_users, n_items) and param.shape[1] == cfg.dim:
                draw = torch.from_numpy(noise.standard_normal(tuple(param.shape))) * cfg.init_std
                param.copy_(draw.to(param.dtype))


def build_model(cfg: TrainConfig, data: Interactions) -> GraphRecommender:
    """The centralized model named by ``cfg.model``, initialised by :func:`init_generator`.

    Under ``secure_init`` its embedding tables are then redrawn by :func:`_redraw_tables_securely`.
    """
    dtype = DTYPES[cfg.dtype]
    graph = NormalizedBipartite.from_train(data.train, dtype=dtype)
    gen = init_generator(cfg)
    model: GraphRecommender
    if cfg.model == "lightgcn":
        model = LightGCN(graph, cfg.dim, cfg.n_layers, cfg.init_std, gen, dtype)
    elif cfg.model == "lightgcn+":
        model = LightGCNPlus(graph, data.train, cfg.dim, cfg.n_layers, cfg.init_std, gen, dtype)
    elif cfg.model == "ncf":
        hidden = tuple(cfg.ncf_hidden) or ((32, 16, 8) if cfg.protocol == "fedncf" else None)
        model = NCF(graph, cfg.dim, cfg.init_std, gen, dtype, hidden=hidden)
    elif cfg.model == "ngcf":
        model = NGCF(graph, cfg.dim, cfg.n_layers, cfg.init_std, gen, dtype)
    else:
        model = BPRMF(graph, cfg.dim, cfg.init_std, gen, dtype)
    if cfg.secure_init:
        _redraw_tables_securely(model, cfg, data)
    return model


class RoundLearner:
    """Base of learners that train by rounds (the loop calls ``train_round(epoch)``, one per epoch).

    Subclasses set ``protocol`` (with ``net``, ``state_dict`` and ``load_state_dict``) and
    ``last_round`` (clients taking part, lost, recovered), and implement :meth:`train_round` plus
    :meth:`embeddings` or ``score_users`` for evaluation.
    """

    protocol: Any
    last_round: dict[str, int]

    @property
    def ledger(self) -> Ledger | None:
        """The protocol's communication ledger."""
        ledger: Ledger = self.protocol.net.ledger
        return ledger

    def train_round(self, round_index: int) -> BatchStats:
        """One round (one epoch)."""
        raise NotImplementedError

    def train_batch(self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> BatchStats:
        """Round-based learners sample their own users and pairs; minibatches do not apply."""
        raise TypeError(f"{type(self).__name__} trains by rounds: call train_round")

    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Models that are not scored by a dot product are evaluated through ``score_users``."""
        raise TypeError(f"{type(self).__name__} is evaluated through score_users")

    def pop_deviation(self) -> float | None:
        """Round-based protocols are not lossless: nothing to verify."""
        return None

    def state_dict(self) -> dict[str, Any]:
        """The protocol's state (tables, users' state, ledger)."""
        state: dict[str, Any] = self.protocol.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.protocol.load_state_dict(state)
