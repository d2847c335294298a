"""The ring ``Z_{2^64}`` that fixed-point encoding, additive sharing and secure aggregation share.

Ring elements are ``numpy.uint64`` values, whose array arithmetic wraps modulo ``2^64``. This module
holds the element type (:data:`UInt64Array`) and the argument checks every ring-level function uses,
so :mod:`~fedgraphrec.crypto.fixed_point` (floats to ring elements) and
:mod:`~fedgraphrec.crypto.sharing` (sharing and masking ring elements) build on one definition
without depending on each other.
"""

from __future__ import annotations

from typing import TypeAlias

import numpy as np
from numpy.typing import NDArray

__all__ = ["RING_BITS", "UInt64Array"]

RING_BITS = 64
"""Ring elements are integers modulo ``2^RING_BITS``, stored as ``numpy.uint64``."""

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
