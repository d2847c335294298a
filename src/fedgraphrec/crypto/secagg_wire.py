"""What both sides of secure aggregation derive alike: message formats and sizes, pairwise keys and masks.

:class:`~fedgraphrec.crypto.secagg_client.SecAggClient` and
:class:`~fedgraphrec.crypto.secagg_server.SecAggServer` (the protocol is described in
:mod:`fedgraphrec.crypto.secagg`) must agree byte for byte on the stage-0 message
(:class:`AdvertisedKeys`), on the sizes every stage transmits, and on how a pair of advertised keys
becomes a share channel and a pairwise mask (the server rebuilds a dropped client's masks the way
the client made them). Keeping these in one module lets the client and the server each live in
their own. :mod:`fedgraphrec.crypto.secagg` re-exports the public names for existing callers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from fedgraphrec.crypto._primitives import KEY_BYTES
from fedgraphrec.crypto.aead import ciphertext_size
from fedgraphrec.crypto.agreement import ClientKeyPair, PublicKey
from fedgraphrec.crypto.errors import CryptoError
from fedgraphrec.crypto.ring import UInt64Array
from fedgraphrec.crypto.shamir import SHARE_BYTES
from fedgraphrec.crypto.sharing import mask_from_seed

__all__ = [
    "ADVERTISE_BYTES",
    "SHARE_MESSAGE_BYTES",
    "UNMASK_ENTRY_BYTES",
    "AdvertisedKeys",
    "SecAggAbortError",
]

_ID_BYTES = 4
ADVERTISE_BYTES = _ID_BYTES + 2 * KEY_BYTES
"""Stage 0 message: client id and its two public keys."""
_SHARE_PLAINTEXT = 2 * _ID_BYTES + 2 * SHARE_BYTES
SHARE_MESSAGE_BYTES = _ID_BYTES + ciphertext_size(_SHARE_PLAINTEXT)
"""Stage 1 message: recipient id and the AEAD ciphertext of ``(u, v, share of s_u, share of b_u)``."""
UNMASK_ENTRY_BYTES = _ID_BYTES + SHARE_BYTES
"""Stage 3, per revealed share: whose secret it is and the share."""
_SHARE_INFO = b"fedgraphrec/secagg/share-channel/v1"
_MASK_INFO = b"fedgraphrec/secagg/pair-mask/v1"


class SecAggAbortError(CryptoError):
    """Secure aggregation cannot finish: too few clients are left to meet the threshold."""


@dataclass(frozen=True)
class AdvertisedKeys:
    """Stage-0 message of one client."""

    client: int
    c_pk: PublicKey
    s_pk: PublicKey

    def to_bytes(self) -> bytes:
        """Wire form: id (u32 LE) ‖ ``c_pk`` ‖ ``s_pk`` (:data:`ADVERTISE_BYTES`)."""
        return self.client.to_bytes(_ID_BYTES, "little") + self.c_pk.to_bytes() + self.s_pk.to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> AdvertisedKeys:
        """Inverse of :meth:`to_bytes` (raises ``ValueError`` on a wrong length or an invalid key)."""
        if len(data) != ADVERTISE_BYTES:
            raise ValueError(f"an advertised-keys message is {ADVERTISE_BYTES} bytes, got {len(data)}")
        client = int.from_bytes(data[:_ID_BYTES], "little")
        return cls(
            client,
            PublicKey.from_bytes(data[_ID_BYTES : _ID_BYTES + KEY_BYTES]),
            PublicKey.from_bytes(data[_ID_BYTES + KEY_BYTES :]),
        )


def _check_id(client: int) -> int:
    if isinstance(client, bool) or not isinstance(client, int | np.integer):
        raise TypeError(f"client ids must be ints, got {type(client).__name__}")
    if not 0 <= int(client) < 2**31 - 2:
        raise ValueError(f"client ids must be in [0, 2**31 - 2), got {client}")
    return int(client)


def _pair_info(a: PublicKey, b: PublicKey, purpose: bytes, label: bytes) -> bytes:
    lo, hi = sorted((a.to_bytes(), b.to_bytes()))
    return purpose + len(label).to_bytes(4, "little") + label + lo + hi


def _channel(own: ClientKeyPair, peer: PublicKey, label: bytes) -> AESGCM:
    return AESGCM(own.agree(peer, _pair_info(own.public, peer, _SHARE_INFO, label)))


def _share_aad(sender: int, recipient: int, label: bytes) -> bytes:
    return sender.to_bytes(_ID_BYTES, "little") + recipient.to_bytes(_ID_BYTES, "little") + label


def _pair_mask(
    own: ClientKeyPair, own_id: int, peer: PublicKey, peer_id: int, length: int, label: bytes
) -> UInt64Array:
    """``σ(own, peer) · PRG(s_{own,peer})``: the pairwise mask ``own`` adds towards ``peer``."""
    seed = own.agree(peer, _pair_info(own.public, peer, _MASK_INFO, label))
    mask = mask_from_seed(seed, length, label)
    return mask if own_id < peer_id else np.zeros_like(mask) - mask
