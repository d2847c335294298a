r"""Deterministic item-ID tokens ``S(ID_i)`` for LP-GCN's encrypted global graph.

The server must recognise equal items across clients (to build the bipartite graph of Algorithm 3)
without learning item IDs (spec ``lpgcn.md`` §3). Every client therefore maps an item ID to

.. math::

    \tau(i) = \mathrm{HMAC\text{-}SHA256}_{K_t}(\mathrm{u64_{be}}(i))[0:16],
    \qquad K_t = \mathrm{HKDF}(S, \text{"item-token"}),

which is deterministic (equal IDs give equal tokens under the same ``S``) and, since HMAC-SHA256
is a PRF (Bellare, CRYPTO 2006), indistinguishable from a random function to anyone without ``S``:
the server learns only the equality pattern of the IDs, which LP-GCN needs and reveals by design.
Tokens under different keys are unrelated. Clients holding ``S`` can invert tokens by tokenizing
the (small) ID space; this is inherent to the protocol (spec §7, collusion caveat).

Collision bound: for ``n`` distinct IDs, the probability that two of them share a token is at most
``n(n-1)/2^(b+1)`` plus the PRF advantage, with ``b`` the compared bits. For the 128-bit tokens
that is below ``2^-65`` for ``n = 2^32``; for the 64-bit :meth:`ItemTokenizer.token_ints` it is
about ``2.7e-8`` for ``n = 10^6`` items and ``2.7e-6`` for ``n = 10^7``.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
from cryptography.hazmat.primitives import hashes, hmac

from fedgraphrec.crypto.keys import SharedKey

__all__ = ["TOKEN_BYTES", "ItemTokenizer"]

TOKEN_BYTES = 16
"""Length of an item token (128 bits of HMAC-SHA256)."""

_HASHED_ID_BYTES = 8
"""An item id as the tokenizer hashes it (u64, big endian; never sent)."""
_INT_BYTES = 8
_MAX_ID = 2**63 - 1


def _id_buffer(item_ids: npt.ArrayLike) -> bytes:
    """Validated IDs as concatenated 8-byte big-endian unsigned integers."""
    ids = np.asarray(item_ids)
    if ids.ndim != 1:
        raise ValueError(f"item_ids must be one-dimensional, got shape {ids.shape}")
    if ids.size == 0:
        return b""
    if ids.dtype.kind not in "iu":
        raise TypeError(f"item_ids must have an integer dtype, got {ids.dtype}")
    if ids.dtype.kind == "i" and ids.min() < 0:
        raise ValueError(f"item IDs must be non-negative, got {int(ids.min())}")
    if ids.dtype.kind == "u" and int(ids.max()) > _MAX_ID:
        raise ValueError(f"item IDs must be at most 2**63 - 1, got {int(ids.max())}")
    return ids.astype(">u8", copy=False).tobytes()


class ItemTokenizer:
    """Deterministic 16-byte tokens of item IDs under the shared key ``S`` (module docstring).

    ``ItemTokenizer(S).token(i) == ItemTokenizer(S).token(j)`` iff ``i == j`` (up to the collision
    bound); tokens under another key are unrelated. The batch method :meth:`tokens` returns a
    ``list[bytes]`` rather than a NumPy ``S16`` array, because NumPy strips trailing NUL bytes from
    ``S`` elements and would silently corrupt tokens ending in ``0x00``; ``bytes`` are also hashable,
    so the server can group by them in a ``dict``. For vectorised grouping use :meth:`token_ints`.

    Args:
        shared_key: the shared key ``S``; the tokens are keyed with ``S.subkey("item-token")``.

    Raises:
        TypeError: ``shared_key`` is not a :class:`~fedgraphrec.crypto.keys.SharedKey`.
    """

    __slots__ = ("_hmac",)

    def __init__(self, shared_key: SharedKey) -> None:
        if not isinstance(shared_key, SharedKey):
            raise TypeError(f"shared_key must be a SharedKey, got {type(shared_key).__name__}")
        # The keyed HMAC state is computed once; every token copies it (no per-ID key schedule).
        self._hmac = hmac.HMAC(shared_key.subkey("item-token"), hashes.SHA256())

    def _digests(self, buffer: bytes) -> Iterator[bytes]:
        base = self._hmac
        view = memoryview(buffer)
        for start in range(0, len(buffer), _HASHED_ID_BYTES):
            h = base.copy()
            h.update(view[start : start + _HASHED_ID_BYTES])
            yield h.finalize()

    def token(self, item_id: int) -> bytes:
        """The 16-byte token of one item ID.

        Args:
            item_id: a non-negative integer below ``2**63`` (Python or NumPy integer).

        Raises:
            TypeError: ``item_id`` is not an integer (``bool`` included).
            ValueError: ``item_id`` is negative or at least ``2**63``.
        """
        if isinstance(item_id, bool) or not isinstance(item_id, int | np.integer):
            raise TypeError(f"item_id must be an integer, got {type(item_id).__name__}")
        value = int(item_id)
        if not 0 <= value <= _MAX_ID:
            raise ValueError(f"item_id must be in [0, 2**63 - 1], got {value}")
        (digest,) = self._digests(value.to_bytes(_HASHED_ID_BYTES, "big"))
        return digest[:TOKEN_BYTES]

    def tokens(self, item_ids: npt.ArrayLike) -> list[bytes]:
        """Tokens of a batch of item IDs, in order; ``tokens(ids)[k] == token(ids[k])``.

        About 1 µs per ID (100 000 IDs in roughly 0.1 s on one core).

        Args:
            item_ids: one-dimensional integer array-like of IDs in ``[0, 2**63 - 1]``.

        Returns:
            One 16-byte token per ID.

        Raises:
            TypeError: ``item_ids`` is non-empty and not of an integer dtype.
            ValueError: ``item_ids`` is not one-dimensional or holds an out-of-range ID.
        """
        return [d[:TOKEN_BYTES] for d in self._digests(_id_buffer(item_ids))]

    def token_ints(self, item_ids: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """The first 8 bytes of each token as a signed big-endian ``int64``, for vectorised grouping.

        ``token_ints(ids)[k] == int.from_bytes(token(ids[k])[:8], "big", signed=True)``. A server
        that groups on these values compares 64 bits only: two distinct items among ``n`` collide
        with probability at most ``n(n-1)/2^65`` (about ``2.7e-8`` for a million items). Use
        :meth:`tokens` where that is too high.

        Args:
            item_ids: one-dimensional integer array-like of IDs in ``[0, 2**63 - 1]``.

        Returns:
            ``int64`` array with the same length as ``item_ids``.

        Raises:
            TypeError: ``item_ids`` is non-empty and not of an integer dtype.
            ValueError: ``item_ids`` is not one-dimensional or holds an out-of-range ID.
        """
        prefix = b"".join(d[:_INT_BYTES] for d in self._digests(_id_buffer(item_ids)))
        return np.frombuffer(prefix, dtype=">i8").astype(np.int64)

    def __repr__(self) -> str:
        return "ItemTokenizer(<keyed by a hidden shared key>)"
