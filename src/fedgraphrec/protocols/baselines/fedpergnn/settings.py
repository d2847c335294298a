"""FedPerGNN's public settings, every default once, built from the run configuration."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fedgraphrec.protocols.base import settings_from
from fedgraphrec.protocols.settings import RoundSampling
from fedgraphrec.seeding import secure_draws

__all__ = ["FedPerGNNSettings", "fedpergnn_settings"]


@dataclass(frozen=True)
class FedPerGNNSettings(RoundSampling):
    r"""What every party knows before the run (the package docstring explains each mechanism).

    Args:
        seed: run seed (client sampling shared with FedGRec; per-client streams for negatives,
            local pairs, pseudo items and seeded noise).
        clients_per_round: ``S``, users sampled per round (default: 400).
        local_steps: ``τ``, local Adam steps per round (default: 10).
        n_negatives: negatives each sampled user queries per round (default: 2048).
        lr: local Adam learning rate (default: 1e-3).
        reg: L2 weight of the local loss (default: 1e-4).
        loss: ``bpr`` (FedGNN+BPR) or ``mse`` (FedGNN) (default: ``bpr``).
        n_pseudo: pseudo-interacted items per user and round, 0: off (default: 20).
        ldp_clip: :math:`\delta`, per-coordinate clipping of uploads, 0: none (default: 0.01).
        ldp_scale: :math:`\lambda`, Laplace noise scale, 0: none (default: 0.001).
        secure_noise: draw the Laplace noise from the OS CSPRNG instead of the seed (default: off;
            from a run configuration: on under ``crypto = "real"`` unless ``reproducible``).
        secure_cover: draw negatives, local pairs and pseudo items (and their rows) from the OS
            CSPRNG instead of each user's seed streams (default: off; from a run configuration as
            ``secure_noise``): they hide which uploaded items are real.
        local_graph: expand local graphs through the third party; ``False``: :math:`h_u = e_u`,
            federated MF (default: on).
        crypto: ``real`` computes keys and item tokens for real; ``accounted`` counts their bytes.
    """

    loss: str = "bpr"
    n_pseudo: int = 20
    ldp_clip: float = 0.01
    ldp_scale: float = 0.001
    secure_noise: bool = False
    secure_cover: bool = False
    local_graph: bool = True
    crypto: str = "accounted"

    def __post_init__(self) -> None:
        for name in ("n_pseudo", "ldp_clip", "ldp_scale"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.loss not in ("bpr", "mse"):
            raise ValueError(f"loss must be 'bpr' or 'mse', got {self.loss!r}")
        if self.crypto not in ("real", "accounted"):
            raise ValueError(f"crypto must be 'real' or 'accounted', got {self.crypto!r}")

    @property
    def real(self) -> bool:
        """Whether keys and tokens are computed for real."""
        return self.crypto == "real"


def fedpergnn_settings(config: Any) -> FedPerGNNSettings:
    """The settings of a run configuration (``model`` must be a user/item table model).

    Raises:
        ValueError: ``config.model`` is not ``lightgcn`` or ``mf``.
    """
    model = getattr(config, "model", "lightgcn")
    if model not in ("lightgcn", "mf"):
        raise ValueError(f"fedpergnn trains user and item tables; use --model lightgcn (got {model!r})")
    return settings_from(
        FedPerGNNSettings,
        config,
        secure_noise=secure_draws(config, "secure_noise"),
        secure_cover=secure_draws(config),
    )
