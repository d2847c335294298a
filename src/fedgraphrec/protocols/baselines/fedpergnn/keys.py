"""The clients' token key :math:`S`, agreed through the server without the server learning it.

As LP-GCN's Algorithm 2: every client makes an X25519 key pair and sends its public key; the server
relays all of them to the key holder (client 0), which draws :math:`S` and wraps it for every
client (ECIES, :func:`~fedgraphrec.crypto.wrap_key`); the server relays each wrapped key to its
client, which unwraps it. The server handles only public keys and wrapped keys. In ``accounted``
mode no key is drawn and zero bytes of the exact sizes stand in, so both modes book the same
ledger. (The wrapped keys travel as ``plain`` parts: they are public-key ciphertexts by
construction; the transport has nothing to seal.)
"""

from __future__ import annotations

import numpy as np

from fedgraphrec.crypto import (
    ClientKeyPair,
    IntegrityError,
    PublicKey,
    SharedKey,
    sealed_size,
    unwrap_key,
    wrap_key,
)
from fedgraphrec.protocols.baselines.fedpergnn import roles as R
from fedgraphrec.runtime.message import Message, Part
from fedgraphrec.runtime.transport import Transport

__all__ = ["KEY_HOLDER_ID", "agree_token_key", "client_keys", "unwrap_all", "wrap_for_all"]

KEY_HOLDER_ID = 0
"""The client that draws :math:`S` (``u_c`` of LP-GCN's Algorithm 2)."""
_PUBLIC = 32
_WRAPPED = sealed_size(32)


# ---------------------------------------------------------------------- client side
def client_keys(n: int, real: bool) -> tuple[bytes, list[bytes]]:
    """``n`` fresh key pairs: the private keys (concatenated, kept by the node) and the public keys."""
    if not real:
        return b"", [bytes(_PUBLIC)] * n
    pairs = [ClientKeyPair.generate() for _ in range(n)]
    return b"".join(p.private_bytes() for p in pairs), [p.public.to_bytes() for p in pairs]


def wrap_for_all(public_keys: bytes, real: bool) -> tuple[bytes, list[bytes]]:
    """The key holder draws :math:`S` and wraps it for every client (``public_keys``: 32 bytes each)."""
    n = len(public_keys) // _PUBLIC
    if not real:
        return b"", [bytes(_WRAPPED)] * n
    key = SharedKey.generate()
    raw = key.to_bytes()
    keys = (PublicKey.from_bytes(public_keys[k * _PUBLIC : (k + 1) * _PUBLIC]) for k in range(n))
    return raw, [wrap_key(raw, pk) for pk in keys]


def unwrap_all(wrapped: list[bytes], private_keys: bytes, real: bool) -> bytes | None:
    """Every client of the node unwraps its copy; all must be the same :math:`S`.

    Raises:
        IntegrityError: a wrapped key does not open, or two clients got different keys.
    """
    if not real:
        return None
    got: set[bytes] = set()
    for k, blob in enumerate(wrapped):
        pair = ClientKeyPair.from_private_bytes(private_keys[k * _PUBLIC : (k + 1) * _PUBLIC])
        got.add(unwrap_key(blob, pair))
    if len(got) != 1:
        raise IntegrityError(
            f"{R.PH_WRAPPED_KEY}: the clients of this node unwrapped {len(got)} different keys"
        )
    return got.pop()


# ---------------------------------------------------------------------- server side
def agree_token_key(transport: Transport, shards: dict[int, np.ndarray]) -> None:
    """The three set-up rounds (public keys up, wrap at the key holder, wrapped keys down)."""
    nodes = transport.nodes
    ups = transport.round(R.ST_KEYS, {n: Message() for n in nodes})
    keys = Part.concat([ups[n][R.P_PUBLIC_KEYS] for n in nodes])
    assert keys.senders is not None
    order = np.argsort(keys.senders, kind="stable")
    bundle = b"".join(keys.value[k] for k in order.tolist())
    holder = next(n for n, ids in shards.items() if KEY_HOLDER_ID in ids)
    request = Part(
        R.PH_PUBLIC_KEYS, R.K_PUBLIC_KEY, R.SERVER, R.KEY_HOLDER, [bundle], shape="blobs",
        receivers=np.array([KEY_HOLDER_ID]),
    )  # fmt: skip
    wrapped = transport.round(R.ST_WRAP, {holder: Message({R.P_PUBLIC_KEYS: request})})[holder][R.P_WRAPPED]
    clients = np.sort(keys.senders)  # the i-th wrapped key is for the i-th client in id order
    transport.round(
        R.ST_UNWRAP,
        {
            n: Message({R.P_WRAPPED: wrapped.forward(np.searchsorted(clients, ids), ids, R.CLIENT)})
            for n, ids in shards.items()
        },
    )
