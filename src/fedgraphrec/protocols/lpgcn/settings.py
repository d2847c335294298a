"""LP-GCN's public settings: every default once, built from a run configuration."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fedgraphrec.protocols.base import settings_from
from fedgraphrec.seeding import secure_draws

__all__ = ["LPGCNSettings", "lpgcn_settings"]

_BACKBONES = ("lightgcn", "lightgcn+")


@dataclass(frozen=True)
class LPGCNSettings:
    r"""What every party knows about an LP-GCN run (spec ``lpgcn.md`` §9.4).

    Attributes:
        model: backbone, ``lightgcn`` (Algorithms 1-6) or ``lightgcn+`` (Algorithms 7-9).
        n_layers: :math:`L`.
        alpha: virtual items per client :math:`\alpha`.
        seed: run seed (public streams: key-client, assignment, seeded virtual items).
        lr: Adam learning rate of every owner.
        reg: :math:`\lambda` of the layer-0 L2 term.
        crypto: ``real`` (keys, tokens and answers computed for real) or ``accounted``.
        paper_literal: LightGCN+: random :math:`\nabla w` for virtual items, summed by the server
            (Alg. 7 line 11; inexact when :math:`\alpha > 0`) instead of the lossless aggregation.
        secure_virtual_items: draw virtual items, upload orders and LightGCN+'s literal virtual
            W-gradients from the OS CSPRNG (from a run configuration: the default under ``crypto =
            "real"`` unless ``reproducible``; :func:`~fedgraphrec.seeding.secure_draws`).

    Raises:
        ValueError: naming the setting, when one is out of range.
    """

    model: str = "lightgcn"
    n_layers: int = 3
    alpha: int = 0
    seed: int = 0
    lr: float = 0.001
    reg: float = 1e-4
    crypto: str = "accounted"
    paper_literal: bool = False
    secure_virtual_items: bool = False

    def __post_init__(self) -> None:
        if self.model not in _BACKBONES:
            raise ValueError(f"lpgcn runs the lightgcn or lightgcn+ backbone; got model={self.model!r}")
        if self.n_layers < 0:
            raise ValueError(f"n_layers must be >= 0, got {self.n_layers}")
        if self.alpha < 0:
            raise ValueError(f"alpha (virtual items per client) must be >= 0, got {self.alpha}")
        if self.lr <= 0 or self.reg < 0:
            raise ValueError(f"lr must be > 0 and reg >= 0, got lr={self.lr}, reg={self.reg}")
        if self.crypto not in ("real", "accounted"):
            raise ValueError(f"crypto must be 'real' or 'accounted', got {self.crypto!r}")
        if self.paper_literal and self.model != "lightgcn+":
            raise ValueError("paper_literal applies to the lightgcn+ backbone (Alg. 7) only")

    @property
    def plus(self) -> bool:
        """Whether the backbone is LightGCN+ (users built from the server's W, Eq. 6)."""
        return self.model == "lightgcn+"

    @property
    def real(self) -> bool:
        """Whether keys, tokens and verification answers are computed for real."""
        return self.crypto == "real"


def lpgcn_settings(config: Any) -> LPGCNSettings:
    """:class:`LPGCNSettings` from a run configuration's same-named attributes."""
    return settings_from(
        LPGCNSettings, config, secure_virtual_items=secure_draws(config, "secure_virtual_items")
    )
