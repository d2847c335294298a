"""Fixed-point encoding of real numbers into the ring ``Z_{2^64}``: :class:`FixedPoint`.

Secret sharing and secure aggregation add ring elements exactly; :class:`FixedPoint` is the only
place where floats are rounded into ring elements and read back, so its algebraic contract (round
trip, encodable range, exact sums) is stated and checked in one place. The ring type and its checks
come from :mod:`~fedgraphrec.crypto.ring`; :mod:`~fedgraphrec.crypto.sharing` re-exports
:class:`FixedPoint` and :data:`DEFAULT_FRAC_BITS` for existing callers.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from fedgraphrec.crypto.ring import RING_BITS, UInt64Array, _check_count, _check_ring_array

if TYPE_CHECKING:
    import torch

__all__ = ["DEFAULT_FRAC_BITS", "FixedPoint"]

DEFAULT_FRAC_BITS = 32
"""Default number of fractional bits: resolution ``2^-32`` ≈ 2.3e-10, encodable range ``|x| < 2^30``."""

_HEADROOM_BITS = 62
"""Encodings satisfy ``|k| < 2^62``: one bit below the signed range ``[-2^63, 2^63)``."""
_MAX_FRAC_BITS = _HEADROOM_BITS - 1
_FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


def _index_of(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The multi-index of C-order position ``flat`` in an array of ``shape``, as plain ints."""
    return tuple(int(i) for i in np.unravel_index(flat, shape))


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
