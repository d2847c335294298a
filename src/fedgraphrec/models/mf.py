"""BPR matrix factorisation (Rendle et al., UAI 2009): the L = 0 case of the shared routine."""

from __future__ import annotations

import torch

from fedgraphrec.models.lightgcn import LightGCN
from fedgraphrec.models.propagation import NormalizedBipartite

__all__ = ["BPRMF"]


class BPRMF(LightGCN):
    """Matrix factorisation trained with BPR: LightGCN with zero propagation layers.

    Reusing :class:`LightGCN` keeps one code path (and one initialisation order) for both, so a
    federated MF baseline can be checked against the same oracle machinery.
    """

    def __init__(
        self,
        graph: NormalizedBipartite,
        dim: int = 64,
        init_std: float = 0.1,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__(graph, dim=dim, n_layers=0, init_std=init_std, generator=generator, dtype=dtype)
