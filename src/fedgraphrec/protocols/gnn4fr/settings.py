"""GNN4FR's settings: one frozen dataclass, every default once (spec ``gnn4fr.md``)."""

from __future__ import annotations

from dataclasses import dataclass

from fedgraphrec.protocols.settings import MinibatchSettings, ModelSettings

__all__ = ["GNN4FRSettings"]


@dataclass(frozen=True)
class GNN4FRSettings(ModelSettings, MinibatchSettings):
    r"""Hyper-parameters both roles agree on (public; from the run configuration).

    Attributes:
        model: the backbone; GNN4FR runs LightGCN only.
        n_layers: LightGCN layers :math:`L`.
        lr: Adam learning rate.
        reg: :math:`\lambda` of the layer-0 L2 term.
        seed: the run seed: public streams only (key-client choice, ring order, predict holders);
            no secret is derived from it.
        paper_literal: run Algorithm 5 and the secret-shared aggregation as the paper prints them
            (per-pair neighbour gradients, dense shares under :math:`S` through the server) instead
            of the transposed backward (same numbers, about 3x the bytes; :mod:`.client`'s docstring
            compares them).
        fixed_point_bits: fraction bits of the paper-literal shares over :math:`\mathbb Z_{2^{64}}`
            (52 keeps float64 accuracy for gradients below :math:`2^{10}`).
        crypto: the run's crypto mode (``real`` or ``accounted``), from the node's own
            configuration: a node refuses a server that tells it another mode (in ``accounted``
            mode item tokens are the ids themselves).
    """

    n_layers: int = 3
    paper_literal: bool = False
    fixed_point_bits: int = 52

    def __post_init__(self) -> None:
        if self.model != "lightgcn":
            raise ValueError(f"gnn4fr runs the lightgcn backbone; got model={self.model!r}")
        super().__post_init__()
        if self.n_layers < 0:
            raise ValueError(f"n_layers must be >= 0, got {self.n_layers}")
