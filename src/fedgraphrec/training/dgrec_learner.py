"""DGREC as a learner of the one training loop: one epoch per round, full-catalogue scores per user.

:class:`DGRECLearner` wraps the simulated population of peer programs
(:class:`~fedgraphrec.protocols.dgrec.trainer.DGREC`) behind the epoch-level learner interface the
:class:`~fedgraphrec.training.trainer.Trainer` drives: :meth:`~DGRECLearner.train_round` runs one
epoch of group steps, :meth:`~DGRECLearner.score_users` scores the whole catalogue with each user's
own model (the Trainer's ranking evaluation), and checkpoints hold tensors and plain data only.

Randomness: the run is ``reproducible`` (the LDP noise and the group sampling drawn from the run
seed) when asked, or by default under ``crypto="accounted"``; otherwise both come from the OS CSPRNG
(the settings' ``secure_noise`` / ``secure_sampling``, decided by ``resolved()``). DGREC's
messages are plain (one-bit LDP encodings meant for the
neighbours that read them), so ``crypto`` changes nothing else.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.data.types import Interactions
from fedgraphrec.privacy.one_bit import accounting
from fedgraphrec.protocols.dgrec.settings import DGRECSettings
from fedgraphrec.protocols.dgrec.trainer import DGREC
from fedgraphrec.runtime.ledger import Ledger
from fedgraphrec.runtime.network import Network
from fedgraphrec.training.learner_base import BatchStats

__all__ = ["NOISE_NOTE", "DGRECData", "DGRECLearner"]

NOISE_NOTE = {
    "seeded": "LDP randomness from the run seed: reproducible research run, not a privacy guarantee",
    "csprng": "LDP randomness from the OS CSPRNG (secure_noise): the stated β-LDP holds",
}


@dataclass(frozen=True)
class DGRECData:
    """What DGREC trains on: the interactions and the side information.

    Attributes:
        interactions: the train/test split (user × item), with the validation split when one was
            carved (DGREC trains on ``train`` only).
        social: symmetric user × user adjacency (the inter-user graph).
        tags: item × tag incidence (the hyperedges).
    """

    interactions: Interactions
    social: sp.csr_matrix
    tags: sp.csr_matrix

    def sizes(self) -> dict[str, int]:
        """Sizes for run records and reports."""
        train, test, valid = self.interactions.train, self.interactions.test, self.interactions.valid
        return {
            "users": int(train.shape[0]),
            "items": int(train.shape[1]),
            "train": int(train.nnz),
            "valid": int(valid.nnz) if valid is not None else 0,
            "test": int(test.nnz),
            "test_users": int((np.diff(test.tocsr().indptr) > 0).sum()),
            "social_links": int(self.social.nnz),
            "tags": int(self.tags.shape[1]),
        }


class DGRECLearner:
    """One DGREC run (module docstring).

    Args:
        settings: DGREC's settings bound to the run (``TrainConfig.program_settings()``: seed, crypto
            mode and every hiding draw decided).
        data: interactions and side information.
        transcripts: keep what every user received (privacy audits).
    """

    def __init__(self, settings: DGRECSettings, data: DGRECData, *, transcripts: bool) -> None:
        self.settings = settings.resolved()
        self.data = data
        train = data.interactions.train
        net = Network(train.shape[0], settings.crypto, transcripts=transcripts, protocol="dgrec")  # type: ignore[arg-type]
        self.rec = DGREC(train, data.social, data.tags, self.settings, seed=settings.seed, network=net)

    @property
    def ledger(self) -> Ledger:
        """Every message between the peers."""
        return self.rec.network.ledger

    def train_round(self, epoch: int) -> BatchStats:
        """One epoch of group steps; the loss is the mean stored local loss of active users."""
        loss = self.rec.epoch(epoch)
        return BatchStats(loss, loss, 0.0)

    def score_users(self, users: torch.Tensor) -> torch.Tensor:
        """Full-catalogue scores of ``users``, each by its own model."""
        return self.rec.score_users(users)

    def pop_deviation(self) -> None:
        """DGREC has no lossless oracle to compare with."""
        return None

    def state_dict(self) -> dict[str, Any]:
        """Every user's model, the sampling state, the seeded streams and the ledger."""
        return {**self.rec.state_dict(), "ledger": self.ledger.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved (the run's settings, data and seed must be the same)."""
        self.rec.load_state_dict({k: v for k, v in state.items() if k != "ledger"})
        self.ledger.load_state_dict(state["ledger"])

    def run_summary(self) -> dict[str, Any]:
        """What a DGREC run reports besides its metrics."""
        s, rec = self.settings, self.rec
        n_s = rec.models.n_shared()
        return {
            "variant": s.variant,
            "settings": {**asdict(s), "model": asdict(s.local_model)},
            "data": self.data.sizes(),
            "dgrec_path": rec.path,
            "noise_source": rec.noise.name,
            "noise_note": NOISE_NOTE[rec.noise.name],
            "randomness": {
                "reproducible": not (s.secure_noise or s.secure_sampling),
                "noise": "csprng" if s.secure_noise else "seed",
                "sampling": "csprng" if s.secure_sampling else "seed",
            },
            "n_s": n_s,
            "group_steps": int(rec.step_no),
            # how many group steps each user's model took part in (the averaging the one-bit noise needs)
            "steps_per_user": {
                "mean": float(rec.count.mean()),
                "median": float(np.median(rec.count)),
                "min": int(rec.count.min()),
            },
            "model_memory_bytes": rec.models.memory_bytes(),
            "ledger_bytes": int(self.ledger.total_bytes()),
            "accounting_per_sharing": asdict(accounting(s.delta, s.beta, n_s)),
        }
