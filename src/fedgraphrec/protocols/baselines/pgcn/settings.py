"""P-GCN's public settings, every default once, built from the run configuration."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fedgraphrec.protocols.base import settings_from
from fedgraphrec.protocols.settings import SecureSumSettings

__all__ = ["PGCNSettings", "pgcn_settings"]


@dataclass(frozen=True)
class PGCNSettings(SecureSumSettings):
    """What every party knows before the run.

    Attributes:
        n_layers: :math:`L`, LightGCN+'s propagation layers (default: 3).
        lr: the server's Adam learning rate on ``V`` and ``W`` (default: 1e-3).
        reg: ``λ`` of the layer-0 L2 term (default: 1e-4).
        frac_bits: fixed-point fractional bits of every secure sum (default: 32; float64 comparisons
            want 40 or more).
        secagg_threshold: fraction of a sum's users secure aggregation needs (default: 0.6).
        secagg_semi_honest: accept a threshold <= 0.5 (default: off).
        secagg_min_clients: the fewest users a secure sum may have (default: 3).
        crypto: the client's own crypto mode; in ``real`` it refuses unprotected secure-sum stages.
    """

    n_layers: int = 3
    lr: float = 1e-3
    reg: float = 1e-4

    def __post_init__(self) -> None:
        if self.n_layers < 0:
            raise ValueError(f"n_layers must be >= 0, got {self.n_layers}")
        super().__post_init__()

    @property
    def alpha(self) -> float:
        r"""LightGCN's layer weight :math:`\alpha_l = 1/(L+1)`."""
        return 1.0 / (self.n_layers + 1)


def pgcn_settings(config: Any) -> PGCNSettings:
    """The settings of a run configuration.

    Raises:
        ValueError: ``model`` is not ``lightgcn+``, or virtual items (``alpha``) are asked for.
    """
    model = getattr(config, "model", "lightgcn+")
    if model != "lightgcn+":
        raise ValueError(f"pgcn runs the lightgcn+ backbone; use --model lightgcn+ (got {model!r})")
    if getattr(config, "alpha", 0):
        raise ValueError("pgcn has no virtual items: unset alpha")
    return settings_from(PGCNSettings, config)
