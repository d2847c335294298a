"""LP-GCN's settings: every hyper-parameter of a run, every default once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from fedgraphrec.protocols.settings import HIDING, MinibatchSettings, ModelSettings

__all__ = ["LPGCNSettings"]


@dataclass(frozen=True)
class LPGCNSettings(ModelSettings, MinibatchSettings):
    r"""What every party knows about an LP-GCN run (spec ``lpgcn.md`` §9.4).

    Attributes:
        model: backbone, ``lightgcn`` (Algorithms 1-6) or ``lightgcn+`` (Algorithms 7-9).
        n_layers: LightGCN layers :math:`L`.
        alpha: virtual items per client :math:`\alpha`.
        lr: Adam learning rate of every owner.
        reg: :math:`\lambda` of the layer-0 L2 term.
        paper_literal: LightGCN+: random :math:`\nabla w` for virtual items, summed by the server
            (Alg. 7 line 11; inexact when :math:`\alpha > 0`) instead of the lossless aggregation.
        secure_virtual_items: override of ``reproducible`` for the virtual items, the token upload
            order and LightGCN+'s literal virtual W-gradients (unset: follow it; the programs see it
            resolved, :func:`~fedgraphrec.seeding.secure_draws`). ``false`` under ``crypto = "real"``
            is a seeded override, reported in ``summary.json``.

    Raises:
        ValueError: naming the setting, when one is out of range.
    """

    MODELS: ClassVar[tuple[str, ...]] = ("lightgcn", "lightgcn+")

    n_layers: int = 3
    alpha: int = 0
    paper_literal: bool = False
    secure_virtual_items: bool | None = field(default=None, metadata=HIDING)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.model not in self.MODELS:
            raise ValueError(f"lpgcn runs the lightgcn or lightgcn+ backbone; got model={self.model!r}")
        if self.n_layers < 0:
            raise ValueError(f"n_layers must be >= 0, got {self.n_layers}")
        if self.alpha < 0:
            raise ValueError(f"alpha (virtual items per client) must be >= 0, got {self.alpha}")
        if self.paper_literal and self.model != "lightgcn+":
            raise ValueError("paper_literal applies to the lightgcn+ backbone (Alg. 7) only")

    @property
    def plus(self) -> bool:
        """Whether the backbone is LightGCN+ (users built from the server's W, Eq. 6)."""
        return self.model == "lightgcn+"
