"""Analytic matrix-Gaussian mechanism for the P4GCN social layer (spec §3.3, §5.1, §5.3).

The social party releases, for the users ``B`` of a batch, the rows ``(B L̃) X W`` plus isotropic
noise ``N(0, σ² I_d)`` per row (a matrix Gaussian with ``U = σ``, ``V = I``). Under the clipping of A6
every row of the middle matrix ``X`` (or ``G``) has norm ``≤ C`` and ``‖W‖_F ≤ C``, so the change of
the whole release when one social edge flips is at most ``C² · Φ`` in Frobenius norm, where
``Φ = max sqrt(Σ_i ‖l'_i − l_i‖₁²)`` over graphs and edges.

Two calibrations:

* **global** (a DP guarantee): :data:`EDGE_FLIP_BOUND` ``= sqrt(33/16)`` bounds ``Φ`` for *every*
  graph (proof in its docstring; :func:`brute_force_release_sensitivity` checks it). One ``σ`` for
  every row, independent of the data, so the noise does not reveal degrees either.
* **paper-local** (not a DP guarantee): the paper's per-user ``s_l(i)`` of Eq. 10,
  :func:`user_sensitivity`. It is computed from the graph itself (local sensitivity), one edge flip
  moves several rows, and :func:`brute_force_sensitivity` finds rows where it is exceeded
  (spec §5.5). Kept to reproduce the paper's tables.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import scipy.sparse as sp

from fedgraphrec.privacy.noise_source import NoiseSource

__all__ = [
    "EDGE_FLIP_BOUND",
    "brute_force_release_sensitivity",
    "brute_force_sensitivity",
    "clip_frobenius",
    "global_clip_scale",
    "normalized_adjacency",
    "row_noise",
    "sample_matrix_gaussian",
    "user_sensitivity",
]

EDGE_FLIP_BOUND = math.sqrt(33.0 / 16.0)
"""``Φ ≤ sqrt(33/16) ≈ 1.436`` for any graph: the edge-level sensitivity of a whole release is ``C² Φ``.

Proof (``L = D^{-1/2}(A + I)D^{-1/2}``, ``D_j`` = degree + 1; flip ``(k, m)``, by symmetry an
addition, ``a = D_k`` before it). Only rows ``k``, ``m`` and the neighbours of ``k`` or ``m`` change.

* Row ``k``: its ``a − 1`` neighbour entries ``1/sqrt(D_k D_j)`` each move by at most
  ``1/sqrt(a) − 1/sqrt(a+1) ≤ 1/(2 a^{3/2})``; its diagonal moves by ``1/a − 1/(a+1) = 1/(a(a+1))``;
  the new entry is ``1/sqrt((a+1)(D_m+1)) ≤ 1/sqrt(2(a+1))``. The sum
  ``(a−1)/(2a^{3/2}) + 1/(a(a+1)) + 1/sqrt(2(a+1))`` is 1 at ``a = 1`` and smaller for every ``a ≥ 2``,
  so ``‖Δl_k‖₁ ≤ 1``; likewise ``‖Δl_m‖₁ ≤ 1``.
* A neighbour ``j`` of ``k`` (``D_j ≥ 2``) changes only its entry ``k``, by at most
  ``1/(sqrt(2)·2a^{3/2})``; the ``a − 1`` of them contribute ``Σ ≤ (a−1)/(8a³) ≤ 1/64`` squared. A row
  next to both ``k`` and ``m`` has ``(x + y)² ≤ 2(x² + y²)``, so all neighbour rows add at most
  ``2(1/64 + 1/64) = 1/16``.

Hence ``Σ_i ‖Δl_i‖₁² ≤ 1 + 1 + 1/16``. Exhaustive search on small graphs reaches ``sqrt(2)`` (two
isolated users linked), so the bound is within 2 % of tight. With ``L̃`` scaled by ``1/N`` (A7) the
sensitivity scales too.
"""


def _binary_symmetric(adj: sp.spmatrix) -> sp.csr_matrix:
    a = sp.csr_matrix(adj, dtype=np.float64)
    a = ((a + a.T) > 0).astype(np.float64)
    a.setdiag(0)
    a.eliminate_zeros()
    return sp.csr_matrix(a)


def normalized_adjacency(adj: sp.spmatrix, scale: float = 1.0) -> sp.csr_matrix:
    """``L̃ = scale · D^{-1/2}(A + I)D^{-1/2}`` of the symmetrised binary ``A`` (A1), float64."""
    a = _binary_symmetric(adj)
    n = a.shape[0]
    deg = np.asarray(a.sum(axis=1)).ravel() + 1.0
    dinv = sp.diags(1.0 / np.sqrt(deg))
    return sp.csr_matrix(scale * (dinv @ (a + sp.identity(n, format="csr")) @ dinv))


def user_sensitivity(adj: sp.spmatrix) -> np.ndarray:
    """Per-user ``s_l(i)`` of Eq. 10 (main-text, self-loop version) for the symmetrised ``A``.

    ``c_i = Σ_j (a_ij + 1[i=j]) / (‖a_j‖₁ + 1)``, ``c_o = max_j 1/(‖a_j‖₁ + 1)``;
    isolated users get ``sqrt(1/2 + c_o/2)``, others ``sqrt(c_i/(k²+k) + c_o/k)`` with ``k = ‖a_i‖₁``.
    """
    a = _binary_symmetric(adj)
    k = np.asarray(a.sum(axis=1)).ravel()
    inv = 1.0 / (k + 1.0)
    c_i = np.asarray(a @ inv).ravel() + inv
    c_o = float(inv.max())
    s2 = np.where(k > 0, c_i / np.maximum(k * k + k, 1.0) + c_o / np.maximum(k, 1.0), 0.5 + 0.5 * c_o)
    return np.sqrt(s2)


def _flip_row_changes(adj: sp.spmatrix) -> Iterator[np.ndarray]:
    """``‖l'_i − l_i‖₁`` of every row, for each single undirected edge flip of ``adj`` in turn."""
    a = _binary_symmetric(adj).toarray()
    n = a.shape[0]
    base = normalized_adjacency(sp.csr_matrix(a)).toarray()
    for k in range(n):
        for m in range(k + 1, n):
            b = a.copy()
            b[k, m] = b[m, k] = 1.0 - a[k, m]
            yield np.abs(normalized_adjacency(sp.csr_matrix(b)).toarray() - base).sum(axis=1)


def brute_force_sensitivity(adj: sp.spmatrix) -> np.ndarray:
    """Exact ``max_{A'} ‖l'_i − l_i‖₁`` per row over single undirected edge flips (C = 1 worst-case ``X``).

    With every row of ``X`` of norm ``≤ 1`` the largest ``‖(l'_i − l_i) X‖₂`` is ``‖l'_i − l_i‖₁``
    (all rows aligned, signs matched), so this is the true per-row change that ``s_l`` claims to
    bound. Quadratic in ``N``: for small test graphs only.
    """
    worst = np.zeros(adj.shape[0])
    for diff in _flip_row_changes(adj):
        worst = np.maximum(worst, diff)
    return worst


def brute_force_release_sensitivity(adj: sp.spmatrix) -> float:
    """Exact ``Φ(A) = max_{A'} sqrt(Σ_i ‖l'_i − l_i‖₁²)`` over single undirected edge flips of ``adj``.

    The whole-release counterpart of :func:`brute_force_sensitivity`; :data:`EDGE_FLIP_BOUND` must
    bound it for every graph. Quadratic in ``N``: small graphs only.
    """
    return max((float(np.sqrt((d**2).sum())) for d in _flip_row_changes(adj)), default=0.0)


def global_clip_scale(m: np.ndarray, c: float) -> float:
    """A6 scalar ``s = max(1, max_i ‖m_i‖₂ / C)``; ``m / s`` has every row norm ``≤ C``."""
    if c <= 0:
        raise ValueError(f"clip constant c must be > 0, got {c}")
    if m.size == 0:
        return 1.0
    return float(max(1.0, np.linalg.norm(m, axis=1).max() / c))


def clip_frobenius(w: np.ndarray, c: float) -> np.ndarray:
    """``W / max(1, ‖W‖_F / C)`` (the one-time clip of the frozen ``W_1``)."""
    if c <= 0:
        raise ValueError(f"clip constant c must be > 0, got {c}")
    return w / max(1.0, float(np.linalg.norm(w)) / c)


def row_noise(sigmas: np.ndarray, d: int, rng: np.random.Generator | NoiseSource) -> np.ndarray:
    """Rows ``E_i ~ N(0, σ_i² I_d)``: the aMGM with ``U = σ_i``, ``V = I_d`` per user row.

    ``rng``: a seeded generator, or a :class:`~fedgraphrec.privacy.noise_source.NoiseSource`.
    """
    sig = np.asarray(sigmas, dtype=np.float64)
    if np.any(sig < 0):
        raise ValueError("sigmas must be non-negative")
    return rng.standard_normal((len(sig), d)) * sig[:, None]


def sample_matrix_gaussian(u: np.ndarray, v: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``Z = U G Vᵀ`` with ``G`` i.i.d. standard normal: ``Z ~ MN(0, UUᵀ, VVᵀ)`` (Def. 4.3)."""
    g = rng.standard_normal((u.shape[1], v.shape[1]))
    return np.asarray(u @ g @ v.T)
