r"""Common shape of the centralized embedding recommenders (the oracles).

A model supplies its learnable layer-0 tables :math:`(U^{(0)}, V^{(0)})` through :meth:`layer0`; the
base class propagates them with the shared routine, scores by dot product and trains with
:func:`~fedgraphrec.models.losses.bpr_loss` plus :math:`\lambda` times the layer-0 L2 term on the
batch's rows (LightGCN's loss, ``specs/lpgcn.md`` §2.1).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from fedgraphrec.models.losses import bpr_loss, l2_reg
from fedgraphrec.models.propagation import NormalizedBipartite, propagate
from fedgraphrec.seeding import seeded_generator

__all__ = ["BatchLoss", "GraphRecommender", "triple_loss"]


@dataclass(frozen=True)
class BatchLoss:
    """One minibatch loss and its parts (kept for logging and step-by-step verification)."""

    bpr: torch.Tensor
    reg: torch.Tensor
    total: torch.Tensor


def triple_loss(
    final: tuple[torch.Tensor, torch.Tensor],
    layer0: tuple[torch.Tensor, torch.Tensor],
    users: torch.Tensor,
    pos: torch.Tensor,
    neg: torch.Tensor,
    reg_weight: float,
) -> BatchLoss:
    """BPR of the triples on the ``final`` tables plus ``reg_weight`` × L2 of their ``layer0`` rows.

    ``final`` and ``layer0`` are (user, item) tables; this is LightGCN's loss, which every embedding
    recommender here trains with.
    """
    (U, V), (U0, V0) = final, layer0
    u = U[users]
    bpr = bpr_loss((u * V[pos]).sum(-1), (u * V[neg]).sum(-1))
    reg = l2_reg(U0[users], V0[pos], V0[neg], batch_size=int(users.shape[0]))
    return BatchLoss(bpr=bpr, reg=reg, total=bpr + reg_weight * reg)


class GraphRecommender(nn.Module):
    """Base class of LightGCN-like models; subclasses implement :meth:`layer0`."""

    graph: NormalizedBipartite
    n_layers: int

    @property
    def n_users(self) -> int:
        """Number of users."""
        return self.graph.n_users

    @property
    def n_items(self) -> int:
        """Number of items."""
        return self.graph.n_items

    def _attach(
        self,
        graph: NormalizedBipartite,
        dim: int,
        n_layers: int,
        generator: torch.Generator | None,
        dtype: torch.dtype,
    ) -> torch.Generator:
        """Validate sizes, keep the graph in ``dtype``; returns the generator for the tables."""
        if n_layers < 0:
            raise ValueError(f"n_layers must be >= 0, got {n_layers}")
        if dim <= 0:
            raise ValueError(f"dim must be positive, got {dim}")
        self.graph = graph.to(dtype)
        self.n_layers = n_layers
        return generator if generator is not None else seeded_generator(0)

    def layer0(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer-0 user and item embeddings (differentiable in the parameters)."""
        raise NotImplementedError

    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Final (layer-combined) embeddings, shapes ``(n_users, d)`` and ``(n_items, d)``."""
        return propagate(self.graph, *self.layer0(), self.n_layers)

    def batch_loss(
        self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, reg_weight: float
    ) -> BatchLoss:
        """BPR loss of the triples ``(users[b], pos[b], neg[b])`` plus ``reg_weight`` × layer-0 L2."""
        U0, V0 = self.layer0()
        final = propagate(self.graph, U0, V0, self.n_layers)
        return triple_loss(final, (U0, V0), users, pos, neg, reg_weight)

    @torch.no_grad()
    def frozen_embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`embeddings` without autograd (for evaluation)."""
        U, V = self.embeddings()
        return U.detach(), V.detach()
