r"""Centralised recommenders that use side information: LightGCN with side edges, and HyperGNN.

DGREC's Table 2 (``specs/dgrec.md`` §8.5) gives every centralised baseline the inter-user graph and
the item relations. Both models here keep free layer-0 tables :math:`E^{(0)} = [U^{(0)}; V^{(0)}]`
over all :math:`N = n + m` nodes (users first, then items), combine layers by their mean and train
with BPR plus LightGCN's layer-0 L2 term (:mod:`fedgraphrec.models.losses`); they differ only in the
linear operator that propagates :math:`E`.

**LightGCN with side edges** (``lightgcn-side``). The paper adds user–user and item–item edges to
LightGCN's graph (Huang et al. 2021). The adjacency over all nodes is

.. math::
    A = \begin{pmatrix} S & R \\ R^\top & T \end{pmatrix}, \qquad
    \hat A = D^{-1/2} A D^{-1/2}, \quad D = \operatorname{diag}(A\mathbf 1),

with :math:`R` the training interactions, :math:`S` the (symmetric, binary, loop-free) social graph
and :math:`T` the item–item graph; :math:`E^{(l+1)} = \hat A E^{(l)}`. The propagation is the
project's one LightGCN routine, :func:`~fedgraphrec.models.propagation.propagate`, fed the square
:math:`\hat A` as both halves of its graph and :math:`E^{(0)}` as both tables: since :math:`\hat A`
is symmetric, either output is :math:`\sum_l \alpha_l \hat A^l E^{(0)}` (the routine computes the
other, identical half too, which doubles the cost and changes nothing else).

**HyperGNN** (Bai et al., "Hypergraph convolution and hypergraph attention", Pattern Recognition
2021), without attention. Nodes are again users and items, and the hyperedges are (spec §8.5)

* one per user :math:`u`: :math:`\{u\}\cup\mathcal I_u` (the user's item set; the user node is
  included, [A], otherwise no hyperedge would join a user to its items),
* one per tag (or item-relation hyperedge) :math:`t`: the items carrying :math:`t`,
* one per user :math:`u` with friends: :math:`\{u\}\cup\mathcal N(u)` (the friend set, [A] with
  :math:`u`).

With incidence :math:`H\in\{0,1\}^{N\times|\mathcal E|}`, hyperedge weights :math:`W` (identity by
default: "no attention"), :math:`D_v = \operatorname{diag}(HW\mathbf 1)` and
:math:`D_e = \operatorname{diag}(H^\top\mathbf 1)`, one convolution is

.. math::
    E^{(l+1)} = P E^{(l)}, \qquad P = D_v^{-1/2} H W D_e^{-1} H^\top D_v^{-1/2} = B B^\top,
    \qquad B = D_v^{-1/2} H W^{1/2} D_e^{-1/2}.

[A] Bai et al.'s layer also has a learnable :math:`\Theta^{(l)}` and a non-linearity; as LightGCN
does for graph convolution, both are dropped, so the two models differ *only* in the operator. The
product is computed as :math:`B(B^\top E)`, two sparse products, never forming :math:`P` (whose
tag and friend blocks are dense).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from fedgraphrec.models.base import BatchLoss, triple_loss
from fedgraphrec.models.lightgcn import init_table
from fedgraphrec.models.propagation import (
    NormalizedBipartite,
    combination_weights,
    propagate,
    spmm,
    torch_csr,
)
from fedgraphrec.seeding import seeded_generator

__all__ = [
    "HyperGNN",
    "LightGCNSide",
    "augmented_adjacency",
    "hypergraph_factor",
    "hypergraph_incidence",
    "items_sharing_a_tag",
]


def _binary(m: sp.spmatrix, name: str, shape: tuple[int, int]) -> sp.csr_matrix:
    if m.shape != shape:
        raise ValueError(f"{name} has shape {m.shape}, expected {shape}")
    out = (sp.csr_matrix(m) != 0).astype(np.float64).tocsr()
    out.eliminate_zeros()
    return out


def _loop_free_symmetric(m: sp.spmatrix, name: str, n: int) -> sp.csr_matrix:
    b = _binary(m, name, (n, n))
    b = ((b + b.T) > 0).astype(np.float64).tolil()
    b.setdiag(0)
    out = b.tocsr()
    out.eliminate_zeros()
    return out


def items_sharing_a_tag(tags: sp.spmatrix) -> sp.csr_matrix:
    r"""Item–item graph :math:`T_{ij} = 1` iff items :math:`i \ne j` share a tag (item × tag incidence in)."""
    t = (sp.csr_matrix(tags) != 0).astype(np.float64)
    return _loop_free_symmetric(t @ t.T, "tags @ tags.T", t.shape[0])


def augmented_adjacency(
    train: sp.spmatrix, social: sp.spmatrix | None = None, item_item: sp.spmatrix | None = None
) -> sp.csr_matrix:
    r""":math:`\hat A = D^{-1/2} A D^{-1/2}` of the user–item graph plus social and item–item edges.

    Args:
        train: user × item training interactions (nonzero = edge).
        social: user × user graph (symmetrised, binarised, self-loops dropped); ``None``: no edges.
        item_item: item × item graph (same treatment); ``None``: no edges.

    Returns:
        The ``(n + m) × (n + m)`` float64 CSR, users first. Isolated nodes have empty rows.

    Raises:
        ValueError: a matrix has the wrong shape (the message names it).
    """
    n, m = train.shape
    R = _binary(train, "train", (n, m))
    S = sp.csr_matrix((n, n)) if social is None else _loop_free_symmetric(social, "social", n)
    T = sp.csr_matrix((m, m)) if item_item is None else _loop_free_symmetric(item_item, "item_item", m)
    A = sp.bmat([[S, R], [R.T, T]], format="csr")
    deg = np.asarray(A.sum(axis=1)).ravel()
    inv = np.zeros_like(deg)
    inv[deg > 0] = 1.0 / np.sqrt(deg[deg > 0])
    Dm = sp.diags(inv)
    out = sp.csr_matrix(Dm @ A @ Dm)
    out.sort_indices()
    return out


def hypergraph_incidence(
    train: sp.spmatrix, social: sp.spmatrix | None = None, tags: sp.spmatrix | None = None
) -> sp.csr_matrix:
    r"""Incidence :math:`H` (nodes = users then items; hyperedges = user item sets, tags, friend sets).

    Columns, in order: one per user (:math:`\{u\}\cup\mathcal I_u`), one per tag (its items), one
    per user (:math:`\{u\}\cup\mathcal N(u)`); hyperedges with fewer than two nodes (a user without
    training items or friends, a tag with one item) join nothing and are dropped.

    Args:
        train: user × item training interactions.
        social: user × user graph (symmetrised, self-loops dropped); ``None``: no friend hyperedges.
        tags: item × tag incidence; ``None``: no tag hyperedges.

    Raises:
        ValueError: a matrix has the wrong shape (the message names it).
    """
    n, m = train.shape
    R = _binary(train, "train", (n, m))
    blocks = [sp.bmat([[sp.identity(n, format="csr")], [R.T]], format="csc")]  # user item sets
    if tags is not None:
        if tags.shape[0] != m:
            raise ValueError(f"tags has {tags.shape[0]} rows, expected one per item ({m})")
        Tg = _binary(tags, "tags", (m, tags.shape[1]))
        blocks.append(sp.bmat([[sp.csr_matrix((n, Tg.shape[1]))], [Tg]], format="csc"))
    if social is not None:
        S = _loop_free_symmetric(social, "social", n)
        blocks.append(sp.bmat([[S + sp.identity(n)], [sp.csr_matrix((m, n))]], format="csc"))
    H = sp.hstack(blocks, format="csc")
    keep = np.flatnonzero(np.diff(H.indptr) >= 2)  # a hyperedge of < 2 nodes joins nothing
    out = sp.csr_matrix(H[:, keep])
    out.sort_indices()
    return out


def hypergraph_factor(incidence: sp.spmatrix, edge_weights: np.ndarray | None = None) -> sp.csr_matrix:
    r""":math:`B = D_v^{-1/2} H W^{1/2} D_e^{-1/2}`, so that the convolution operator is :math:`P = BB^\top`.

    Args:
        incidence: :math:`H`, nodes × hyperedges (nonzero = member).
        edge_weights: the diagonal of :math:`W` (positive, one per hyperedge); ``None``: all ones.

    Raises:
        ValueError: ``edge_weights`` has the wrong length or a non-positive entry.
    """
    H = (sp.csr_matrix(incidence) != 0).astype(np.float64).tocsr()
    n_edges = H.shape[1]
    w = np.ones(n_edges) if edge_weights is None else np.asarray(edge_weights, dtype=np.float64)
    if w.shape != (n_edges,):
        raise ValueError(f"edge_weights needs {n_edges} entries (one per hyperedge), got shape {w.shape}")
    if np.any(w <= 0):
        raise ValueError("edge_weights must be positive")
    dv = H @ w
    de = np.asarray(H.sum(axis=0)).ravel()
    inv_v = np.zeros_like(dv)
    inv_v[dv > 0] = 1.0 / np.sqrt(dv[dv > 0])
    inv_e = np.zeros_like(de)
    inv_e[de > 0] = 1.0 / np.sqrt(de[de > 0])
    out = sp.csr_matrix(sp.diags(inv_v) @ H @ sp.diags(np.sqrt(w) * inv_e))
    out.sort_indices()
    return out


class _NodeTableModel(nn.Module):
    """Free layer-0 tables over users and items; subclasses give the layer-combined propagation."""

    n_users: int
    n_items: int
    n_layers: int

    def _init_tables(
        self,
        n_users: int,
        n_nodes: int,
        dim: int,
        n_layers: int,
        init_std: float,
        generator: torch.Generator | None,
        dtype: torch.dtype,
    ) -> None:
        if not 0 < n_users < n_nodes:
            raise ValueError(f"n_users must be in (0, {n_nodes}), got {n_users}")
        if n_layers < 0:
            raise ValueError(f"n_layers must be >= 0, got {n_layers}")
        if dim <= 0:
            raise ValueError(f"dim must be positive, got {dim}")
        if init_std <= 0:
            raise ValueError(f"init_std must be positive, got {init_std}")
        gen = generator if generator is not None else seeded_generator(0)
        self.n_users, self.n_items, self.n_layers = n_users, n_nodes - n_users, n_layers
        self.user_emb = init_table(n_users, dim, init_std, gen, dtype)
        self.item_emb = init_table(self.n_items, dim, init_std, gen, dtype)

    def _combined(self, E0: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Final (layer-mean) user and item embeddings, shapes ``(n_users, d)``, ``(n_items, d)``."""
        E = self._combined(torch.cat([self.user_emb, self.item_emb]))
        return E[: self.n_users], E[self.n_users :]

    @torch.no_grad()
    def frozen_embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`embeddings` without autograd (for evaluation)."""
        U, V = self.embeddings()
        return U.detach(), V.detach()

    def batch_loss(
        self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, reg_weight: float
    ) -> BatchLoss:
        """BPR of the triples on the final embeddings plus ``reg_weight`` × layer-0 L2 of their rows."""
        return triple_loss(self.embeddings(), (self.user_emb, self.item_emb), users, pos, neg, reg_weight)


class LightGCNSide(_NodeTableModel):
    r"""LightGCN over :math:`\hat A` with social and item–item edges (module docstring).

    Args:
        adjacency: :math:`\hat A` from :func:`augmented_adjacency`, ``(n_users + n_items)`` square.
        n_users: number of user rows (the first ``n_users`` nodes).
        dim, n_layers, init_std, generator, dtype: as :class:`~fedgraphrec.models.LightGCN`.
    """

    def __init__(
        self,
        adjacency: sp.spmatrix,
        n_users: int,
        dim: int = 64,
        n_layers: int = 3,
        init_std: float = 0.1,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        N = adjacency.shape[0]
        if adjacency.shape != (N, N):
            raise ValueError(f"adjacency must be square, got shape {adjacency.shape}")
        self._init_tables(n_users, N, dim, n_layers, init_std, generator, dtype)
        self.graph = NormalizedBipartite.from_normalized(adjacency, dtype)

    def _combined(self, E0: torch.Tensor) -> torch.Tensor:
        out, _ = propagate(self.graph, E0, E0, self.n_layers)
        return out


class HyperGNN(_NodeTableModel):
    r"""Attention-free hypergraph convolution :math:`E^{(l+1)} = B(B^\top E^{(l)})` (module docstring).

    Args:
        factor: :math:`B` from :func:`hypergraph_factor`, nodes × hyperedges (users first).
        n_users: number of user rows.
        dim, n_layers, init_std, generator, dtype: as :class:`~fedgraphrec.models.LightGCN`.
        layer_weights: :math:`\alpha_0..\alpha_L` (default: all :math:`1/(L+1)`).
    """

    def __init__(
        self,
        factor: sp.spmatrix,
        n_users: int,
        dim: int = 64,
        n_layers: int = 3,
        init_std: float = 0.1,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float32,
        layer_weights: Sequence[float] | None = None,
    ) -> None:
        super().__init__()
        self._init_tables(n_users, factor.shape[0], dim, n_layers, init_std, generator, dtype)
        B = sp.csr_matrix(factor, dtype=np.float64)
        self._B, self._BT = torch_csr(B, dtype), torch_csr(B.T.tocsr(), dtype)
        self.layer_weights = combination_weights(n_layers, layer_weights)

    def convolve(self, X: torch.Tensor) -> torch.Tensor:
        r"""One convolution :math:`PX = B(B^\top X)` (differentiable)."""
        return spmm(self._B, self._BT, spmm(self._BT, self._B, X))

    def _combined(self, E0: torch.Tensor) -> torch.Tensor:
        out = E0 * self.layer_weights[0]
        E = E0
        for a in self.layer_weights[1:]:
            E = self.convolve(E)
            out = out + a * E
        return out
