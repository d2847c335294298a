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
``uint64`` arrays and never see floats; :class:`FixedPoint` is the only place rounding happens. It
lives in :mod:`~fedgraphrec.crypto.fixed_point` and the ring type in :mod:`~fedgraphrec.crypto.ring`;
both are re-exported here (with :data:`DEFAULT_FRAC_BITS` and :data:`RING_BITS`) for existing callers.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from numpy.typing import NDArray

from fedgraphrec.crypto._primitives import KEY_BYTES, as_bytes
from fedgraphrec.crypto.ring import UInt64Array, _check_count, _check_ring_array

__all__ = ["MASK_SEED_BYTES", "mask_from_seed", "pair_clients", "reconstruct", "split"]

MASK_SEED_BYTES = KEY_BYTES
"""Length of a :func:`mask_from_seed` seed (256 bits)."""
_MASK_INFO = b"fedgraphrec/mask/v1"


def _check_rng(rng: object) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


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
