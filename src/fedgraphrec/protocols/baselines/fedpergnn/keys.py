"""The clients' token key :math:`S`, agreed through the server without the server learning it.

As LP-GCN's Algorithm 2: every client makes an X25519 key pair and sends its public key; the server
relays all of them to the key holder (client 0), which draws :math:`S` and wraps it for every
client (ECIES, :func:`~fedgraphrec.crypto.wrap_key`); the server relays each wrapped key to its
client, which unwraps it. The clients' steps are :mod:`fedgraphrec.crypto.group_key`'s; this
module holds the key holder's id and the server's three rounds. The server handles only public keys
and wrapped keys. In ``accounted`` mode no key is drawn and zero bytes of the exact sizes stand in,
so both modes book the same ledger. (The wrapped keys travel as ``plain`` parts: they are
public-key ciphertexts by construction; the transport has nothing to seal.)
"""

from __future__ import annotations

import numpy as np

from fedgraphrec.protocols.baselines.fedpergnn import roles as R
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part
from fedgraphrec.runtime.transport import Transport

__all__ = ["KEY_HOLDER_ID", "agree_token_key"]

KEY_HOLDER_ID = 0
"""The client that draws :math:`S` (``u_c`` of LP-GCN's Algorithm 2)."""


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
