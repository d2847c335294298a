"""Analytic matrix-Gaussian mechanism for the P4GCN social layer (spec §3.3, §5.1, §5.3).

The social party releases, for each user ``i`` in a batch, the row ``l_i X W`` plus noise. Row ``i`` is
protected on its own with isotropic noise ``N(0, σ_i² I_d)`` (a matrix Gaussian with ``U = σ_i``,
``V = I``), calibrated to the per-user edge-level sensitivity ``C² s_l(i)`` (Eq. 10) under the
clipping of A6: every row of the middle matrix and the whole ``W`` have norm ``≤ C``.

``strict`` mode (spec §5.5-4) replaces the data-dependent ``s_l(i)`` by the global bound 2 and
multiplies the release count by the number of rows one edge flip can change.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = [
    "brute_force_sensitivity",
    "clip_frobenius",
    "global_clip_scale",
    "normalized_adjacency",
    "row_noise",
    "sample_matrix_gaussian",
    "strict_release_multiplier",
    "user_sensitivity",
]


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


def brute_force_sensitivity(adj: sp.spmatrix) -> np.ndarray:
    """Exact ``max_{A'} ‖l'_i − l_i‖₁`` over single undirected edge flips (C = 1 worst-case ``X``).

    With every row of ``X`` of norm ``≤ 1`` the largest ``‖(l'_i − l_i) X‖₂`` is ``‖l'_i − l_i‖₁``
    (all rows aligned, signs matched), so this is the true per-user sensitivity that ``s_l`` bounds.
    Quadratic in ``N``: for small test graphs only.
    """
    a = _binary_symmetric(adj).toarray()
    n = a.shape[0]
    base = normalized_adjacency(sp.csr_matrix(a)).toarray()
    worst = np.zeros(n)
    for k in range(n):
        for m in range(k + 1, n):
            b = a.copy()
            b[k, m] = b[m, k] = 1.0 - a[k, m]
            diff = np.abs(normalized_adjacency(sp.csr_matrix(b)).toarray() - base).sum(axis=1)
            worst = np.maximum(worst, diff)
    return worst


def strict_release_multiplier(adj: sp.spmatrix, max_batch_users: int) -> int:
    """Rows one edge flip can change within one batch release: ``min(|B|, 2 + 2·max degree)``."""
    a = _binary_symmetric(adj)
    max_deg = int(np.asarray(a.sum(axis=1)).max()) if a.shape[0] else 0
    return int(min(max_batch_users, 2 + 2 * max_deg))


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


def row_noise(sigmas: np.ndarray, d: int, rng: np.random.Generator) -> np.ndarray:
    """Rows ``E_i ~ N(0, σ_i² I_d)``: the aMGM with ``U = σ_i``, ``V = I_d`` per user row."""
    sig = np.asarray(sigmas, dtype=np.float64)
    if np.any(sig < 0):
        raise ValueError("sigmas must be non-negative")
    return rng.standard_normal((len(sig), d)) * sig[:, None]


def sample_matrix_gaussian(u: np.ndarray, v: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``Z = U G Vᵀ`` with ``G`` i.i.d. standard normal: ``Z ~ MN(0, UUᵀ, VVᵀ)`` (Def. 4.3)."""
    g = rng.standard_normal((u.shape[1], v.shape[1]))
    return np.asarray(u @ g @ v.T)
