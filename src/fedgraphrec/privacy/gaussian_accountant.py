"""Gaussian privacy-loss accounting for the matrix-Gaussian releases of P4GCN (spec §5.2–5.3).

A release of sensitivity ``s`` with noise ``σ`` has privacy loss ``N(η, 2η)`` with ``η = s²/(2σ²)``
(Lemma 4.5); losses add over releases, so ``K`` releases are ``μ``-GDP with ``μ = sqrt(Σ s²/σ²)``.
``(ε, δ)`` follows from ``δ(ε; μ) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ)``, and ``μ*(ε, δ)`` is its inverse
in ``μ`` (root finding). Across users the cost is the maximum (parallel composition, §5.2).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm

__all__ = ["GaussianAccountant", "delta_for", "epsilon_for", "mu_star", "noise_scales"]


def delta_for(eps: float, mu: float) -> float:
    """``δ(ε; μ)`` of a ``μ``-GDP mechanism (the analytic Gaussian curve)."""
    if mu <= 0:
        return 0.0
    return float(norm.cdf(mu / 2 - eps / mu) - math.exp(eps) * norm.cdf(-mu / 2 - eps / mu))


def mu_star(eps: float, delta: float) -> float:
    """Largest ``μ`` with ``δ(ε; μ) ≤ δ`` (brentq on the monotone curve)."""
    if eps <= 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    hi = 1.0
    while delta_for(eps, hi) < delta:
        hi *= 2
    return float(brentq(lambda m: delta_for(eps, m) - delta, 1e-9, hi, xtol=1e-12))


def epsilon_for(mu: float, delta: float) -> float:
    """Smallest ``ε`` with ``δ(ε; μ) ≤ δ``."""
    if mu <= 0:
        return 0.0
    hi = 1.0
    while delta_for(hi, mu) > delta:
        hi *= 2
    return float(brentq(lambda e: delta_for(e, mu) - delta, 0.0, hi, xtol=1e-12))


def noise_scales(
    sensitivity: np.ndarray, clip: float, releases: int, eps: float, delta: float, scale: float = 1.0
) -> np.ndarray:
    """``σ_i = C² s_l(i) sqrt(K) · scale / μ*(ε, δ)`` (spec §5.3; ``scale`` = 1/N when ``L̃`` is)."""
    if releases < 1:
        raise ValueError(f"releases must be >= 1, got {releases}")
    return clip * clip * np.asarray(sensitivity) * math.sqrt(releases) * scale / mu_star(eps, delta)


class GaussianAccountant:
    """Per-user running ``Σ s²/σ²`` over releases; the guarantee is the maximum over users.

    Args:
        n_users: number of users.
    """

    def __init__(self, n_users: int) -> None:
        self.rho = np.zeros(n_users)

    def record(self, users: np.ndarray, sensitivity: np.ndarray, sigma: np.ndarray) -> None:
        """Add one release of each listed user's row (``sensitivity`` and ``sigma`` per listed user)."""
        sig = np.asarray(sigma, dtype=np.float64)
        if np.any(sig <= 0):
            raise ValueError("sigma must be > 0 for every recorded release")
        np.add.at(self.rho, users, (np.asarray(sensitivity) / sig) ** 2)

    def mu(self) -> float:
        """GDP parameter of the worst user."""
        return float(math.sqrt(self.rho.max())) if self.rho.size else 0.0

    def epsilon(self, delta: float) -> float:
        """``ε`` spent at ``δ`` (worst user)."""
        return epsilon_for(self.mu(), delta)
