"""GNN4FR's public settings: one frozen dataclass, every default once (spec ``gnn4fr.md``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fedgraphrec.protocols.base import settings_from

__all__ = ["GNN4FRSettings", "gnn4fr_settings"]


@dataclass(frozen=True)
class GNN4FRSettings:
    r"""Hyper-parameters both roles agree on (public; from the run configuration).

    Attributes:
        n_layers: LightGCN layers :math:`L` (default: 3).
        lr: Adam learning rate (default: 0.001).
        reg: :math:`\lambda` of the layer-0 L2 term (default: 1e-4).
        seed: the run seed: public streams only (key-client choice, ring order, predict holders);
            no secret is derived from it (default: 2020).
        paper_literal: run Algorithm 5 and the secret-shared aggregation as the paper prints them
            (per-pair neighbour gradients, dense shares under :math:`S` through the server) instead
            of the transposed backward (default: ``False``; :mod:`.client`'s docstring compares them).
        fixed_point_bits: fraction bits of the paper-literal shares over :math:`\mathbb Z_{2^{64}}`
            (52 keeps float64 accuracy for gradients below :math:`2^{10}`; default: 52).
        model: the backbone; GNN4FR runs LightGCN only (default: ``"lightgcn"``).
        alpha: virtual items; GNN4FR has none (default: 0).
        crypto: the run's crypto mode (``real`` or ``accounted``), from the node's own
            configuration: a node refuses a server that tells it another mode (in ``accounted``
            mode item tokens are the ids themselves; default: ``"accounted"``).
    """

    n_layers: int = 3
    lr: float = 0.001
    reg: float = 1e-4
    seed: int = 2020
    paper_literal: bool = False
    fixed_point_bits: int = 52
    model: str = "lightgcn"
    alpha: int = 0
    crypto: str = "accounted"

    def __post_init__(self) -> None:
        if self.model != "lightgcn":
            raise ValueError(f"gnn4fr runs the lightgcn backbone; got model={self.model!r}")
        if self.alpha:
            raise ValueError("gnn4fr has no virtual items; alpha applies to lpgcn only (set alpha=0)")
        if self.crypto not in ("real", "accounted"):
            raise ValueError(f"crypto must be 'real' or 'accounted'; got {self.crypto!r}")
        if self.n_layers < 0:
            raise ValueError(f"n_layers must be >= 0, got {self.n_layers}")


def gnn4fr_settings(config: Any) -> GNN4FRSettings:
    """The settings of a run configuration (its same-named attributes)."""
    return settings_from(GNN4FRSettings, config)
