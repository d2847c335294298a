"""Where DP noise comes from: the run seed (reproducible research runs) or the OS CSPRNG (a guarantee).

A DP guarantee assumes the adversary cannot predict the noise. Noise drawn from a generator seeded by
the run seed (which sits in ``config.toml``) is predictable to anyone who has that file, so a run that
claims ``ε`` to an outside party must draw it from a cryptographic source. Research runs want the
opposite: the same seed, the same numbers. Each DP mechanism of the library (P4GCN's matrix
Gaussian, FedPerGNN's Laplace LDP, DGREC's one-bit and Laplace sharing) therefore takes a
:class:`NoiseSource`:

* :class:`SeededNoise` wraps the run's named generators (numpy and/or torch) and draws exactly what
  those generators drew before (``noise_source = "seeded"`` in the run output);
* :class:`SecureNoise` derives every draw from a ChaCha20 keystream (``cryptography``) under a 256-bit
  key and nonce from :func:`os.urandom`, fresh per source (``noise_source = "csprng"``). Uniforms take
  53 random bits; raw bits (:meth:`SecureNoise.bits`) are keystream words; Gaussians use the
  Box–Muller transform and Laplace the inverse CDF of those uniforms.

Limit: both sources produce IEEE doubles, so neither defends against floating-point attacks on the
low-order bits of noisy outputs (Mironov 2012); the library does not implement the snapping mechanism.
"""

from __future__ import annotations

import math
import os
from typing import Protocol

import numpy as np
import torch
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

__all__ = ["NoiseSource", "SecureNoise", "SeededNoise", "laplace_from_uniform", "noise_source"]

_TWO53 = float(2**53)


def laplace_from_uniform(r: torch.Tensor, scale: float) -> torch.Tensor:
    """Laplace(0, ``scale``) float64 samples from uniforms ``r`` in [0, 1) by the inverse CDF.

    ``r = 0`` (which ``torch.rand`` does return, about once per 2^24 float32 draws, i.e. hundreds
    of times in one DGREC run) would give an infinite sample; ``r`` is kept inside the open
    interval, so the largest magnitude is ``scale · ln 2^24`` in float32.
    """
    u = r.double() - 0.5
    tiny = float(torch.finfo(r.dtype).eps) / 4
    u = u.clamp(-0.5 + tiny, 0.5 - tiny)
    return -scale * torch.sign(u) * torch.log1p(-2 * u.abs())


class NoiseSource(Protocol):
    """The draws a DP mechanism needs; ``name`` is what the run output reports."""

    name: str

    def uniform(self, shape: tuple[int, ...], dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Uniforms in ``[0, 1)`` (Bernoulli thresholds of one-bit encoding, Laplace by inverse CDF)."""
        ...

    def standard_normal(self, shape: tuple[int, ...]) -> np.ndarray:
        """Standard normal float64 draws."""
        ...

    def laplace(self, scale: float, shape: tuple[int, ...]) -> np.ndarray:
        """``Laplace(0, scale)`` float64 draws."""
        ...

    def bits(self, n: int) -> np.ndarray:
        """``n`` uint64 words of independent fair random bits (e.g. Binomial(k, ½) as a popcount)."""
        ...


class SeededNoise:
    """Noise from the run's named generators: reproducible, **not** a guarantee against whoever has the seed.

    Args:
        rng: numpy generator for :meth:`standard_normal` and :meth:`laplace`.
        generator: torch generator for :meth:`uniform`.
    """

    name = "seeded"

    def __init__(self, rng: np.random.Generator | None = None, generator: torch.Generator | None = None):
        self.rng, self.generator = rng, generator

    def uniform(self, shape: tuple[int, ...], dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """``torch.rand`` on the torch generator."""
        if self.generator is None:
            raise RuntimeError("this seeded noise source has no torch generator")
        return torch.rand(shape, generator=self.generator, dtype=dtype)

    def standard_normal(self, shape: tuple[int, ...]) -> np.ndarray:
        """``rng.standard_normal`` on the numpy generator."""
        if self.rng is None:
            raise RuntimeError("this seeded noise source has no numpy generator")
        return self.rng.standard_normal(shape)

    def laplace(self, scale: float, shape: tuple[int, ...]) -> np.ndarray:
        """``rng.laplace`` on the numpy generator."""
        if self.rng is None:
            raise RuntimeError("this seeded noise source has no numpy generator")
        return self.rng.laplace(0.0, scale, shape)

    def bits(self, n: int) -> np.ndarray:
        """``random_`` over the whole int64 range on the torch generator: one 64-bit draw a word."""
        if self.generator is None:
            raise RuntimeError("this seeded noise source has no torch generator")
        words = torch.empty(n, dtype=torch.int64).random_(-(2**63), None, generator=self.generator)
        return words.numpy().view(np.uint64)


class SecureNoise:
    """Noise from a ChaCha20 keystream keyed by :func:`os.urandom`: unpredictable, not reproducible.

    Args:
        key: a 32-byte secret to key the stream with instead (nonce zero), so that parties holding the
            same secret draw the same values — e.g. the initial tables a Flower run's nodes and
            ServerApp derive from one per-run key (``training.learner_base.build_model``). Never pass a
            value derivable from the run seed; each key must key one purpose only.
    """

    name = "csprng"

    def __init__(self, key: bytes | None = None) -> None:
        if key is not None and len(key) != 32:
            raise ValueError(f"SecureNoise: a key is 32 bytes, got {len(key)}")
        nonce = bytes(16) if key is not None else os.urandom(16)
        cipher = Cipher(algorithms.ChaCha20(key if key is not None else os.urandom(32), nonce), mode=None)
        self._stream = cipher.encryptor()

    def _unit(self, n: int) -> np.ndarray:
        """``n`` float64 uniforms in ``(0, 1)``: 53 keystream bits each, shifted off zero."""
        words = np.frombuffer(self._stream.update(bytes(8 * n)), dtype=np.uint64)
        return ((words >> np.uint64(11)).astype(np.float64) + 0.5) / _TWO53

    def uniform(self, shape: tuple[int, ...], dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Uniforms in ``(0, 1)``, rounded to ``dtype``."""
        n = math.prod(shape)
        return torch.from_numpy(self._unit(n).reshape(shape)).to(dtype)

    def standard_normal(self, shape: tuple[int, ...]) -> np.ndarray:
        """Box–Muller on pairs of keystream uniforms."""
        n = math.prod(shape)
        half = (n + 1) // 2
        u1, u2 = self._unit(half), self._unit(half)
        r = np.sqrt(-2.0 * np.log(u1))
        z = np.concatenate([r * np.cos(2 * math.pi * u2), r * np.sin(2 * math.pi * u2)])[:n]
        return z.reshape(shape)

    def laplace(self, scale: float, shape: tuple[int, ...]) -> np.ndarray:
        """Inverse CDF of keystream uniforms."""
        u = torch.from_numpy(self._unit(math.prod(shape)).reshape(shape))
        return laplace_from_uniform(u, scale).numpy()

    def bits(self, n: int) -> np.ndarray:
        """``n`` keystream words."""
        return np.frombuffer(self._stream.update(bytes(8 * n)), dtype=np.uint64).copy()


def noise_source(
    secure: bool, rng: np.random.Generator | None = None, generator: torch.Generator | None = None
) -> NoiseSource:
    """:class:`SecureNoise` when ``secure``, else :class:`SeededNoise` over the given generators."""
    return SecureNoise() if secure else SeededNoise(rng, generator)
