r"""LightGCN and LightGCN+ over the shared propagation routine.

LightGCN (He et al., SIGIR 2020, https://arxiv.org/abs/2002.02126): free layer-0 tables
:math:`U^{(0)}, V^{(0)}`, propagated by :func:`~fedgraphrec.models.propagation.propagate`.

LightGCN+ (``specs/lpgcn.md`` §2.2, FISM-style users from P-GCN): no free user table; a second item
table :math:`W` builds the users,

.. math::
    U^{(0)}_u = \frac{1}{\sqrt{|\mathcal I_u|}} \sum_{i\in\mathcal I_u} W_i ,

and everything else is LightGCN. The regulariser is Eq. 5 literally (spec gap [G] §2.2): it acts on
:math:`U^{(0)}_u`, :math:`V^{(0)}_i` and :math:`V^{(0)}_j`, so its gradient reaches :math:`W` through
the chain rule.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from fedgraphrec.models.base import GraphRecommender
from fedgraphrec.models.propagation import NormalizedBipartite, spmm, torch_csr

__all__ = ["LightGCN", "LightGCNPlus", "init_table", "xavier_uniform"]


def init_table(
    rows: int, dim: int, std: float, generator: torch.Generator, dtype: torch.dtype
) -> nn.Parameter:
    """A ``(rows, dim)`` parameter drawn from N(0, std²) with an explicit generator (float64 draw, then cast).

    Drawing in float64 and casting makes float32 and float64 runs start from the same values up to
    rounding, which the equivalence tests rely on.
    """
    t = torch.randn(rows, dim, generator=generator, dtype=torch.float64) * std
    return nn.Parameter(t.to(dtype))


def xavier_uniform(shape: tuple[int, int], generator: torch.Generator, dtype: torch.dtype) -> nn.Parameter:
    """A weight matrix drawn from Xavier-uniform U(-b, b), b = sqrt(6 / (fan_in + fan_out)).

    Drawn in float64 from ``generator`` and cast, like :func:`init_table`, so the dtype does not
    change the values beyond rounding.
    """
    bound = (6.0 / sum(shape)) ** 0.5
    t = (torch.rand(shape, generator=generator, dtype=torch.float64) * 2 - 1) * bound
    return nn.Parameter(t.to(dtype))


class LightGCN(GraphRecommender):
    """LightGCN with layer-mean combination and dot-product scores.

    Args:
        graph: normalised training graph (:class:`NormalizedBipartite`).
        dim: embedding size :math:`d` (default: 64).
        n_layers: propagation layers :math:`L` (default: 3); ``0`` is BPR-MF.
        init_std: standard deviation of the N(0, σ²) initialisation (default: 0.1, as LightGCN's code;
            the LP-GCN equivalence script uses 1.0, PyTorch's ``nn.Embedding`` default).
        generator: source of the initial tables (default: a fresh generator seeded with 0).
        dtype: float32 or float64 (default: float32).

    Shapes:
        - :meth:`embeddings` → ``(n_users, d)``, ``(n_items, d)``.
    """

    def __init__(
        self,
        graph: NormalizedBipartite,
        dim: int = 64,
        n_layers: int = 3,
        init_std: float = 0.1,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        gen = self._attach(graph, dim, n_layers, generator, dtype)
        self.user_emb = init_table(graph.n_users, dim, init_std, gen, dtype)
        self.item_emb = init_table(graph.n_items, dim, init_std, gen, dtype)

    def layer0(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The free tables :math:`U^{(0)}, V^{(0)}`."""
        return self.user_emb, self.item_emb


def fism_operator(train: sp.csr_matrix) -> sp.csr_matrix:
    r"""The user-building operator :math:`F_{ui} = 1/\sqrt{|\mathcal I_u|}` on training pairs (float64)."""
    train = sp.csr_matrix(train)
    du = np.diff(train.indptr).astype(np.float64)
    rows = np.repeat(np.arange(train.shape[0]), np.diff(train.indptr))
    vals = 1.0 / np.sqrt(du[rows])
    return sp.csr_matrix((vals, train.indices, train.indptr), shape=train.shape)


class LightGCNPlus(GraphRecommender):
    r"""LightGCN+ : users built from a second item table ``W`` (Eq. 6), then LightGCN.

    Args:
        graph: normalised training graph.
        train: the binary training matrix (defines :math:`\mathcal I_u` for Eq. 6).
        dim, n_layers, init_std, generator, dtype: as :class:`LightGCN`; ``W`` is drawn after ``V``.
    """

    def __init__(
        self,
        graph: NormalizedBipartite,
        train: sp.csr_matrix,
        dim: int = 64,
        n_layers: int = 3,
        init_std: float = 0.1,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        if train.shape != (graph.n_users, graph.n_items):
            raise ValueError(f"train has shape {train.shape}, the graph {(graph.n_users, graph.n_items)}")
        gen = self._attach(graph, dim, n_layers, generator, dtype)
        F_op = fism_operator(train)
        self._F = torch_csr(F_op, dtype)
        self._FT = torch_csr(F_op.T.tocsr(), dtype)
        self.item_emb = init_table(graph.n_items, dim, init_std, gen, dtype)
        self.item_w = init_table(graph.n_items, dim, init_std, gen, dtype)

    def user0(self) -> torch.Tensor:
        """:math:`U^{(0)} = F W` for all users (differentiable in ``W``)."""
        return spmm(self._F, self._FT, self.item_w)

    def layer0(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Eq. 6 users and the free item table; Eq. 5's regulariser then acts on :math:`U^{(0)}_u`."""
        return self.user0(), self.item_emb
