"""Threshold (Shamir) secret sharing of 32-byte secrets, vectorised with numpy.

Secure aggregation (:mod:`fedgraphrec.crypto.secagg.wire`) has every client share two 32-byte secrets
with every other client so that any ``t`` survivors can rebuild them and no ``t - 1`` learn anything.
That is ``n²`` share evaluations per round, so the evaluation must be vectorised; no well-kept
Python library does this (pycryptodome's ``Shamir`` works on one 16-byte secret at a time in pure
Python), so this module implements the textbook scheme over a small prime field:

* the field is ``GF(p)`` with the Mersenne prime ``p = 2^31 - 1``, so products of two field
  elements fit in ``int64`` and Horner's rule runs as numpy array operations;
* a 32-byte secret is split into :data:`LIMBS` = 9 limbs of 30 bits (``9 · 30 = 270 ≥ 256``); every
  limb is shared with its own independent random polynomial of degree ``t - 1``. Each limb on its
  own is perfectly hidden by any ``t - 1`` shares, hence so is the whole secret;
* party ``i`` holds the evaluations at the public point ``x_i`` (``1 ≤ x_i < p``, distinct), and
  :func:`recover` interpolates at 0 with Lagrange coefficients from any ``t`` of them.

A share is :data:`SHARE_BYTES` = 36 bytes on the wire (:func:`share_to_bytes`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from fedgraphrec.crypto._primitives import KEY_BYTES

__all__ = [
    "LIMBS",
    "PRIME",
    "SECRET_BYTES",
    "SHARE_BYTES",
    "recover",
    "share_from_bytes",
    "share_secrets",
    "share_to_bytes",
]

PRIME = (1 << 31) - 1
"""The field modulus ``p = 2^31 - 1``."""
SECRET_BYTES = KEY_BYTES
"""Length of a shared secret (an X25519 private key or a mask seed: 32 bytes)."""
_LIMB_BITS = 30
LIMBS = 9
"""Field elements per secret: ``ceil(256 / 30)``."""
SHARE_BYTES = 4 * LIMBS
"""Serialized size of one party's share of one secret."""


def _limbs(secret: bytes) -> list[int]:
    if len(secret) != SECRET_BYTES:
        raise ValueError(f"a shared secret must be exactly {SECRET_BYTES} bytes, got {len(secret)}")
    value = int.from_bytes(secret, "little")
    mask = (1 << _LIMB_BITS) - 1
    return [(value >> (_LIMB_BITS * k)) & mask for k in range(LIMBS)]


def _check_points(xs: NDArray[np.int64] | Sequence[int]) -> NDArray[np.int64]:
    points = np.asarray(xs, dtype=np.int64)
    if points.ndim != 1 or len(points) == 0:
        raise ValueError("evaluation points must be a non-empty 1-D sequence")
    if (points <= 0).any() or (points >= PRIME).any():
        raise ValueError(f"evaluation points must lie in [1, {PRIME - 1}]")
    if len(np.unique(points)) != len(points):
        raise ValueError("evaluation points must be distinct")
    return points


def share_secrets(
    secrets: Sequence[bytes], threshold: int, xs: NDArray[np.int64] | Sequence[int]
) -> NDArray[np.int64]:
    """Shares of each secret at each point: any ``threshold`` of them recover it, fewer reveal nothing.

    Args:
        secrets: the 32-byte secrets to share.
        threshold: ``t``, the number of shares needed (``1 ≤ t ≤ len(xs)``).
        xs: the parties' distinct public evaluation points in ``[1, p - 1]``.

    Returns:
        ``int64`` array of shape ``(len(secrets), len(xs), LIMBS)`` with entries in ``[0, p)``.

    Raises:
        ValueError: a secret is not 32 bytes, the points are invalid, or ``threshold`` is out of range.
    """
    points = _check_points(xs)
    if not 1 <= threshold <= len(points):
        raise ValueError(f"threshold must be in [1, {len(points)}] (the number of parties), got {threshold}")
    constant = np.array([_limbs(bytes(s)) for s in secrets], dtype=np.int64)  # (S, LIMBS)
    coeffs = random_field_elements((len(secrets), threshold - 1, LIMBS))
    acc = np.zeros((len(secrets), len(points), LIMBS), dtype=np.int64)
    x = points[None, :, None]
    for j in range(threshold - 2, -1, -1):  # Horner over the random coefficients, highest first
        acc = (acc * x + coeffs[:, j, None, :]) % PRIME
    return (acc * x + constant[:, None, :]) % PRIME


def random_field_elements(shape: tuple[int, ...]) -> NDArray[np.int64]:
    """Uniform elements of ``GF(p)`` from the operating system's CSPRNG (``os.urandom``).

    Each element is a 64-bit draw reduced modulo ``p = 2^31 - 1``: the statistical distance from
    uniform is below ``p / 2^64 < 2^-32`` per element. Polynomial coefficients are the secret of
    Shamir sharing, so they never come from a seeded generator.
    """
    count = int(np.prod(shape, dtype=np.int64))
    words = np.frombuffer(os.urandom(8 * count), dtype=np.uint64)
    return (words % np.uint64(PRIME)).astype(np.int64).reshape(shape)


def _lagrange_at_zero(points: NDArray[np.int64]) -> NDArray[np.int64]:
    """``λ_i = Π_{j≠i} x_j / (x_j - x_i) mod p`` for interpolation at 0 (cached per point set)."""
    return _lagrange_cached(tuple(int(v) for v in points))


@functools.lru_cache(maxsize=64)
def _lagrange_cached(xs: tuple[int, ...]) -> NDArray[np.int64]:
    # O(t²) Python arithmetic: a server rebuilding n secrets from the same t holders pays it once
    out = []
    for i, xi in enumerate(xs):
        num = den = 1
        for j, xj in enumerate(xs):
            if j != i:
                num = num * xj % PRIME
                den = den * (xj - xi) % PRIME
        out.append(num * pow(den, -1, PRIME) % PRIME)
    lam = np.array(out, dtype=np.int64)
    lam.setflags(write=False)  # shared through the cache
    return lam


def recover(xs: NDArray[np.int64] | Sequence[int], shares: NDArray[np.int64]) -> bytes:
    """The secret from shares ``shares[i]`` (shape ``(LIMBS,)``) held at points ``xs[i]``.

    Exactly as many shares as the threshold are needed; more are fine (the extra ones are used too,
    which gives the same answer when all shares are honest). Fewer give an unrelated value: callers
    must count shares themselves, as :class:`~fedgraphrec.crypto.secagg.server.SecAggServer` does.

    Raises:
        ValueError: the points are invalid, or the shares do not decode to a 32-byte secret (which
            happens when shares were corrupted or too few were given).
    """
    points = _check_points(xs)
    values = np.asarray(shares, dtype=np.int64)
    if values.shape != (len(points), LIMBS):
        raise ValueError(f"expected shares of shape ({len(points)}, {LIMBS}), got {values.shape}")
    lam = _lagrange_at_zero(points)
    limbs = ((values % PRIME) * lam[:, None] % PRIME).sum(axis=0) % PRIME
    if (limbs >> _LIMB_BITS).any() or int(limbs[-1]) >> (256 - _LIMB_BITS * (LIMBS - 1)):
        raise ValueError("the shares do not interpolate to a valid secret (corrupted, or too few)")
    value = sum(int(limb) << (_LIMB_BITS * k) for k, limb in enumerate(limbs))
    return value.to_bytes(SECRET_BYTES, "little")


def share_to_bytes(share: NDArray[np.int64]) -> bytes:
    """One party's share of one secret (``LIMBS`` field elements) as 36 little-endian bytes."""
    return np.asarray(share, dtype="<u4").tobytes()


def share_from_bytes(data: bytes) -> NDArray[np.int64]:
    """Inverse of :func:`share_to_bytes`; ``ValueError`` on a wrong length or an out-of-field element."""
    if len(data) != SHARE_BYTES:
        raise ValueError(f"a share is {SHARE_BYTES} bytes, got {len(data)}")
    values = np.frombuffer(data, dtype="<u4").astype(np.int64)
    if (values >= PRIME).any():
        raise ValueError("a share element is outside the field")
    return values
