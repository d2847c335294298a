"""What the training loop drives: the learner interface, the model factory and the round base.

The loop in :mod:`fedgraphrec.training.trainer` needs a learner that trains (on one minibatch of
triples, or on one round for round-based protocols), gives evaluation embeddings or scores, and
checkpoints its state; :mod:`.learners` and :mod:`.round_learners` implement it for every model
and protocol.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from fedgraphrec.data.types import Interactions
from fedgraphrec.models.base import GraphRecommender
from fedgraphrec.models.lightgcn import LightGCN, LightGCNPlus
from fedgraphrec.models.mf import BPRMF
from fedgraphrec.models.ncf import NCF
from fedgraphrec.models.ngcf import NGCF
from fedgraphrec.models.propagation import NormalizedBipartite
from fedgraphrec.privacy.noise_source import SecureNoise
from fedgraphrec.protocols.settings import Architecture, ModelSettings
from fedgraphrec.runtime.ledger import Ledger
from fedgraphrec.seeding import secure_draws, seeded_generator, torch_generator
from fedgraphrec.training.config import TrainConfig

__all__ = [
    "DTYPES",
    "AnyLearner",
    "BatchStats",
    "EpochLearner",
    "Learner",
    "RoundLearner",
    "build_model",
    "init_generator",
    "secure_init",
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


class EpochLearner(Protocol):
    """A learner the loop trains one epoch (round) per call.

    DGREC's peers, P4GCN's organisations and the round-based protocols; evaluated through
    ``score_users``, ``evaluate_splits`` or ``embeddings``.
    """

    def train_round(self, round_index: int) -> BatchStats:
        """One epoch."""
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume."""
        ...

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from :meth:`state_dict`."""
        ...

    @property
    def ledger(self) -> Ledger | None:
        """Communication ledger (``None`` when nothing is sent)."""
        ...

    def pop_deviation(self) -> float | None:
        """Largest deviation from the oracle since the last call (``None`` when not verifying)."""
        ...


AnyLearner = Learner | EpochLearner
"""What the loop drives: a minibatch learner or an epoch learner."""


def secure_init(cfg: TrainConfig) -> bool:
    """Whether the run draws its initial tables from the CSPRNG (``secure_init``, else ``reproducible``).

    A centralized run hides nothing from anyone: it keeps the seeded tables unless ``secure_init`` asks.
    """
    settings = cfg.program_settings()
    if cfg.protocol == "central" and getattr(settings, "secure_init", None) is None:
        return False
    return secure_draws(settings, "secure_init")


def init_generator(cfg: TrainConfig, init_key: bytes | None = None) -> torch.Generator:
    """The generator that draws the initial tables: the run seed's public ``init`` stream.

    Under secure init (:func:`secure_init`) it is keyed by 63 bits from ``init_key`` (or from
    :mod:`secrets` without one) instead, and :func:`build_model` then redraws every embedding table
    from a ChaCha20 keystream (Mersenne Twister is not a CSPRNG: its outputs would betray its state),
    so only the dense weights (NCF's MLP, the server's own) come from it.
    """
    if secure_init(cfg):
        if init_key is None:
            return seeded_generator(secrets.randbits(63))
        digest = hashlib.sha256(b"fedgraphrec/init-dense|" + init_key).digest()
        return seeded_generator(int.from_bytes(digest[:8], "little") & 0x7FFF_FFFF_FFFF_FFFF)
    return torch_generator(cfg.seed, "init")


def _redraw_tables_securely(
    model: GraphRecommender, cfg: TrainConfig, data: Interactions, init_key: bytes | None
) -> None:
    """Redraw every embedding table from an ``os.urandom``-keyed (or ``init_key``-keyed) ChaCha20 stream.

    An embedding table is a ``rows × dim`` parameter with one row per user or item; its new values are
    N(0, init_std²) draws from :class:`~fedgraphrec.privacy.noise_source.SecureNoise`, in parameter
    order, so parties holding the same ``init_key`` draw the same tables.

    Why: LP-GCN's server sees plaintext item rows (``sync/l=0``); with tables from the run seed it could
    regenerate the initial table and match rows to learn the item id behind every token.
    """
    noise = SecureNoise(init_key)
    arch = _architecture(cfg)
    n_users, n_items = data.train.shape
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() == 2 and param.shape[0] in (n_users, n_items) and param.shape[1] == arch.dim:
                draw = torch.from_numpy(noise.standard_normal(tuple(param.shape))) * arch.init_std
                param.copy_(draw.to(param.dtype))


def _architecture(cfg: TrainConfig) -> Architecture:
    """The backbone of the run's protocol (its settings must name one: :class:`ModelSettings`)."""
    if not isinstance(cfg.settings, ModelSettings):
        raise TypeError(f"protocol {cfg.protocol} has no model settings; it builds no centralized model")
    return cfg.settings.architecture()


def build_model(cfg: TrainConfig, data: Interactions, init_key: bytes | None = None) -> GraphRecommender:
    """The centralized model named by the protocol's ``model`` setting, initialised by :func:`init_generator`.

    Under secure init its embedding tables are then redrawn by :func:`_redraw_tables_securely`, from
    ``init_key`` when given (32 secret bytes: every holder of the key draws the same tables) or from
    fresh :func:`os.urandom` bytes.
    """
    dtype = DTYPES[cfg.dtype]
    graph = NormalizedBipartite.from_train(data.train, dtype=dtype)
    gen = init_generator(cfg, init_key)
    a = _architecture(cfg)
    model: GraphRecommender
    if a.model == "lightgcn":
        model = LightGCN(graph, a.dim, a.n_layers, a.init_std, gen, dtype)
    elif a.model == "lightgcn+":
        model = LightGCNPlus(graph, data.train, a.dim, a.n_layers, a.init_std, gen, dtype)
    elif a.model == "ncf":
        model = NCF(graph, a.dim, a.init_std, gen, dtype, hidden=a.hidden or None)
    elif a.model == "ngcf":
        model = NGCF(graph, a.dim, a.n_layers, a.init_std, gen, dtype)
    else:
        model = BPRMF(graph, a.dim, a.init_std, gen, dtype)
    if secure_init(cfg):
        _redraw_tables_securely(model, cfg, data, init_key)
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
