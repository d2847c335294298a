r"""NCF / NeuMF (He et al., "Neural Collaborative Filtering", WWW 2017) trained with BPR.

Two towers over separate embedding tables, fused by a linear output layer:

.. math::
    \hat y_{ui} = h^\top \big[\, p^G_u \odot q^G_i \;\Vert\; \mathrm{MLP}([p^M_u \Vert q^M_i]) \,\big],
    \qquad \mathrm{MLP}: 2d \xrightarrow{\text{ReLU}} 2d \xrightarrow{\text{ReLU}} d \ \text{(default)},

which is the centralized NCF of LP-GCN's Table 4 ("BPR loss, MLP with two hidden layers
:math:`2d\to d`", following NGCF). The score is not a dot product of two embeddings, so the model
exposes :meth:`score_users` for full-ranking evaluation; its first MLP layer is split into a user and
an item half so that scoring a chunk of users against every item never materialises the
concatenated inputs.
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
from torch import nn

from fedgraphrec.models.base import BatchLoss, GraphRecommender
from fedgraphrec.models.lightgcn import init_table, xavier_uniform
from fedgraphrec.models.losses import bpr_loss, l2_reg
from fedgraphrec.models.propagation import NormalizedBipartite

__all__ = ["NCF"]


class NCF(GraphRecommender):
    """NeuMF with a BPR loss; the graph is only used for its sizes.

    Args:
        graph: training graph (sizes).
        dim: embedding size ``d`` of each tower.
        init_std: std of the embedding tables' initialisation (layers use Xavier-uniform).
        generator: source of every initial value.
        dtype: float32 or float64.
    """

    def __init__(
        self,
        graph: NormalizedBipartite,
        dim: int = 64,
        init_std: float = 0.1,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float32,
        hidden: tuple[int, ...] | None = None,
    ) -> None:
        super().__init__()
        gen = self._attach(graph, dim, 0, generator, dtype)
        widths = hidden if hidden is not None else (2 * dim, dim)
        if not widths or min(widths) <= 0:
            raise ValueError(f"hidden must list positive layer widths, got {hidden}")
        self.user_gmf = init_table(graph.n_users, dim, init_std, gen, dtype)
        self.item_gmf = init_table(graph.n_items, dim, init_std, gen, dtype)
        self.user_mlp = init_table(graph.n_users, dim, init_std, gen, dtype)
        self.item_mlp = init_table(graph.n_items, dim, init_std, gen, dtype)
        self.W_user = xavier_uniform((dim, widths[0]), gen, dtype)  # first layer, user half of [p ‖ q]
        self.W_item = xavier_uniform((dim, widths[0]), gen, dtype)  # first layer, item half
        self.b0 = nn.Parameter(torch.zeros(widths[0], dtype=dtype))
        self.Ws = nn.ParameterList(xavier_uniform((a, b), gen, dtype) for a, b in itertools.pairwise(widths))
        self.bs = nn.ParameterList(nn.Parameter(torch.zeros(b, dtype=dtype)) for b in widths[1:])
        self.h = xavier_uniform((dim + widths[-1], 1), gen, dtype)

    def layer0(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The GMF tables (NCF has no propagation; kept for the common interface)."""
        return self.user_gmf, self.item_gmf

    def _mlp(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """MLP tower from the precomputed first-layer halves ``a`` (users) + ``b`` (items), broadcast."""
        x = F.relu(a + b + self.b0)
        for W, bias in zip(self.Ws, self.bs, strict=True):
            x = F.relu(x @ W + bias)
        return x

    def scores(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        """``ŷ_ui`` for aligned ``users[k], items[k]``."""
        d = self.user_gmf.shape[1]
        gmf = self.user_gmf[users] * self.item_gmf[items]
        mlp = self._mlp(self.user_mlp[users] @ self.W_user, self.item_mlp[items] @ self.W_item)
        return (gmf @ self.h[:d] + mlp @ self.h[d:]).squeeze(-1)

    def score_users(self, users: torch.Tensor) -> torch.Tensor:
        """Scores of ``users`` against every item, shape ``(len(users), n_items)``."""
        d = self.user_gmf.shape[1]
        gmf = (self.user_gmf[users] * self.h[:d, 0]) @ self.item_gmf.T
        a = (self.user_mlp[users] @ self.W_user)[:, None, :]
        b = (self.item_mlp @ self.W_item)[None, :, :]
        return gmf + (self._mlp(a, b) @ self.h[d:]).squeeze(-1)

    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """NCF does not score by a dot product; use :meth:`score_users`."""
        raise TypeError("NCF scores with an MLP; evaluate it with score_users")

    def batch_loss(
        self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, reg_weight: float
    ) -> BatchLoss:
        """BPR on the NeuMF scores plus ``reg_weight`` × L2 of the batch's embedding rows (both towers)."""
        bpr = bpr_loss(self.scores(users, pos), self.scores(users, neg))
        reg = l2_reg(
            self.user_gmf[users], self.item_gmf[pos], self.item_gmf[neg],
            self.user_mlp[users], self.item_mlp[pos], self.item_mlp[neg],
            batch_size=int(users.shape[0]),
        )  # fmt: skip
        return BatchLoss(bpr=bpr, reg=reg, total=bpr + reg_weight * reg)
