"""Rating-prediction building blocks shared by P4GCN and its baselines (spec §4.1–4.2, §7.5).

* :func:`decode` — the common decoder ``σ(⟨u, v⟩)`` with ``σ(x) = (hi − lo)·sigmoid(x) + lo``
  (the paper's ``4·sigmoid + 1`` for ratings in [1, 5]; A5 option for other ranges).
* :class:`Backbone` — user/item embedding tables plus a local aggregation over the user–item
  rating graph: ``pmf`` (none), ``lightgcn`` (the shared :func:`~.propagation.propagate`), ``gcn``
  (weighted layers with ReLU over the same normalised graph).
* :class:`Fusion` — the position-wise softmax fusion of local and social user embeddings (A4).
* :class:`NeuMF` — GMF + MLP with a scalar output through the same ``σ``.
* :class:`FeSoGItem` — FeSoG's user model without its social module ("FeSog-" of Table 1): a user is
  its own embedding plus an attention-weighted sum of its rated items' embeddings.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from fedgraphrec.models.propagation import NormalizedBipartite, propagate, spmm

__all__ = ["BACKBONES", "Backbone", "FeSoGItem", "Fusion", "NeuMF", "decode"]

BACKBONES = ("pmf", "lightgcn", "gcn")


def _seeded_linear_init(module: nn.Module, generator: torch.Generator) -> None:
    """Re-draw every ``nn.Linear`` of ``module`` from ``generator`` (PyTorch's default bounds)."""
    with torch.no_grad():
        for layer in module.modules():
            if isinstance(layer, nn.Linear):
                bound = 1.0 / layer.in_features**0.5
                layer.weight.uniform_(-bound, bound, generator=generator)
                if layer.bias is not None:
                    layer.bias.uniform_(-bound, bound, generator=generator)


def decode(u: torch.Tensor, v: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    """``(hi − lo)·sigmoid(⟨u, v⟩) + lo`` row by row."""
    return (hi - lo) * torch.sigmoid((u * v).sum(-1)) + lo


class Backbone(nn.Module):
    """Embedding tables ``X⁽⁰⁾`` and the local aggregation ``f_backbone`` of step 1.

    Args:
        kind: ``pmf``, ``lightgcn`` or ``gcn``.
        graph: normalised binary training graph ``R̂`` (float64 or float32; embeddings follow).
        dim: embedding size ``d``.
        n_layers: propagation layers (ignored for ``pmf``).
        generator: seeded generator for the initialisation (std 0.1 normal).
    """

    def __init__(
        self, kind: str, graph: NormalizedBipartite, dim: int, n_layers: int, generator: torch.Generator
    ) -> None:
        super().__init__()
        if kind not in BACKBONES:
            raise ValueError(f"backbone kind must be one of {BACKBONES}, got {kind!r}")
        self.kind, self.graph, self.n_layers = kind, graph, n_layers
        dt = graph.dtype
        self.user = nn.Parameter(0.1 * torch.randn(graph.n_users, dim, generator=generator, dtype=dt))
        self.item = nn.Parameter(0.1 * torch.randn(graph.n_items, dim, generator=generator, dtype=dt))
        self.weights = nn.ParameterList(
            [
                nn.Parameter(torch.randn(dim, dim, generator=generator, dtype=dt) / dim**0.5)
                for _ in range(n_layers if kind == "gcn" else 0)
            ]
        )

    def forward(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(X⁽¹⁾_user, X⁽¹⁾_item)`` for every user and item."""
        if self.kind == "pmf" or self.n_layers == 0:
            return self.user, self.item
        if self.kind == "lightgcn":
            return propagate(self.graph, self.user, self.item, self.n_layers)
        g = self.graph
        u: torch.Tensor = self.user
        v: torch.Tensor = self.item
        us: list[torch.Tensor] = [u]
        vs: list[torch.Tensor] = [v]
        for w in self.weights:
            u, v = torch.relu(spmm(g.R, g.RT, v) @ w), torch.relu(spmm(g.RT, g.R, u) @ w)
            us.append(u)
            vs.append(v)
        return torch.stack(us).mean(0), torch.stack(vs).mean(0)


class Fusion(nn.Module):
    """``x³ = Σ_halves (h ⊙ w)`` with ``h = [x¹ ‖ βx²]``, ``w = pairwise-softmax(W₂ ReLU(W₁ h))``.

    The softmax runs over each pair ``(k, k + d)`` so every position is a convex combination of the
    local and the social activation (A4). ``enabled=False`` is the "w/o fusion" ablation: the plain
    average ``(x¹ + βx²)/2``.
    """

    def __init__(
        self,
        dim: int,
        beta: float,
        generator: torch.Generator,
        enabled: bool = True,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        self.beta, self.enabled, self.dim = beta, enabled, dim
        self.fc1 = nn.Linear(2 * dim, 2 * dim, dtype=dtype)
        self.fc2 = nn.Linear(2 * dim, 2 * dim, dtype=dtype)
        _seeded_linear_init(self, generator)

    def forward(self, local: torch.Tensor, social: torch.Tensor) -> torch.Tensor:
        """Fused ``d``-dimensional user embeddings."""
        s = self.beta * social
        if not self.enabled:
            return 0.5 * (local + s)
        h = torch.cat([local, s], dim=-1)
        logits = self.fc2(torch.relu(self.fc1(h))).view(-1, 2, self.dim)
        w = torch.softmax(logits, dim=1)
        return (h.view(-1, 2, self.dim) * w).sum(1)


class NeuMF(nn.Module):
    """GMF + MLP (He et al. 2017) for ratings: a scalar logit through the shared ``σ``."""

    def __init__(self, n_users: int, n_items: int, dim: int, generator: torch.Generator) -> None:
        super().__init__()
        self.gu = nn.Parameter(0.1 * torch.randn(n_users, dim, generator=generator))
        self.gi = nn.Parameter(0.1 * torch.randn(n_items, dim, generator=generator))
        self.mu = nn.Parameter(0.1 * torch.randn(n_users, dim, generator=generator))
        self.mi = nn.Parameter(0.1 * torch.randn(n_items, dim, generator=generator))
        self.mlp = nn.Sequential(nn.Linear(2 * dim, dim), nn.ReLU(), nn.Linear(dim, dim // 2), nn.ReLU())
        self.out = nn.Linear(dim + dim // 2, 1)
        _seeded_linear_init(self, generator)

    def forward(self, users: torch.Tensor, items: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
        """Predicted ratings of the (user, item) pairs."""
        g = self.gu[users] * self.gi[items]
        m = self.mlp(torch.cat([self.mu[users], self.mi[items]], dim=-1))
        return (hi - lo) * torch.sigmoid(self.out(torch.cat([g, m], dim=-1)).squeeze(-1)) + lo


class FeSoGItem(nn.Module):
    """FeSoG's item aggregation, the model behind P4GCN's "FeSog-" baseline (Liu et al. 2022).

    ``h_u = e_u + Σ_{i ∈ I_u} α_ui e_i`` with ``α_u· = softmax_i LeakyReLU(aᵀ[e_u ‖ e_i])`` over the
    user's training items, and ``h_i = e_i``; ratings go through the shared :func:`decode`. FeSog-
    is FeSoG with the social-aggregation module removed (spec ``p4gcn.md`` §7.5); per A12 the
    table's "Local" group is trained as local models, so FeSoG's federated training (FedAvg of item
    gradients, pseudo items, LDP) is not run here and the accuracy is that of its model.

    Args:
        n_users, n_items: table sizes.
        users, items: the training edges (one per rating).
        dim: embedding size.
        generator: seeded generator for the initialisation (std 0.1 normal, like :class:`Backbone`).
    """

    def __init__(
        self,
        n_users: int,
        n_items: int,
        users: np.ndarray,
        items: np.ndarray,
        dim: int,
        generator: torch.Generator,
    ) -> None:
        super().__init__()
        self.n_users = n_users
        self.user = nn.Parameter(0.1 * torch.randn(n_users, dim, generator=generator))
        self.item = nn.Parameter(0.1 * torch.randn(n_items, dim, generator=generator))
        self.att = nn.Parameter(0.1 * torch.randn(2 * dim, generator=generator))
        self.eu = torch.as_tensor(np.asarray(users), dtype=torch.long)  # fixed training edges
        self.ei = torch.as_tensor(np.asarray(items), dtype=torch.long)

    def forward(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(h_user, h_item)`` for every user and item."""
        u_idx, i_idx = self.eu, self.ei
        d = self.user.shape[1]
        logits = nn.functional.leaky_relu(
            self.user[u_idx] @ self.att[:d] + self.item[i_idx] @ self.att[d:], 0.2
        )
        top = torch.full((self.n_users,), -torch.inf).scatter_reduce(0, u_idx, logits, "amax")
        w = torch.exp(logits - top[u_idx])  # softmax per user, stabilised by the user's own max
        total = torch.zeros(self.n_users).index_add(0, u_idx, w)
        alpha = w / total[u_idx]
        agg = torch.zeros_like(self.user).index_add(0, u_idx, alpha[:, None] * self.item[i_idx])
        return self.user + agg, self.item
