r"""The LightGCN propagation routine shared by every model and protocol.

LightGCN (He et al., "LightGCN: Simplifying and Powering Graph Convolution Network for
Recommendation", SIGIR 2020, https://arxiv.org/abs/2002.02126) propagates over the user–item
bipartite graph with symmetric normalisation and no self-loops or weights:

.. math::
    U^{(l+1)} = \hat R\, V^{(l)}, \qquad V^{(l+1)} = \hat R^{\top} U^{(l)}, \qquad
    \hat R_{ui} = \frac{1}{\sqrt{|\mathcal I_u|}\sqrt{|\mathcal U_i|}} \text{ for } (u,i)\in\text{train},

and combines layers as :math:`U = \sum_{l=0}^{L} \alpha_l U^{(l)}` (default :math:`\alpha_l = 1/(L+1)`).

Why a bipartite pair instead of the usual :math:`(n+m)\times(n+m)` adjacency: the two halves are
the same arithmetic, but keeping :math:`\hat R` and :math:`\hat R^\top` as separate CSR matrices
with 32-bit indices lets PyTorch take its MKL sparse kernel, and the backward pass multiplies by the
pre-built transpose instead of letting autograd transpose a COO matrix every step. The adjoint
recursion used in backward is the one in ``specs/lpgcn.md`` §2.4:

.. math::
    G^{(L)} = \alpha_L \bar G, \qquad
    G_U^{(l)} = \alpha_l \bar G_U + \hat R\, G_V^{(l+1)}, \qquad
    G_V^{(l)} = \alpha_l \bar G_V + \hat R^{\top} G_U^{(l+1)},

where :math:`\bar G` is the gradient of the loss with respect to the combined embeddings.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

__all__ = [
    "NormalizedBipartite",
    "combination_weights",
    "pair_weights",
    "propagate",
    "propagate_layers",
    "spmm",
    "sym_norm_values",
    "torch_csr",
]


def sym_norm_values(train: sp.csr_matrix) -> np.ndarray:
    r"""Values :math:`1/\sqrt{|I_u||U_i|}` for each stored (u, i) of a binary CSR, in CSR order (float64)."""
    du = np.diff(train.indptr).astype(np.float64)
    di = np.bincount(train.indices, minlength=train.shape[1]).astype(np.float64)
    rows = np.repeat(np.arange(train.shape[0]), np.diff(train.indptr))
    return pair_weights(du[rows], di[train.indices])


def pair_weights(user_degree: np.ndarray, item_degree: np.ndarray) -> np.ndarray:
    r""":math:`c_{ui} = 1/\sqrt{|I_u||U_i|}` from the two degrees of each pair (float64).

    Shared by the centralized graph and by parties that know only their own pairs' degrees (an
    LP-GCN shard), so both compute the same weights.
    """
    return 1.0 / np.sqrt(
        np.asarray(user_degree, dtype=np.float64) * np.asarray(item_degree, dtype=np.float64)
    )


def torch_csr(m: sp.csr_matrix, dtype: torch.dtype) -> torch.Tensor:
    """A SciPy CSR as a torch CSR tensor with 32-bit indices (the layout MKL's kernel takes)."""
    if not m.has_sorted_indices:  # the CSR kernels expect sorted column indices
        m = m.sorted_indices()
    if m.nnz >= 2**31:
        raise ValueError(f"graph has {m.nnz} edges; 32-bit CSR indices hold at most 2**31 - 1")
    with warnings.catch_warnings():  # "sparse CSR support is in beta": we rely on the stable matmul only
        warnings.simplefilter("ignore", UserWarning)
        return torch.sparse_csr_tensor(
            torch.from_numpy(m.indptr.astype(np.int32)),
            torch.from_numpy(m.indices.astype(np.int32)),
            torch.from_numpy(np.asarray(m.data)).to(dtype),
            size=m.shape,
            check_invariants=False,
        )


@dataclass(frozen=True)
class NormalizedBipartite:
    r""":math:`\hat R` and :math:`\hat R^\top` as torch CSR tensors (32-bit indices) of one dtype.

    Build with :meth:`from_train`; :meth:`to` converts the dtype (float32 for speed, float64 for the
    equivalence tests). Degrees are the real training degrees; users or items without training
    interactions have empty rows and receive zero propagated embeddings.

    Shapes:
        - ``R``: ``(n_users, n_items)``; ``RT``: ``(n_items, n_users)``.
    """

    R: torch.Tensor
    RT: torch.Tensor
    values: np.ndarray  # float64 normalised values in CSR order of ``R`` (for exact recomputation)
    csr: sp.csr_matrix  # float64 SciPy copy of R̂

    @property
    def n_users(self) -> int:
        """Number of user rows."""
        return int(self.R.shape[0])

    @property
    def n_items(self) -> int:
        """Number of item columns."""
        return int(self.R.shape[1])

    @property
    def dtype(self) -> torch.dtype:
        """Floating dtype of the stored values."""
        return self.R.dtype

    @classmethod
    def from_train(cls, train: sp.csr_matrix, dtype: torch.dtype = torch.float32) -> NormalizedBipartite:
        """Normalise a binary user×item training matrix."""
        train = sp.csr_matrix(train, copy=True)
        train.sum_duplicates()
        train.sort_indices()
        values = sym_norm_values(train)
        csr = sp.csr_matrix((values, train.indices, train.indptr), shape=train.shape)
        return cls._build(csr, values, dtype)

    @classmethod
    def from_normalized(cls, matrix: sp.spmatrix, dtype: torch.dtype = torch.float32) -> NormalizedBipartite:
        r"""Wrap a matrix whose values are already normalised (no degrees are recomputed).

        Used for a square, symmetric normalised adjacency :math:`\hat A` over *all* nodes (users,
        items): fed as both halves, :func:`propagate` with ``user0 = item0 = E^{(0)}`` then gives
        :math:`\sum_l \alpha_l \hat A^l E^{(0)}` in either output (``models/side_graph.py``).
        """
        csr = sp.csr_matrix(matrix, dtype=np.float64, copy=True)
        csr.sum_duplicates()
        csr.sort_indices()
        return cls._build(csr, np.asarray(csr.data), dtype)

    @classmethod
    def _build(cls, csr: sp.csr_matrix, values: np.ndarray, dtype: torch.dtype) -> NormalizedBipartite:
        return cls(R=torch_csr(csr, dtype), RT=torch_csr(csr.T.tocsr(), dtype), values=values, csr=csr)

    def to(self, dtype: torch.dtype) -> NormalizedBipartite:
        """The same graph with values in ``dtype``."""
        if dtype == self.dtype:
            return self
        return self._build(self.csr, self.values, dtype)


def combination_weights(n_layers: int, weights: Sequence[float] | None) -> list[float]:
    r"""The layer-combination weights :math:`\alpha_0..\alpha_L`: ``weights`` checked, or all 1/(L+1)."""
    if weights is None:
        return [1.0 / (n_layers + 1)] * (n_layers + 1)
    if len(weights) != n_layers + 1:
        raise ValueError(
            f"layer_weights needs {n_layers + 1} entries (layers 0..{n_layers}), got {len(weights)}"
        )
    return [float(w) for w in weights]


class _Propagate(torch.autograd.Function):
    """Fused forward/backward of the whole layer-combined propagation."""

    @staticmethod
    def forward(
        ctx: Any,
        user0: torch.Tensor,
        item0: torch.Tensor,
        graph: NormalizedBipartite,
        weights: list[float],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        ctx.graph = graph
        ctx.weights = weights
        u, v = user0, item0
        out_u, out_v = u * weights[0], v * weights[0]
        for w in weights[1:]:
            u, v = graph.R @ v, graph.RT @ u
            out_u.add_(u, alpha=w)
            out_v.add_(v, alpha=w)
        return out_u, out_v

    @staticmethod
    def backward(ctx: Any, grad_u: torch.Tensor, grad_v: torch.Tensor) -> tuple[Any, ...]:
        graph: NormalizedBipartite = ctx.graph
        weights: list[float] = ctx.weights
        gu, gv = grad_u * weights[-1], grad_v * weights[-1]
        for w in reversed(weights[:-1]):
            gu, gv = graph.R @ gv, graph.RT @ gu
            gu.add_(grad_u, alpha=w)
            gv.add_(grad_v, alpha=w)
        return gu, gv, None, None


def propagate(
    graph: NormalizedBipartite,
    user0: torch.Tensor,
    item0: torch.Tensor,
    n_layers: int,
    layer_weights: Sequence[float] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Layer-combined LightGCN embeddings :math:`(\sum_l \alpha_l U^{(l)}, \sum_l \alpha_l V^{(l)})`.

    Differentiable with respect to ``user0`` and ``item0`` through a fused backward pass.

    Args:
        graph: the normalised training graph, in the dtype of the embeddings.
        user0: layer-0 user embeddings, shape ``(n_users, d)``.
        item0: layer-0 item embeddings, shape ``(n_items, d)``.
        n_layers: number of propagation layers :math:`L` (0 gives matrix factorisation).
        layer_weights: :math:`\alpha_0..\alpha_L` (default: all :math:`1/(L+1)`).

    Returns:
        The combined user and item embeddings, shapes ``(n_users, d)`` and ``(n_items, d)``.

    Raises:
        ValueError: on a shape or dtype mismatch with the graph.
    """
    _check(graph, user0, item0)
    weights = combination_weights(n_layers, layer_weights)
    out: tuple[torch.Tensor, torch.Tensor] = _Propagate.apply(user0, item0, graph, weights)
    return out


class _SpMM(torch.autograd.Function):
    """One sparse product ``A @ x`` whose backward multiplies by the pre-built transpose ``AT``."""

    @staticmethod
    def forward(ctx: Any, A: torch.Tensor, AT: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        ctx.AT = AT
        return A @ x

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        return None, None, ctx.AT @ grad


def spmm(A: torch.Tensor, AT: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Differentiable ``A @ x`` for a sparse ``A`` whose transpose ``AT`` is already built."""
    out: torch.Tensor = _SpMM.apply(A, AT, x)
    return out


def propagate_layers(
    graph: NormalizedBipartite, user0: torch.Tensor, item0: torch.Tensor, n_layers: int
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Every layer's embeddings ``([U^(0)..U^(L)], [V^(0)..V^(L)])``, each differentiable.

    The same arithmetic as :func:`propagate`, kept per layer so protocols and equivalence tests can
    compare layer by layer (and take gradients with respect to intermediate layers).
    """
    _check(graph, user0, item0)
    us, vs = [user0], [item0]
    for _ in range(n_layers):
        u_prev, v_prev = us[-1], vs[-1]
        us.append(spmm(graph.R, graph.RT, v_prev))
        vs.append(spmm(graph.RT, graph.R, u_prev))
    return us, vs


def _check(graph: NormalizedBipartite, user0: torch.Tensor, item0: torch.Tensor) -> None:
    if user0.shape[0] != graph.n_users or item0.shape[0] != graph.n_items:
        raise ValueError(
            f"embedding tables have {user0.shape[0]} users / {item0.shape[0]} items, "
            f"the graph has {graph.n_users} / {graph.n_items}"
        )
    if user0.dtype != graph.dtype or item0.dtype != graph.dtype:
        raise ValueError(
            f"embedding dtype {user0.dtype}/{item0.dtype} differs from the graph's {graph.dtype}; "
            "use graph.to(dtype)"
        )
