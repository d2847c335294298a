"""FedNCF's public settings, every default once, built from the run configuration."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from fedgraphrec.protocols.base import settings_from
from fedgraphrec.protocols.settings import RoundSampling, SecureSumSettings
from fedgraphrec.seeding import secure_draws

__all__ = ["FedNCFSettings", "fedncf_settings"]


@dataclass(frozen=True)
class FedNCFSettings(RoundSampling, SecureSumSettings):
    """What every party knows before the run.

    Args:
        seed: run seed (client sampling shared with FedGRec; per-user streams for the rest).
        clients_per_round: ``S``, users sampled per round (default: 400).
        local_steps: ``τ``, local Adam steps per round (default: 10).
        n_negatives: negatives each sampled user queries per round (default: 2048).
        lr: local Adam learning rate (default: 1e-3).
        reg: L2 weight of the embedding rows in the local loss (default: 1e-4).
        dim: embedding size ``d`` (default: 64).
        ncf_hidden: MLP widths (default: empty, FedNCF's ``(32, 16, 8)``).
        frac_bits: fixed-point fractional bits of secure aggregation (default: 32).
        secagg_threshold: fraction of a round's users secure aggregation needs (default: 0.6).
        secagg_semi_honest: accept a threshold <= 0.5 (default: off).
        secure_cover: draw each user's negatives (and local pairs) from the OS CSPRNG, not its seed
            stream: they hide which queried items are positives (from a run configuration: the
            default under ``crypto = "real"`` unless ``reproducible``).
        secagg_min_clients: the fewest users a secure sum may have (default: 3).
        crypto: the client's own crypto mode; in ``real`` it refuses unprotected secure-sum stages.
    """

    dim: int = 64
    ncf_hidden: tuple[int, ...] = ()
    secure_cover: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "ncf_hidden", tuple(int(w) for w in self.ncf_hidden))

    @property
    def widths(self) -> tuple[int, ...]:
        """The MLP widths."""
        return self.ncf_hidden or (32, 16, 8)

    def weight_shapes(self) -> list[tuple[int, ...]]:
        """Shapes of the shared weights in :func:`~.local.weights_of` order."""
        w, d = self.widths, self.dim
        deep = [s for a, b in itertools.pairwise(w) for s in ((a, b), (b,))]
        return [(d, w[0]), (d, w[0]), (w[0],), *deep, (d + w[-1], 1)]


def fedncf_settings(config: Any) -> FedNCFSettings:
    """The settings of a run configuration.

    Raises:
        ValueError: ``model`` is not ``ncf``, or ``verify`` is set (FedNCF is not lossless).
    """
    if getattr(config, "model", "ncf") != "ncf":
        raise ValueError(f"fedncf trains NeuMF; use --model ncf (got {config.model!r})")
    return settings_from(FedNCFSettings, config, secure_cover=secure_draws(config))
