"""The client side of the group-key agreement (LP-GCN's Algorithm 2), shared by every protocol using it.

Every client makes an X25519 key pair and sends its public key; one client (the key holder) draws the
shared key :math:`S` and wraps it for every public key (ECIES, :func:`~fedgraphrec.crypto.ecies.wrap_key`);
each client unwraps its copy. The server relays public keys and wrapped keys only. In ``accounted``
mode (``real=False``) no key is drawn and zero bytes of the exact sizes stand in, so both modes book
the same traffic. GNN4FR and FedPerGNN run these steps as they are (LP-GCN interleaves them with its
own roster checks); the rounds around them stay with each protocol.
"""

from __future__ import annotations

from collections.abc import Sequence

from fedgraphrec.crypto.agreement import PUBLIC_KEY_BYTES, ClientKeyPair, PublicKey
from fedgraphrec.crypto.ecies import sealed_size, unwrap_key, wrap_key
from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.keys import SharedKey

__all__ = ["WRAPPED_KEY_BYTES", "client_keys", "unwrap_all", "wrap_for_all"]

WRAPPED_KEY_BYTES = sealed_size(PUBLIC_KEY_BYTES)
"""Size of one wrapped :math:`S` (a 32-byte key sealed for one public key)."""


def client_keys(n: int, real: bool) -> tuple[bytes, list[bytes]]:
    """``n`` fresh key pairs: the private keys (concatenated, kept by the node) and the public keys."""
    if not real:
        return b"", [bytes(PUBLIC_KEY_BYTES)] * n
    pairs = [ClientKeyPair.generate() for _ in range(n)]
    return b"".join(p.private_bytes() for p in pairs), [p.public.to_bytes() for p in pairs]


def wrap_for_all(public_keys: bytes, real: bool) -> tuple[bytes, list[bytes]]:
    """The key holder draws :math:`S` and wraps it for every client (``public_keys``: 32 bytes each).

    Returns :math:`S` (empty when not ``real``) and one wrapped copy per public key, in their order.
    """
    n = len(public_keys) // PUBLIC_KEY_BYTES
    if not real:
        return b"", [bytes(WRAPPED_KEY_BYTES)] * n
    raw = SharedKey.generate().to_bytes()
    width = PUBLIC_KEY_BYTES
    keys = (PublicKey.from_bytes(public_keys[k * width : (k + 1) * width]) for k in range(n))
    return raw, [wrap_key(raw, pk) for pk in keys]


def unwrap_all(
    wrapped: Sequence[bytes | None], private_keys: bytes, real: bool, *, phase: str, clients: Sequence[int]
) -> bytes | None:
    """Every client of a node unwraps its copy of :math:`S`; all must be the same key.

    Args:
        wrapped: the ``k``-th client's wrapped key at ``k`` (``None`` where it never arrived).
        private_keys: the node's private keys, concatenated in the same order (:func:`client_keys`).
        real: whether keys are real (otherwise nothing is unwrapped and ``None`` is returned).
        phase: the phase that delivered the keys, named in errors.
        clients: the clients' ids, named in errors.

    Raises:
        IntegrityError: naming ``phase``, when a wrapped key is missing, does not open, or two
            clients got different keys.
    """
    if not real:
        return None
    got: set[bytes] = set()
    width = PUBLIC_KEY_BYTES
    for k, blob in enumerate(wrapped):
        if blob is None:
            raise IntegrityError(f"{phase}: the wrapped key for client:{clients[k]} never arrived")
        got.add(unwrap_key(blob, ClientKeyPair.from_private_bytes(private_keys[k * width : (k + 1) * width])))
    if len(got) != 1:
        raise IntegrityError(f"{phase}: the clients of this node unwrapped {len(got)} different shared keys")
    return got.pop()
