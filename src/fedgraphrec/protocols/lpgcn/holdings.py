r"""What a client holds and how it names it: virtual items, upload order, item tokens.

Every draw here is per client, so a shard computes its clients' draws from their own rows alone
and the result does not depend on how clients are spread over nodes (one node or three give the
same token graph, assignment and ledger).

* Virtual items (Alg. 2 lines 8-11): :math:`\alpha` distinct items outside :math:`\mathcal I_u`,
  uniform. Seeded runs draw them from the public stream ``("lpgcn", "virtual")`` hashed with the
  client id (reproducible ledgers for research; anyone with the seed and :math:`S` can tell them
  from real items, ``SECURITY.md``); ``secure_virtual_items`` draws them from the OS CSPRNG.
* Upload order: each client uploads its tokens in an order of its own (stream
  ``("lpgcn", "upload-order")`` or the CSPRNG), so the order reveals nothing.
* Tokens: 16 bytes per item, HMAC under :math:`S` in ``real`` mode; in ``accounted`` mode the item
  id itself stands in (little-endian, zero-padded), so both modes build the same server view.
"""

from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp

from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.crypto.tokens import TOKEN_BYTES, ItemTokenizer
from fedgraphrec.protocols.common import CLIENT
from fedgraphrec.protocols.lpgcn.lookup import WordIndex
from fedgraphrec.protocols.lpgcn.roles import CONV_CLIENT
from fedgraphrec.runtime.sealing import Binding, party
from fedgraphrec.seeding import child_seed, numpy_rng

__all__ = [
    "TokenIndex",
    "item_tokens",
    "key_client_of",
    "keyed",
    "token_order",
    "upload_order",
    "verification_aad",
    "virtual_items",
]

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijection of 64-bit words with full avalanche (public hashing)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


def _stream_words(seed: int, name: str, clients: np.ndarray, counters: np.ndarray) -> np.ndarray:
    """Word ``counters[k]`` of client ``clients[k]``'s public stream ``("lpgcn", name)``."""
    key = np.uint64(int(child_seed(seed, "lpgcn", name).generate_state(1, dtype=np.uint64)[0]))
    with np.errstate(over="ignore"):
        x = _mix(key ^ _mix(clients.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)))
        return _mix(x + counters.astype(np.uint64) * np.uint64(0xD1B54A32D192ED03))


def _secret_words(size: int) -> np.ndarray:
    return np.frombuffer(os.urandom(8 * int(size)), dtype=np.uint64).copy()


def virtual_items(
    real: sp.csr_matrix, clients: np.ndarray, alpha: int, seed: int, secret: bool
) -> sp.csr_matrix:
    r""":math:`\alpha` distinct virtual items per client (row ``k`` is client ``clients[k]``'s).

    Vectorised rejection sampling over the shard; a client holding more than :math:`m-\alpha`
    items gets all its non-held items. Draw ``j`` of client ``u`` is word ``j`` of ``u``'s stream
    (or a CSPRNG word), modulo :math:`m` (bias below :math:`m/2^{64}`).
    """
    s, m = real.shape
    if alpha <= 0 or s == 0:
        return sp.csr_matrix((s, m), dtype=np.float32)
    deg = np.diff(real.indptr)
    need = np.minimum(alpha, m - deg).astype(np.int64)
    real_keys = np.repeat(np.arange(s, dtype=np.int64), deg) * m + real.indices
    chosen = np.zeros(0, dtype=np.int64)
    used = np.zeros(s, dtype=np.int64)  # words consumed per client
    have = np.zeros(s, dtype=np.int64)
    while (todo := np.flatnonzero(have < need)).size:
        k = 2 * (need[todo] - have[todo]) + 2
        rows = np.repeat(todo, k)
        counter = used[rows] + (np.arange(len(rows)) - np.repeat(np.cumsum(k) - k, k))
        used[todo] += k
        words = _secret_words(len(rows)) if secret else _stream_words(seed, "virtual", clients[rows], counter)
        keys = rows * m + (words % np.uint64(m)).astype(np.int64)
        ok = ~np.isin(keys, real_keys) & ~np.isin(keys, chosen)
        keys = keys[ok]
        _, first = np.unique(keys, return_index=True)
        keys = keys[np.sort(first)]  # first draws first, per client
        u = keys // m
        order = np.argsort(u, kind="stable")
        keys, u = keys[order], u[order]
        rank = np.arange(len(u)) - np.searchsorted(u, u)
        take = rank < (need[u] - have[u])
        chosen = np.concatenate([chosen, keys[take]])
        np.add.at(have, u[take], 1)
    chosen.sort()
    return sp.csr_matrix((np.ones(len(chosen), dtype=np.float32), (chosen // m, chosen % m)), shape=(s, m))


def upload_order(
    held: sp.csr_matrix, clients: np.ndarray, seed: int, secret: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Each client's held items in its own random order: ``(indptr, items)`` (CSR layout)."""
    rows = np.repeat(np.arange(held.shape[0], dtype=np.int64), np.diff(held.indptr))
    if secret:
        words = _secret_words(len(rows))
    else:
        words = _stream_words(seed, "upload-order", clients[rows], held.indices.astype(np.int64))
    order = np.lexsort((words, rows))
    return held.indptr.astype(np.int64), held.indices[order].astype(np.int64)


def item_tokens(items: np.ndarray, key: SharedKey | None) -> np.ndarray:
    """The tokens of ``items`` as a ``(k, 16)`` uint8 array (HMAC under ``key``; ids without one)."""
    items = np.asarray(items, dtype=np.int64)
    if key is None:
        out = np.zeros((len(items), TOKEN_BYTES), dtype=np.uint8)
        out[:, :8] = items.astype("<i8").view(np.uint8).reshape(-1, 8)
        return out
    return np.frombuffer(b"".join(ItemTokenizer(key).tokens(items)), dtype=np.uint8).reshape(-1, TOKEN_BYTES)


class TokenIndex:
    """Position of each of a set of byte keys (tokens: 16 bytes), looked up in bulk.

    Args:
        tokens: ``(k, w)`` uint8 keys (the first occurrence wins for duplicates).
    """

    def __init__(self, tokens: np.ndarray) -> None:
        keys = _void(tokens)
        self._width = int(np.asarray(tokens).shape[1]) if np.asarray(tokens).ndim == 2 else TOKEN_BYTES
        self._order = np.argsort(keys, kind="stable")
        self._sorted = keys[self._order]
        self._rows = _rows(tokens, self._width)
        # fast path: the keys' first 8 bytes as one integer, hashed, when they tell every key apart
        # (HMAC tokens and item ids do); every hit is then confirmed on the whole key
        head = _head(self._rows)
        self._words = self._rows.view(np.uint64) if self._width % 8 == 0 else None
        self._fast = self._width >= 8 and len(np.unique(head)) == len(head)
        self._by_head = WordIndex(head) if self._fast else None

    def find(self, tokens: np.ndarray) -> np.ndarray:
        """Position of every key (``-1`` for keys not in the set)."""
        if not len(self._sorted):
            return np.full(len(_void(tokens, self._width)), -1, dtype=np.int64)
        if self._fast:
            rows = _rows(tokens, self._width)
            by_head = self.__dict__.get("_by_head")
            if by_head is None:  # restored from a checkpoint written before the hash existed
                by_head = self._by_head = WordIndex(_head(self._rows))
            pos = by_head.find(_head(rows))
            hit = pos >= 0
            at = np.maximum(pos, 0)
            if self._words is not None:  # the whole key, not only its first bytes (8-byte words)
                words = rows.view(np.uint64)
                for j in range(1, words.shape[1]):
                    hit &= self._words[at, j] == words[:, j]
            else:
                hit &= (self._rows[at] == rows).all(axis=1)
            return np.where(hit, pos, -1)
        keys = _void(tokens, self._width)
        at = np.searchsorted(self._sorted, keys).clip(max=len(self._sorted) - 1)
        hit = self._sorted[at] == keys
        return np.where(hit, self._order[at], -1).astype(np.int64)


def _rows(tokens: np.ndarray, width: int) -> np.ndarray:
    """The keys as a contiguous ``(k, width)`` uint8 array."""
    return np.ascontiguousarray(np.asarray(tokens, dtype=np.uint8).reshape(-1, width))


def _head(rows: np.ndarray) -> np.ndarray:
    """The first 8 bytes of every key as one unsigned integer (an empty array for narrower keys)."""
    if rows.shape[1] < 8:
        return np.zeros(len(rows), dtype=np.uint64)
    return np.ascontiguousarray(rows[:, :8]).view(np.uint64).ravel()


def token_order(tokens: np.ndarray) -> np.ndarray:
    """Positions of ``tokens`` sorted by their bytes: the public order of the item catalogue (§4.6)."""
    return np.argsort(_void(tokens), kind="stable").astype(np.int64)


def _void(tokens: np.ndarray, width: int | None = None) -> np.ndarray:
    arr = np.asarray(tokens, dtype=np.uint8)
    w = width or (int(arr.shape[1]) if arr.ndim == 2 else TOKEN_BYTES)
    arr = np.ascontiguousarray(arr.reshape(-1, w))
    return arr.view(np.dtype((np.void, w))).ravel()


def keyed(prefix: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """``(k, 8 + w)`` keys: a big-endian int64 prefix (e.g. a client) before each token."""
    head = np.asarray(prefix, dtype=">i8").view(np.uint8).reshape(-1, 8)
    body = np.asarray(tokens, dtype=np.uint8)
    width = int(body.shape[1]) if body.ndim == 2 else TOKEN_BYTES
    return np.concatenate([head, body.reshape(len(head), width)], axis=1)


def verification_aad(answerer: int, asker: int, question: bytes) -> bytes:
    """Associated data of a verification answer: phase, sender, receiver and the item token asked.

    Binding the token stops the server from swapping two answers of one holder to one
    convolution-client (the answers would then describe the wrong items); binding the parties
    stops it from re-routing an answer to another asker.
    """
    b = Binding("lpgcn", "setup/verification-answer", -1)
    return b.aad(party(CLIENT, answerer), party(CONV_CLIENT, asker)) + b"|" + question


def key_client_of(seed: int, n_clients: int) -> int:
    """The key-client (Algorithm 2 line 5): drawn from the public stream ``("lpgcn", "setup")``.

    Public by design (it hides nothing): every node derives it too, so a server cannot send the
    key-client's set-up stages to another node or name another key-client.
    """
    return int(numpy_rng(seed, "lpgcn", "setup").integers(0, n_clients))
