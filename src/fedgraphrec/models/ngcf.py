r"""NGCF (Wang et al., "Neural Graph Collaborative Filtering", SIGIR 2019), the centralized baseline.

Each layer transforms and mixes, with the same normalised bipartite graph every model uses
(:class:`~fedgraphrec.models.propagation.NormalizedBipartite`, multiplied by
:func:`~fedgraphrec.models.propagation.spmm`):

.. math::
    S_U = \hat R V^{(l)}, \quad S_V = \hat R^\top U^{(l)}, \\
    U^{(l+1)} = \operatorname{LeakyReLU}\big((S_U + U^{(l)}) W_1^{(l)} + b_1^{(l)}
        + (S_U \odot U^{(l)}) W_2^{(l)} + b_2^{(l)}\big)

(and symmetrically for items), i.e. :math:`\mathcal L + I` for the first term and the
element-wise message :math:`e_i \odot e_u` for the second, as in the authors' code; each layer's
output passes message dropout and is L2-normalised per row. The representation is the
concatenation :math:`[U^{(0)} \Vert \hat U^{(1)} \Vert \dots \Vert \hat U^{(L)}]` and the score the dot
product, trained with BPR and the layer-0 L2 term (FedGRec Table 1's NGCF-1/2/3).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from fedgraphrec.models.base import BatchLoss, GraphRecommender, triple_loss
from fedgraphrec.models.lightgcn import init_table, xavier_uniform
from fedgraphrec.models.propagation import NormalizedBipartite, spmm

__all__ = ["NGCF"]


class NGCF(GraphRecommender):
    """NGCF with ``n_layers`` embedding-propagation layers.

    Args:
        graph: normalised training graph.
        dim: embedding size (every layer keeps it, as NGCF's default configuration).
        n_layers: propagation layers.
        init_std: std of the embedding tables' N(0, σ²) initialisation (weights use Xavier).
        generator: source of every initial value and of the dropout masks.
        dtype: float32 or float64.
        message_dropout: dropout on each layer's output during training (NGCF default 0.1).
    """

    def __init__(
        self,
        graph: NormalizedBipartite,
        dim: int = 64,
        n_layers: int = 3,
        init_std: float = 0.1,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float32,
        message_dropout: float = 0.1,
    ) -> None:
        super().__init__()
        gen = self._attach(graph, dim, n_layers, generator, dtype)
        if not 0.0 <= message_dropout < 1.0:
            raise ValueError(f"message_dropout must be in [0, 1), got {message_dropout}")
        self.user_emb = init_table(graph.n_users, dim, init_std, gen, dtype)
        self.item_emb = init_table(graph.n_items, dim, init_std, gen, dtype)
        self.W1 = nn.ParameterList(xavier_uniform((dim, dim), gen, dtype) for _ in range(n_layers))
        self.W2 = nn.ParameterList(xavier_uniform((dim, dim), gen, dtype) for _ in range(n_layers))
        self.b1 = nn.ParameterList(nn.Parameter(torch.zeros(dim, dtype=dtype)) for _ in range(n_layers))
        self.b2 = nn.ParameterList(nn.Parameter(torch.zeros(dim, dtype=dtype)) for _ in range(n_layers))
        self.message_dropout = message_dropout
        self._dropout_gen = gen

    def layer0(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The free tables :math:`U^{(0)}, V^{(0)}`."""
        return self.user_emb, self.item_emb

    def _drop(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.message_dropout == 0.0:
            return x
        keep = 1.0 - self.message_dropout
        mask = torch.rand(x.shape, generator=self._dropout_gen, dtype=torch.float64).lt(keep).to(x.dtype)
        return x * mask / keep

    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Concatenated layer outputs, shapes ``(n_users, (L+1)·d)`` and ``(n_items, (L+1)·d)``."""
        U, V = self.layer0()
        users, items = [U], [V]
        g = self.graph
        for layer in range(self.n_layers):
            side_u, side_v = spmm(g.R, g.RT, V), spmm(g.RT, g.R, U)
            W1, W2, b1, b2 = self.W1[layer], self.W2[layer], self.b1[layer], self.b2[layer]
            U_next = F.leaky_relu((side_u + U) @ W1 + b1 + (side_u * U) @ W2 + b2, negative_slope=0.2)
            V_next = F.leaky_relu((side_v + V) @ W1 + b1 + (side_v * V) @ W2 + b2, negative_slope=0.2)
            U, V = self._drop(U_next), self._drop(V_next)
            users.append(F.normalize(U, dim=1))
            items.append(F.normalize(V, dim=1))
        return torch.cat(users, dim=1), torch.cat(items, dim=1)

    def batch_loss(
        self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, reg_weight: float
    ) -> BatchLoss:
        """BPR on the concatenated representations plus ``reg_weight`` × the layer-0 L2 term."""
        return triple_loss(self.embeddings(), (self.user_emb, self.item_emb), users, pos, neg, reg_weight)

    @torch.no_grad()
    def frozen_embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Evaluation embeddings: no dropout, no autograd."""
        was_training = self.training
        self.eval()
        try:
            U, V = self.embeddings()
        finally:
            self.train(was_training)
        return U.detach(), V.detach()
