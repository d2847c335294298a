"""Fixed-point additive secret sharing over the ring Z_{2^64} for secure gradient aggregation.

GNN4FR (spec ``gnn4fr.md``, "Secret-shared gradient aggregation") has every client ``u`` split its
item-gradient vector as ``g_u = r_u + (g_u - r_u)``, send ``r_u`` (encrypted with ``S``) via the
server to one neighbouring client, and upload ``(g_u - r_u) + r_v`` where ``r_v`` is the share it
received. The server's sum over all uploads is ``Σ_u g_u``, while each upload on its own is a
uniformly random ring element. Following the spec's [G] note this is done with fixed-point
additive sharing over ``Z_{2^64}``:

* :class:`FixedPoint` maps floats to ring elements (``uint64``, whose arithmetic wraps modulo
  ``2^64``) so that ring addition is exact integer addition of the rounded values;
* :func:`split` / :func:`reconstruct` are n-out-of-n additive sharing, random shares from the OS CSPRNG;
* :func:`mask_from_seed` expands a 32-byte seed into a reproducible mask with AES-256-CTR, for a
  share both ends derive from a common seed instead of transmitting it;
* :func:`pair_clients` chooses the neighbour each client sends its random share to: a single cycle
  through all clients, deterministic given the generator.

The layering follows :mod:`fedgraphrec.crypto`'s other modules: the ring-level functions work only on
``uint64`` arrays and never see floats; :class:`FixedPoint` is the only place rounding happens.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

import numpy as np
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from numpy.typing import NDArray

from fedgraphrec.crypto._primitives import KEY_BYTES, as_bytes

if TYPE_CHECKING:
    import torch

__all__ = [
    "DEFAULT_FRAC_BITS",
    "MASK_SEED_BYTES",
    "RING_BITS",
    "FixedPoint",
    "mask_from_seed",
    "pair_clients",
    "reconstruct",
    "split",
]

RING_BITS = 64
"""Ring elements are integers modulo ``2^RING_BITS``, stored as ``numpy.uint64``."""
DEFAULT_FRAC_BITS = 32
"""Default number of fractional bits: resolution ``2^-32`` ≈ 2.3e-10, encodable range ``|x| < 2^30``."""
MASK_SEED_BYTES = KEY_BYTES
"""Length of a :func:`mask_from_seed` seed (256 bits)."""

_HEADROOM_BITS = 62
"""Encodings satisfy ``|k| < 2^62``: one bit below the signed range ``[-2^63, 2^63)``."""
_MAX_FRAC_BITS = _HEADROOM_BITS - 1
_MASK_INFO = b"fedgraphrec/mask/v1"
_FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))

UInt64Array: TypeAlias = NDArray[np.uint64]
"""An array of ring elements (integers modulo ``2^64``)."""


def _check_ring_array(value: object, name: str) -> UInt64Array:
    """``value`` as an array if it is a ``uint64`` ndarray or scalar, else ``TypeError`` naming ``name``."""
    if isinstance(value, np.uint64):
        return np.asarray(value)
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray of uint64, got {type(value).__name__}")
    if value.dtype != np.uint64:
        raise TypeError(
            f"{name} must have dtype uint64 (ring elements), got {value.dtype}; "
            "encode floats with FixedPoint.encode first"
        )
    return value


def _check_count(value: object, name: str, minimum: int) -> int:
    """``value`` as an ``int`` ≥ ``minimum``; ``TypeError`` for non-integers, ``ValueError`` if too small."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    count = int(value)
    if count < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {count}")
    return count


def _index_of(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The multi-index of C-order position ``flat`` in an array of ``shape``, as plain ints."""
    return tuple(int(i) for i in np.unravel_index(flat, shape))


def _check_rng(rng: object) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


class FixedPoint:
    """Fixed-point encoding of real numbers into the ring ``Z_{2^64}`` with ``frac_bits`` fractional bits.

    A real ``x`` is encoded as the integer ``k = round(x · 2^f)`` (``f = frac_bits``; round to nearest,
    ties to even), stored modulo ``2^64`` in two's complement, so ``-1`` becomes ``2^64 - 1``. Decoding
    reads a ring element as a signed integer ``k ∈ [-2^63, 2^63)`` and returns ``k · 2^-f``.

    Algebraic contract:

    * **Round trip.** ``|decode(encode(x)) - x| ≤ 2^-(f+1)`` (half the :attr:`resolution`) for every
      encodable ``x``, and ``decode(encode(x)) == x`` when ``x · 2^f`` is an integer.
    * **Encodable range.** :meth:`encode` accepts ``|x| < 2^(62-f)`` (:attr:`max_abs`), i.e.
      ``|x| · 2^f < 2^62``; it keeps one bit of headroom below the signed range so that any two
      encodings can be added without wrapping.
    * **Exact sums.** Ring addition is integer addition modulo ``2^64``. Hence for encodings
      ``k_1 … k_n`` the ring sum ``Σ k_i mod 2^64`` always equals the exact integer sum modulo
      ``2^64``, and ``decode(Σ k_i)`` equals ``Σ decode(k_i)`` (the sum of the individually rounded
      values) **exactly** whenever that true sum lies in :attr:`decode_range`, i.e.
      ``-2^(63-f) ≤ Σ k_i · 2^-f < 2^(63-f)``. Intermediate partial sums may wrap freely; only the
      final sum matters. A sufficient condition: ``n`` values each with ``|x_i| ≤ B`` sum exactly if
      ``n ≤`` :meth:`max_summands(B) <max_summands>`, roughly ``2^(63-f) / B``; any two encodable values
      (``n = 2``) always do, and with ``f = 32`` and ``|x_i| ≤ 1`` over two billion summands do.
    * **Decoded precision.** :meth:`decode` converts the exact signed integer to ``float64``, which is
      exact when ``|k| < 2^53``; compare sums on the integer side (``v.view(np.int64)``) for
      bit-for-bit checks beyond that.

    Args:
        frac_bits: number of fractional bits ``f``, ``0 ≤ f ≤ 61``. Larger ``f`` gives finer
            resolution ``2^-f`` and a smaller range ``|x| < 2^(62-f)``.

    Raises:
        TypeError: ``frac_bits`` is not an int.
        ValueError: ``frac_bits`` is outside ``[0, 61]``.
    """

    __slots__ = ("_frac_bits",)

    def __init__(self, frac_bits: int = DEFAULT_FRAC_BITS) -> None:
        bits = _check_count(frac_bits, "frac_bits", 0)
        if bits > _MAX_FRAC_BITS:
            raise ValueError(
                f"frac_bits must be at most {_MAX_FRAC_BITS} (the encodable range is "
                f"|x| < 2**(62 - frac_bits)), got {bits}"
            )
        self._frac_bits = bits

    @property
    def frac_bits(self) -> int:
        """Number of fractional bits ``f``."""
        return self._frac_bits

    @property
    def scale(self) -> int:
        """The integer ``2^f`` that reals are multiplied by before rounding."""
        return 1 << self._frac_bits

    @property
    def resolution(self) -> float:
        """Spacing ``2^-f`` of representable values; the round-trip error is at most half of it."""
        return float(np.ldexp(1.0, -self._frac_bits))

    @property
    def max_abs(self) -> float:
        """Exclusive bound ``2^(62-f)`` on ``|x|`` accepted by :meth:`encode`."""
        return float(np.ldexp(1.0, _HEADROOM_BITS - self._frac_bits))

    @property
    def decode_range(self) -> tuple[float, float]:
        """Half-open interval ``[low, high) = [-2^(63-f), 2^(63-f))`` of values a ring element decodes to.

        A sum of encodings decodes exactly iff the exact sum of the rounded values lies in it.
        """
        top = float(np.ldexp(1.0, RING_BITS - 1 - self._frac_bits))
        return (-top, top)

    def max_summands(self, bound: float) -> int:
        """Largest ``n`` such that any ``n`` values with ``|x_i| ≤ bound`` sum exactly (never wrap).

        Each such value encodes to ``|k_i| ≤ K = ⌊bound · 2^f + 1/2⌋``, and ``n · K ≤ 2^63 - 1`` keeps
        the exact sum inside the signed range, so ``n = ⌊(2^63 - 1) / K⌋`` (at least 2 for any
        encodable ``bound``). Values below half the resolution encode to 0; ``K`` is then taken as 1.

        Args:
            bound: a bound on the magnitude of every summand, ``0 < bound < max_abs``.

        Raises:
            TypeError: ``bound`` is not a real number.
            ValueError: ``bound`` is not positive and finite.
            OverflowError: ``bound`` is not encodable (``bound ≥ max_abs``).
        """
        if isinstance(bound, bool) or not isinstance(bound, int | float | np.integer | np.floating):
            raise TypeError(f"bound must be a real number, got {type(bound).__name__}")
        b = float(bound)
        if not (np.isfinite(b) and b > 0):
            raise ValueError(f"bound must be positive and finite, got {b!r}")
        if b >= self.max_abs:
            raise OverflowError(
                f"bound {b!r} is not encodable with frac_bits={self._frac_bits}: "
                f"need |x| < 2**{_HEADROOM_BITS - self._frac_bits}"
            )
        per_term = max(1, int(np.floor(np.ldexp(b, self._frac_bits) + 0.5)))
        return ((1 << (RING_BITS - 1)) - 1) // per_term

    def check_sum(self, n_summands: int, max_abs: float, what: str) -> None:
        """Raise a clear :class:`OverflowError` when ``n_summands`` values of magnitude ``max_abs`` may wrap.

        A ring sum that leaves :attr:`decode_range` silently decodes to a wrong value, so every
        place that adds encodings calls this first with the count and the largest magnitude.

        Args:
            n_summands: how many encodings are added.
            max_abs: the largest ``|x|`` among them (0 is fine).
            what: the phase or quantity, named in the error.
        """
        if n_summands <= 1 or max_abs == 0:
            return
        if not np.isfinite(max_abs) or max_abs >= self.max_abs:
            raise OverflowError(
                f"{what}: a value of magnitude {max_abs!r} is not encodable with frac_bits={self._frac_bits}"
            )
        limit = self.max_summands(max_abs)
        if n_summands > limit:
            raise OverflowError(
                f"{what}: {n_summands} summands of magnitude up to {max_abs:.3g} may wrap the ring "
                f"(at most {limit} fit with frac_bits={self._frac_bits}); lower frac_bits"
            )

    def encode(self, x: np.ndarray | torch.Tensor) -> UInt64Array:
        """Encode reals as ring elements: ``round(x · 2^f) mod 2^64`` (two's complement for negatives).

        Args:
            x: a float16/float32/float64 numpy array or floating-point torch tensor (any device;
                it is detached and copied to the CPU). Any shape, including 0-d.

        Returns:
            A new ``uint64`` array with the shape of ``x``.

        Raises:
            TypeError: ``x`` is not a numpy array or torch tensor, or its dtype is not floating point.
            ValueError: ``x`` contains NaN.
            OverflowError: some ``|x| · 2^f ≥ 2^62`` (including ±inf); the message names the largest
                offending value, its index and the limit ``2^(62-f)``.
        """
        values = self._as_float64(x)
        if np.isnan(values).any():
            nan_at = _index_of(int(np.argmax(np.isnan(values))), values.shape)
            raise ValueError(f"cannot encode NaN (first at index {nan_at})")
        magnitude = np.abs(values)
        limit = self.max_abs
        # Scaling by a power of two is exact, so |x| ≥ 2^(62-f) ⟺ |x| · 2^f ≥ 2^62.
        too_big = magnitude >= limit
        if too_big.any():
            # the values themselves stay out of the message: they may be private gradients
            index = _index_of(int(np.argmax(magnitude)), values.shape)
            raise OverflowError(
                f"{int(too_big.sum())} value(s) out of fixed-point range, the largest at index {index}; "
                f"with frac_bits={self._frac_bits} encodable values satisfy "
                f"|x| < 2**{_HEADROOM_BITS - self._frac_bits} = {limit!r}"
            )
        scaled = np.asarray(np.rint(np.ldexp(values, self._frac_bits)))
        return scaled.astype(np.int64).view(np.uint64)

    def decode(self, v: UInt64Array) -> NDArray[np.float64]:
        """Decode ring elements: read as signed ``k ∈ [-2^63, 2^63)`` and return ``k · 2^-f`` in float64.

        The conversion to float64 is exact for ``|k| < 2^53``; beyond that it rounds to nearest.

        Args:
            v: a ``uint64`` array (or scalar), e.g. from :meth:`encode`, a sum of encodings or
                :func:`reconstruct`.

        Returns:
            A new ``float64`` array with the shape of ``v``.

        Raises:
            TypeError: ``v`` is not a ``uint64`` numpy array or scalar.
        """
        ring = _check_ring_array(v, "v")
        return np.asarray(np.ldexp(ring.view(np.int64).astype(np.float64), -self._frac_bits))

    @staticmethod
    def _as_float64(x: object) -> NDArray[np.float64]:
        th = sys.modules.get("torch")  # a tensor exists only once torch is imported; do not import it here
        if th is not None and isinstance(x, th.Tensor):
            if not x.is_floating_point():
                raise TypeError(f"encode expects a floating-point tensor, got dtype {x.dtype}")
            return np.asarray(x.detach().to(device="cpu", dtype=th.float64).numpy())
        if isinstance(x, np.ndarray):
            if x.dtype not in _FLOAT_DTYPES:
                raise TypeError(f"encode expects a float16/float32/float64 array, got dtype {x.dtype}")
            return x.astype(np.float64, copy=False)
        raise TypeError(f"encode expects a numpy.ndarray or torch.Tensor, got {type(x).__name__}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FixedPoint):
            return NotImplemented
        return self._frac_bits == other._frac_bits

    def __hash__(self) -> int:
        return hash((FixedPoint, self._frac_bits))

    def __repr__(self) -> str:
        return f"FixedPoint(frac_bits={self._frac_bits})"


def split(value: UInt64Array, n_shares: int) -> list[UInt64Array]:
    """Split ring elements into ``n_shares`` additive shares: ``Σ shares ≡ value (mod 2^64)``.

    The first ``n_shares - 1`` shares are independent uniform draws from ``Z_{2^64}`` taken from the
    operating system's CSPRNG (:func:`os.urandom`); the last is ``value - Σ others mod 2^64``. Any
    ``n_shares - 1`` of the shares are then jointly uniform and independent of ``value`` (so each
    single share reveals nothing); all of them together give ``value`` back through
    :func:`reconstruct`. There is deliberately no seed parameter: shares that a run seed could
    regenerate would hide nothing from whoever holds the seed. Protocols that need reproducible
    numbers get them from the sum, which does not depend on the draws.

    Args:
        value: a ``uint64`` array (e.g. :meth:`FixedPoint.encode` output), any shape.
        n_shares: number of shares, at least 2.

    Returns:
        ``n_shares`` new ``uint64`` arrays with the shape of ``value``.

    Raises:
        TypeError: ``value`` is not a ``uint64`` array or ``n_shares`` is not an int.
        ValueError: ``n_shares < 2``.
    """
    ring = _check_ring_array(value, "value")
    count = _check_count(n_shares, "n_shares", 2)
    size = (count - 1) * int(np.prod(ring.shape, dtype=np.int64))
    random_shares = np.frombuffer(os.urandom(8 * size), dtype=np.uint64).reshape(count - 1, *ring.shape)
    # ufuncs on arrays wrap modulo 2^64 without warnings (unlike numpy scalar arithmetic).
    last = np.subtract(ring, np.sum(random_shares, axis=0, dtype=np.uint64), dtype=np.uint64)
    return [*(np.array(share) for share in random_shares), np.asarray(last, dtype=np.uint64)]


def reconstruct(shares: Sequence[UInt64Array]) -> UInt64Array:
    """Recombine additive shares: ``Σ shares mod 2^64``, the inverse of :func:`split`.

    Also the server's aggregation step: the sum of any arrays of ring elements, e.g. all clients'
    uploads in the GNN4FR scheme (see :func:`pair_clients`).

    Args:
        shares: one or more ``uint64`` arrays of the same shape.

    Returns:
        A new ``uint64`` array with the common shape.

    Raises:
        TypeError: ``shares`` is not a sequence of ``uint64`` arrays.
        ValueError: ``shares`` is empty or the shapes differ.
    """
    if isinstance(shares, np.ndarray) or not isinstance(shares, Sequence):
        raise TypeError(
            f"shares must be a sequence (list or tuple) of uint64 arrays, got {type(shares).__name__}"
        )
    if len(shares) == 0:
        raise ValueError("shares must contain at least one array")
    arrays = [_check_ring_array(share, f"shares[{i}]") for i, share in enumerate(shares)]
    shape = arrays[0].shape
    for i, share in enumerate(arrays):
        if share.shape != shape:
            raise ValueError(
                f"all shares must have the same shape: shares[0] is {shape}, shares[{i}] is {share.shape}"
            )
    total = np.array(arrays[0], dtype=np.uint64, copy=True)
    for share in arrays[1:]:
        np.add(total, share, out=total)
    return total


def _normalise_shape(shape: int | Sequence[int]) -> tuple[int, ...]:
    dims: Sequence[object] = (shape,) if isinstance(shape, int | np.integer) else shape
    if isinstance(dims, str | bytes) or not isinstance(dims, Sequence):
        raise TypeError(f"shape must be an int or a sequence of ints, got {type(shape).__name__}")
    out = []
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int | np.integer):
            raise TypeError(f"shape entries must be ints, got {type(d).__name__}")
        size = int(d)
        if size < 0:
            raise ValueError(f"shape entries must be non-negative, got {tuple(dims)}")
        out.append(size)
    return tuple(out)


def mask_from_seed(seed: bytes, shape: int | Sequence[int], label: bytes) -> UInt64Array:
    """A reproducible uniform mask over ``Z_{2^64}`` expanded from a 32-byte secret seed.

    Two parties holding the same ``seed`` derive the same mask for the same ``(shape, label)``,
    so a random share can be agreed on instead of transmitted. Derivation:

    1. ``key = HKDF-SHA256(seed, salt=None, info="fedgraphrec/mask/v1" ‖ ndim (u32 LE) ‖ each dim
       (u64 LE) ‖ label)``, 32 bytes (RFC 5869);
    2. the mask is the AES-256-CTR keystream under ``key`` with an all-zero initial counter block
       (NIST SP 800-38A), ``8 · prod(shape)`` bytes, read as little-endian ``uint64`` in C order.

    HKDF-Expand is a PRF keyed by ``seed``, and every key encrypts one stream from counter 0, so
    masks for different labels or shapes are computationally independent and each is
    indistinguishable from uniform to anyone without ``seed``. Because the shape is bound into the
    key, a longer mask never extends a shorter one under the same label. Reusing one
    ``(seed, shape, label)`` to mask two different values reveals their difference: give every
    use (e.g. round and purpose) its own label.

    Args:
        seed: 32 secret bytes, e.g. :meth:`SharedKey.subkey` output or :func:`secrets.token_bytes`.
        shape: the mask's shape (an int or a sequence of non-negative ints).
        label: context bytes separating independent masks under one seed (may be empty).

    Returns:
        A new ``uint64`` array of the given shape.

    Raises:
        TypeError: ``seed`` or ``label`` is not bytes-like, or ``shape`` is not an int or a sequence
            of ints.
        ValueError: ``seed`` is not 32 bytes or is all zero, or ``shape`` has a negative entry.
    """
    key_material = as_bytes(seed, "seed")
    if len(key_material) != MASK_SEED_BYTES:
        raise ValueError(f"seed must be exactly {MASK_SEED_BYTES} bytes, got {len(key_material)}")
    if not any(key_material):
        raise ValueError("seed is all zero bytes; use a secret seed such as secrets.token_bytes(32)")
    context = as_bytes(label, "label")
    dims = _normalise_shape(shape)
    info = (
        _MASK_INFO
        + len(dims).to_bytes(4, "little")
        + b"".join(d.to_bytes(8, "little") for d in dims)
        + context
    )
    key = HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=info).derive(key_material)
    count = int(np.prod(dims, dtype=np.int64))
    encryptor = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor()
    stream = encryptor.update(bytes(8 * count)) + encryptor.finalize()
    return np.frombuffer(stream, dtype="<u8").astype(np.uint64).reshape(dims)


def pair_clients(n: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """Choose, for each of ``n`` clients, the neighbour it sends its random share to.

    Returns ``dest`` with ``dest[i]`` the recipient of client ``i``'s random share. ``dest`` is a
    permutation of ``0 … n-1`` forming a **single cycle** through all clients (a cyclic shift along
    a uniformly random ordering ``π``: ``dest[π_j] = π_{j+1 mod n}``), so no client sends to itself
    and each receives exactly one share. The result is a deterministic function of ``rng``'s state;
    seed it from the run seed (e.g. :func:`fedgraphrec.seeding.numpy_rng`) so all parties agree.

    The GNN4FR upload scheme built on it: client ``i`` encodes ``k_i`` and splits it as
    ``k_i = r_i + (k_i - r_i)`` (:func:`split` with two shares, or ``r_i`` from
    :func:`mask_from_seed`), sends ``r_i`` to ``dest[i]`` (encrypted with ``S`` via the server) and
    uploads ``u_i = (k_i - r_i) + r_{src(i)}``, where ``src = dest⁻¹``. Then

    * ``Σ_i u_i = Σ_i k_i`` (mod ``2^64``), since ``dest`` is a permutation and every ``r_i`` is
      added once and subtracted once; :func:`reconstruct` over the uploads gives the aggregate;
    * no single upload reveals a client's value: ``u_i`` contains the uniform ``r_{src(i)}``, which
      the server never sees in the clear. Because ``dest`` is one cycle, the same holds for the sum
      over any proper subset of clients (a permutation with several cycles would let the server
      add the uploads of one cycle and learn that cycle's total);
    * the threat model is an honest-but-curious server not colluding with clients: the server
      together with clients ``src(i)`` and ``dest(i)`` can recover ``k_i``. With ``n = 2`` each
      client learns the other's value from the aggregate anyway.

    Args:
        n: number of clients, at least 2.
        rng: the generator for the random ordering.

    Returns:
        An ``int64`` array of length ``n``.

    Raises:
        TypeError: ``n`` is not an int or ``rng`` is not a :class:`numpy.random.Generator`.
        ValueError: ``n < 2`` (a client cannot share with itself).
    """
    count = _check_count(n, "n", 2)
    gen = _check_rng(rng)
    order = gen.permutation(count).astype(np.int64)
    dest = np.empty(count, dtype=np.int64)
    dest[order] = np.roll(order, -1)
    return dest
