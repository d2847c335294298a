"""Set-up steps shared by the protocols that key items and embeddings under one symmetric key S.

LP-GCN (Algorithm 2) and GNN4FR (Algorithm 2) start the same way: every client makes an asymmetric
key pair, one client draws :math:`S` and wraps it for everybody through the server, and every
client uploads deterministic tokens of its item IDs so the server can build the item graph without
learning an ID. Both steps record their messages in the runtime's ledger; in ``real`` crypto mode
they run the cryptography for real.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from fedgraphrec.crypto import ClientKeyPair, ItemTokenizer, SharedKey, sealed_size, unwrap_key, wrap_key
from fedgraphrec.runtime import Network

__all__ = [
    "CLIENT",
    "KEY_HOLDER",
    "SERVER",
    "TOKEN_BYTES",
    "KeySetup",
    "distribute_shared_key",
    "upload_item_tokens",
]

PUBLIC_KEY_BYTES = 32
TOKEN_BYTES = 16
SERVER = "server"
CLIENT = "client"
KEY_HOLDER = "key-client"  # u_c of Algorithm 2, who draws the shared key S


@dataclass(frozen=True)
class KeySetup:
    """The shared key and the clients' key pairs (both ``None`` in ``accounted`` mode)."""

    shared_key: SharedKey | None
    keypairs: list[ClientKeyPair] | None


def distribute_shared_key(n: int, net: Network, key_client: int) -> KeySetup:
    """Public keys up, all of them to ``key_client``, which wraps a fresh S for every client.

    The server relays everything and never sees S: it only handles public keys and wrapped keys.
    """
    clients = np.arange(n)
    net.transmit(
        "setup/public-keys",
        CLIENT,
        SERVER,
        np.full(n, PUBLIC_KEY_BYTES),
        kind="public_key",
        protected=False,
        senders=clients,
    )
    net.transmit(
        "setup/public-keys",
        SERVER,
        KEY_HOLDER,
        n * PUBLIC_KEY_BYTES,
        kind="public_key",
        protected=False,
        receivers=np.array([key_client]),
    )
    wrapped_size = sealed_size(32)
    shared_key: SharedKey | None = None
    keypairs: list[ClientKeyPair] | None = None
    wrapped: list[bytes] | None = None
    if net.real:
        keypairs = [ClientKeyPair.generate() for _ in range(n)]
        shared_key = SharedKey.generate()
        wrapped = [wrap_key(shared_key.to_bytes(), kp.public) for kp in keypairs]
        wrapped_size = len(wrapped[0])
    net.transmit(
        "setup/wrapped-key",
        KEY_HOLDER,
        SERVER,
        np.full(n, wrapped_size),
        kind="wrapped_key",
        protected=True,
        payloads=wrapped,
        senders=np.full(n, key_client),
    )
    delivered = net.transmit(
        "setup/wrapped-key",
        SERVER,
        CLIENT,
        np.full(n, wrapped_size),
        kind="wrapped_key",
        protected=True,
        payloads=wrapped,
        receivers=clients,
    )
    if keypairs is not None and delivered is not None and shared_key is not None:
        for kp, blob in zip(keypairs, delivered, strict=True):
            if unwrap_key(blob, kp) != shared_key.to_bytes():
                raise RuntimeError("a client unwrapped a different shared key")
    return KeySetup(shared_key, keypairs)


def upload_item_tokens(
    holdings: sp.csr_matrix, net: Network, shared_key: SharedKey | None, order_rng: np.random.Generator
) -> np.ndarray:
    """Every client uploads the tokens of its held items; returns the server's column of each item.

    Each client uploads its tokens in an order of its own (``order_rng``), so the order reveals
    nothing, and the server numbers tokens by first appearance, so its numbering does not depend on
    token values (fresh every run): the same seed gives the same server view in both crypto modes.
    Items nobody holds are unknown to the server and get the remaining column ids.
    """
    n, m = holdings.shape
    held = np.diff(holdings.indptr)
    rows = np.repeat(np.arange(n), held)
    upload = holdings.indices[np.lexsort((order_rng.random(len(rows)), rows))]
    token_payloads: list[bytes] | None = None
    token_of_item = np.full(m, -1, dtype=np.int64)
    if shared_key is not None:
        item_tokens = ItemTokenizer(shared_key).tokens(np.arange(m))
        uploaded = [item_tokens[i] for i in upload]
        token_payloads = [
            b"".join(uploaded[a:b]) for a, b in zip(holdings.indptr[:-1], holdings.indptr[1:], strict=True)
        ]
        first_seen: dict[bytes, int] = {}
        for tok in uploaded:  # what the server does: number tokens by first appearance
            first_seen.setdefault(tok, len(first_seen))
        for i, tok in enumerate(item_tokens):
            token_of_item[i] = first_seen.get(tok, -1)
    else:  # accounted mode: the same numbering, with item ids standing in for tokens
        _, first = np.unique(upload, return_index=True)
        token_of_item[np.unique(upload)] = np.argsort(np.argsort(first))
    unheld = token_of_item < 0
    token_of_item[unheld] = np.arange(int((~unheld).sum()), m)
    net.transmit(
        "setup/item-tokens",
        CLIENT,
        SERVER,
        held * TOKEN_BYTES,
        kind="item_token",
        protected=True,
        payloads=token_payloads,
        senders=np.arange(n),
    )
    return token_of_item
