"""DGREC's one-bit randomized-response gradient encoder, its unbiased decoder, and its accounting.

Each gradient coordinate is clipped to ``[-δ, δ]`` and sent as one bit ``±1`` drawn with

    P(+1 | g) = 1/(e^β+1) + (e^β-1)(clip(g, δ)+δ) / (2(e^β+1)δ)        (paper Eq. 5)

so ``P(+1)`` runs from ``1/(e^β+1)`` at ``g = -δ`` to ``e^β/(e^β+1)`` at ``g = +δ``. Because
``E[bit] = (e^β-1)/(e^β+1) · clip(g)/δ``, the rescaled mean ``δ(e^β+1)/(e^β-1) · mean(bits)`` is an
unbiased estimate of the clipped gradient (Eq. 6, Proposition 1).

Accounting, side by side (spec §6.1 and gap 8; all three are reported, none is hidden):

* :func:`paper_rdp_epsilon` — the paper's Theorem 1 figure ``2·n_s·log(x)`` with
  ``x = 1.5πδ(e^β+1)/(2(e^β-1)) + (e^{-β/2}+e^{3β/2})/(e^β+1)``. The paper's "(1.5, 0.54)-RDP" at
  ``δ = 0.1, β = 1`` is this figure with ``n_s = 1`` and **base-10** log (0.5475); with the natural log
  it is 1.2607 per coordinate. The figure integrates over gradient *values*, not over outputs, and is
  not monotone in β, so it is reported as "the paper's bound", not as a guarantee we vouch for.
* the literal Theorem 1 with ``n_s`` coordinates and natural log: ``paper_rdp_epsilon(δ, β, n_s, "e")``.
* :func:`ldp_epsilon` — the standard guarantee: per coordinate the encoder is binary randomized
  response whose likelihood ratio is at most ``e^β``, hence β-LDP per coordinate and (by basic
  composition) ``n_s·β``-LDP per shared vector, and ``T·n_s·β`` over ``T`` sharings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from fedgraphrec.privacy.noise_source import NoiseSource, SeededNoise

__all__ = [
    "OneBitAccounting",
    "accounting",
    "decode",
    "decode_scale",
    "encode",
    "ldp_epsilon",
    "paper_rdp_epsilon",
    "prob_plus_one",
    "sum_of_zero_encodings",
]


def _check(delta: float, beta: float) -> None:
    if not delta > 0:
        raise ValueError(f"delta (clipping threshold) must be > 0, got {delta}")
    if not beta > 0:
        raise ValueError(f"beta (perturbation strength) must be > 0, got {beta}")


def prob_plus_one(grad: torch.Tensor, delta: float, beta: float) -> torch.Tensor:
    """Probability that each coordinate of ``grad`` is encoded as ``+1`` (Eq. 5)."""
    _check(delta, beta)
    e = math.exp(beta)
    clipped = grad.clamp(-delta, delta)
    return 1.0 / (e + 1.0) + (e - 1.0) * (clipped + delta) / (2.0 * (e + 1.0) * delta)


def encode(
    grad: torch.Tensor, delta: float, beta: float, generator: torch.Generator | NoiseSource
) -> torch.Tensor:
    """One-bit encoding of ``grad``: a tensor of the same shape holding only ``-1`` and ``+1`` (int8).

    Args:
        grad: raw gradient (any shape); it never leaves this function.
        delta: per-coordinate clipping threshold δ.
        beta: perturbation strength β (smaller = noisier = more private).
        generator: the random stream (CPU) for the Bernoulli draws: a seeded torch generator, or a
            :class:`~fedgraphrec.privacy.noise_source.NoiseSource` (``SecureNoise`` for a guarantee).
    """
    _check(delta, beta)
    x = grad.detach().to("cpu")
    if not x.is_floating_point():
        x = x.to(torch.float64)
    e = math.exp(beta)
    # P(+1) = 1/2 + (e^β-1)/(2(e^β+1)δ)·clip(g): Eq. 5 simplified, computed in the input's precision
    p = x.clamp(-delta, delta).mul_((e - 1.0) / (2.0 * (e + 1.0) * delta)).add_(0.5)
    if isinstance(generator, torch.Generator):
        generator = SeededNoise(generator=generator)
    bits = generator.uniform(tuple(p.shape), p.dtype) < p
    return (bits.to(torch.int8) * 2 - 1).to(grad.device)


def sum_of_zero_encodings(counts: np.ndarray, source: NoiseSource) -> np.ndarray:
    """The sum of ``counts[i]`` independent encodings of a zero coordinate, drawn exactly (int64).

    Derivation, from :func:`encode`: ``P(+1 | g) = 1/2 + (e^β-1)/(2(e^β+1)δ) · clip(g, δ)``, so at
    ``g = 0`` (a coordinate whose gradient, hence clipped gradient, is exactly zero) ``P(+1) = 1/2``
    whatever δ and β, and the encodings of different senders use independent thresholds. The sum
    of ``n`` such ``±1`` values is therefore ``2X - n`` with ``X ~ Binomial(n, 1/2)``, and ``X`` is
    the number of ones among ``n`` fair random bits: a popcount of ``n`` bits of the
    ``source``'s :meth:`~fedgraphrec.privacy.noise_source.NoiseSource.bits`. (In floating point
    :func:`encode` computes ``p = 0·x + 0.5 = 0.5`` exactly, and a seeded float32 threshold is a
    multiple of 2^-24 in ``[0, 1)``, so its ``P(u < 0.5)`` is exactly 1/2 too; a CSPRNG threshold,
    53 bits rounded to float32, falls below 0.5 with a probability off 1/2 by less than 2^-25.)
    One draw of ``n`` bits replaces ``n`` uniform draws and comparisons.

    Args:
        counts: how many senders' zero encodings each coordinate sums (any shape, each ``>= 0``).
        source: the noise source (seeded stream or CSPRNG).

    Raises:
        ValueError: a negative count.
    """
    n = np.asarray(counts, dtype=np.int64)
    flat = n.reshape(-1)
    if flat.size == 0:
        return np.zeros(n.shape, np.int64)
    if (flat < 0).any():
        raise ValueError(f"counts must be >= 0, got a minimum of {int(flat.min())}")
    top = int(flat.max())
    words = max(1, (top + 63) // 64)
    # masks[c]: the first c bits of a row of `words` words (one row per count that occurs)
    keep = np.clip(np.arange(top + 1)[:, None] - 64 * np.arange(words)[None, :], 0, 64).astype(np.uint64)
    full = np.uint64(np.iinfo(np.uint64).max)
    masks = np.where(keep == 64, full, (np.uint64(1) << np.minimum(keep, np.uint64(63))) - np.uint64(1))
    raw = source.bits(flat.size * words).reshape(flat.size, words)
    ones = np.zeros(flat.size, np.int64)
    for w in range(words):
        ones += np.bitwise_count(raw[:, w] & masks[:, w][flat])
    return (2 * ones - flat).reshape(n.shape)


def decode_scale(delta: float, beta: float) -> float:
    """The rescaling ``δ(e^β+1)/(e^β-1)`` that makes the mean of encodings unbiased."""
    _check(delta, beta)
    e = math.exp(beta)
    return delta * (e + 1.0) / (e - 1.0)


def decode(encoded: torch.Tensor, delta: float, beta: float, dim: int = 0) -> torch.Tensor:
    """Unbiased estimate of the mean clipped gradient from a stack of encodings (Eq. 6).

    Args:
        encoded: ``±1`` encodings stacked along ``dim``.
        delta: clipping threshold used by the encoders.
        beta: perturbation strength used by the encoders.
        dim: the axis that indexes senders.
    """
    return decode_scale(delta, beta) * encoded.to(torch.float64).mean(dim=dim)


def _paper_bracket(delta: float, beta: float) -> float:
    e = math.exp(beta)
    middle = 1.5 * math.pi * delta * (e + 1.0) / (2.0 * (e - 1.0))
    outer = (math.exp(-0.5 * beta) + math.exp(1.5 * beta)) / (e + 1.0)
    return middle + outer


def paper_rdp_epsilon(delta: float, beta: float, n_s: int = 1, log: Literal["10", "e"] = "10") -> float:
    """The paper's Theorem-1 RDP figure at order α = 1.5: ``2·n_s·log(x)``.

    Args:
        delta: clipping threshold δ.
        beta: perturbation strength β.
        n_s: number of shared coordinates (the paper's 0.54 uses ``n_s = 1``).
        log: ``"10"`` reproduces the paper's printed number; ``"e"`` is the natural-log reading.
    """
    _check(delta, beta)
    if n_s < 1:
        raise ValueError(f"n_s must be >= 1, got {n_s}")
    if log not in ("10", "e"):
        raise ValueError(f"log must be '10' or 'e', got {log!r}")
    x = _paper_bracket(delta, beta)
    return 2.0 * n_s * (math.log10(x) if log == "10" else math.log(x))


def ldp_epsilon(beta: float, n_s: int = 1, sharings: int = 1) -> float:
    """Standard pure-LDP budget: β per coordinate, composed over ``n_s`` coordinates and ``sharings``."""
    if not beta > 0:
        raise ValueError(f"beta must be > 0, got {beta}")
    if n_s < 1 or sharings < 1:
        raise ValueError(f"n_s and sharings must be >= 1, got n_s={n_s}, sharings={sharings}")
    return beta * n_s * sharings


@dataclass(frozen=True)
class OneBitAccounting:
    """The three readings of the encoder's privacy, for reports.

    Attributes:
        paper_rdp_log10_per_coordinate: paper's printed figure (α = 1.5), ``n_s = 1``, log10.
        paper_rdp_ln_per_coordinate: same formula with the natural log.
        paper_rdp_ln_vector: literal Theorem 1 with ``n_s`` coordinates and natural log.
        ldp_per_coordinate: β (randomized response).
        ldp_vector: ``n_s·β`` for one shared vector.
    """

    paper_rdp_log10_per_coordinate: float
    paper_rdp_ln_per_coordinate: float
    paper_rdp_ln_vector: float
    ldp_per_coordinate: float
    ldp_vector: float


def accounting(delta: float, beta: float, n_s: int) -> OneBitAccounting:
    """All accounting figures for one sharing of an ``n_s``-coordinate vector."""
    return OneBitAccounting(
        paper_rdp_log10_per_coordinate=paper_rdp_epsilon(delta, beta, 1, "10"),
        paper_rdp_ln_per_coordinate=paper_rdp_epsilon(delta, beta, 1, "e"),
        paper_rdp_ln_vector=paper_rdp_epsilon(delta, beta, n_s, "e"),
        ldp_per_coordinate=ldp_epsilon(beta),
        ldp_vector=ldp_epsilon(beta, n_s),
    )
