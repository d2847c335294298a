"""P-GCN's settings: every hyper-parameter of a run, every default once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from fedgraphrec.protocols.settings import MinibatchSettings, ModelSettings, SecureSumSettings

__all__ = ["PGCNSettings"]


@dataclass(frozen=True)
class PGCNSettings(ModelSettings, MinibatchSettings, SecureSumSettings):
    """What every party knows before the run.

    Attributes:
        model: the backbone: LightGCN+ (``lightgcn+``) only.
        n_layers: :math:`L`, LightGCN+'s propagation layers.
        lr: the server's Adam learning rate on ``V`` and ``W``.
        reg: ``λ`` of the layer-0 L2 term.
        frac_bits: fixed-point fractional bits of every secure sum (float64 comparisons want 40 or
            more).
    """

    MODELS: ClassVar[tuple[str, ...]] = ("lightgcn+",)

    model: str = "lightgcn+"
    n_layers: int = 3

    def __post_init__(self) -> None:
        if self.model != "lightgcn+":
            raise ValueError(
                f"pgcn runs the lightgcn+ backbone; model must be 'lightgcn+' (got {self.model!r})"
            )
        super().__post_init__()
        if self.n_layers < 0:
            raise ValueError(f"n_layers must be >= 0, got {self.n_layers}")

    @property
    def alpha(self) -> float:
        r"""LightGCN's layer weight :math:`\alpha_l = 1/(L+1)`."""
        return 1.0 / (self.n_layers + 1)
