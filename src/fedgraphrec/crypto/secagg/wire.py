"""Secure aggregation's wire: message formats and sizes, the stage vocabulary, pairwise keys and masks.

The protocol (Bonawitz et al., CCS 2017, honest-but-curious version) runs in four stages; the
client's and the server's state machines (:class:`~fedgraphrec.crypto.secagg.client.SecAggClient`,
:class:`~fedgraphrec.crypto.secagg.server.SecAggServer`) hold the cryptography of each, and
:mod:`fedgraphrec.protocols.secagg` runs them as transport rounds between a server and the nodes:

0. **Advertise keys** (:data:`ADVERTISE`). Client ``u`` draws two X25519 key pairs, ``c_u`` (to
   encrypt shares to other clients) and ``s_u`` (to agree mask seeds), and a 32-byte self-mask seed
   ``b_u``; it sends both public keys (:class:`AdvertisedKeys`). The server broadcasts the roster ``U1``.
1. **Share keys** (:data:`SHARE`). ``u`` Shamir-shares (:mod:`~fedgraphrec.crypto.shamir`) ``s_u``'s
   private key and ``b_u`` with threshold ``t`` among ``U1``, encrypts each share to its holder ``v``
   under AES-256-GCM with the key agreed from ``c_u, c_v``, and sends them through the server, which
   forwards them. ``U2`` = clients whose shares arrived.
2. **Masked input** (:data:`MASK`). ``u`` uploads
   ``y_u = x_u + PRG(b_u) + Σ_{v∈U2, v≠u} σ(u,v) PRG(s_{u,v})`` with ``σ(u,v) = +1`` if ``u < v``
   else ``-1``, where ``s_{u,v}`` is agreed from ``s_u, s_v`` and PRG is
   :func:`~fedgraphrec.crypto.sharing.mask_from_seed`. Pairwise masks cancel in the sum.
   ``U3`` = clients whose masked input arrived.
3. **Unmask** (:data:`UNMASK`). The server announces ``U3``. Each client still online sends, for
   every ``v ∈ U2``, its share of ``b_v`` if ``v ∈ U3`` or of ``s_v``'s private key if ``v`` dropped
   (never both for one ``v``). With ``t`` responses the server rebuilds the seeds, removes the self
   masks of ``U3`` and the pairwise masks that ``U3`` applied towards the dropped clients, and obtains
   ``Σ_{u∈U3} x_u``. Clients that drop *after* uploading are still summed.

Every stage needs ``t`` clients (:func:`require`, the one count check both sides use), or
:class:`SecAggAbortError`. Inputs are vectors over the ring ``Z_{2^64}`` (encode floats with
:class:`~fedgraphrec.crypto.fixed_point.FixedPoint`), so the sum is exact. Security rests on ``t``
exceeding the number of clients that can collude with the server; the original paper's
malicious-server variant (signatures, consistency checks) is not implemented. Every secret comes
from the operating system's CSPRNG.

Both sides must agree byte for byte on the messages, on the sizes every stage transmits (the
``*_BYTES`` constants below, which ``accounted`` crypto mode books for messages it does not build)
and on how a pair of advertised keys becomes a share channel and a pairwise mask (the server
rebuilds a dropped client's masks the way the client made them); hence this one module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from fedgraphrec.crypto.aead import ciphertext_size
from fedgraphrec.crypto.agreement import PUBLIC_KEY_BYTES, ClientKeyPair, PublicKey
from fedgraphrec.crypto.errors import CryptoError
from fedgraphrec.crypto.ring import UInt64Array
from fedgraphrec.crypto.shamir import SHARE_BYTES
from fedgraphrec.crypto.sharing import mask_from_seed

__all__ = [
    "ADVERTISE",
    "ADVERTISE_BYTES",
    "ID_BYTES",
    "MASK",
    "SHARE",
    "SHARE_MESSAGE_BYTES",
    "STAGES",
    "STAGE_TITLE",
    "UNMASK",
    "UNMASK_ENTRY_BYTES",
    "AdvertisedKeys",
    "SecAggAbortError",
    "check_id",
    "ids_from_bytes",
    "ids_to_bytes",
    "pair_mask",
    "require",
    "share_aad",
    "share_channel",
]

# ---------------------------------------------------------------------------- the stage vocabulary
STAGES: Final = ("advertise", "share", "mask", "unmask")
"""The four stages of one session, in order (module docstring): advertise keys, share keys, masked
input, unmask. Every name of a stage derives from these: the transport stage ``secagg/<stage>``
(:mod:`fedgraphrec.protocols.secagg.roles`), a node's session record and its refusals, and (through
:data:`STAGE_TITLE`) the ledger phases and abort messages."""
ADVERTISE, SHARE, MASK, UNMASK = STAGES
_TITLES = ("advertise-keys", "share-keys", "masked-input", "unmask")
STAGE_TITLE: Final = dict(zip(STAGES, _TITLES, strict=True))
"""Each stage's descriptive name: ledger phase suffix ``secagg-<title>``, message kind, abort messages."""

# ---------------------------------------------------------------------------- sizes on the wire
ID_BYTES: Final = 4
"""An id on the wire (a client id here; protocols send item ids alike): u32, little endian."""
ADVERTISE_BYTES: Final = ID_BYTES + 2 * PUBLIC_KEY_BYTES
"""Stage 0 message: client id and its two public keys."""
_SHARE_PLAINTEXT = 2 * ID_BYTES + 2 * SHARE_BYTES
SHARE_MESSAGE_BYTES: Final = ID_BYTES + ciphertext_size(_SHARE_PLAINTEXT)
"""Stage 1 message: recipient id and the AEAD ciphertext of ``(u, v, share of s_u, share of b_u)``."""
UNMASK_ENTRY_BYTES: Final = ID_BYTES + SHARE_BYTES
"""Stage 3, per revealed share: whose secret it is and the share."""
_SHARE_INFO = b"fedgraphrec/secagg/share-channel/v1"
_MASK_INFO = b"fedgraphrec/secagg/pair-mask/v1"


class SecAggAbortError(CryptoError):
    """Secure aggregation cannot finish: too few clients are left to meet the threshold."""


def require(count: int, threshold: int, stage: str, what: str = "clients left") -> None:
    """The threshold check of every stage, on both sides: ``count`` clients must reach ``threshold``.

    Raises:
        SecAggAbortError: naming the stage (:data:`STAGE_TITLE`), the count and the threshold.
    """
    if count < threshold:
        raise SecAggAbortError(
            f"secure aggregation aborted at stage {STAGE_TITLE[stage]}: only {count} {what}, "
            f"below the threshold {threshold}"
        )


def ids_to_bytes(ids: np.ndarray | list[int]) -> bytes:
    """Client ids as concatenated u32 (what the server announces)."""
    return np.asarray(ids, dtype="<u4").tobytes()


def ids_from_bytes(blob: bytes) -> np.ndarray:
    """Inverse of :func:`ids_to_bytes` (int64)."""
    return np.frombuffer(blob, dtype="<u4").astype(np.int64)


@dataclass(frozen=True)
class AdvertisedKeys:
    """Stage-0 message of one client."""

    client: int
    c_pk: PublicKey
    s_pk: PublicKey

    def to_bytes(self) -> bytes:
        """Wire form: id (u32 LE) ‖ ``c_pk`` ‖ ``s_pk`` (:data:`ADVERTISE_BYTES`)."""
        return self.client.to_bytes(ID_BYTES, "little") + self.c_pk.to_bytes() + self.s_pk.to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> AdvertisedKeys:
        """Inverse of :meth:`to_bytes` (raises ``ValueError`` on a wrong length or an invalid key)."""
        if len(data) != ADVERTISE_BYTES:
            raise ValueError(f"an advertised-keys message is {ADVERTISE_BYTES} bytes, got {len(data)}")
        client = int.from_bytes(data[:ID_BYTES], "little")
        return cls(
            client,
            PublicKey.from_bytes(data[ID_BYTES : ID_BYTES + PUBLIC_KEY_BYTES]),
            PublicKey.from_bytes(data[ID_BYTES + PUBLIC_KEY_BYTES :]),
        )


def check_id(client: int) -> int:
    """``client`` as an int id that fits the wire (and a Shamir point ``id + 1``), or an error."""
    if isinstance(client, bool) or not isinstance(client, int | np.integer):
        raise TypeError(f"client ids must be ints, got {type(client).__name__}")
    if not 0 <= int(client) < 2**31 - 2:
        raise ValueError(f"client ids must be in [0, 2**31 - 2), got {client}")
    return int(client)


def _pair_info(a: PublicKey, b: PublicKey, purpose: bytes, label: bytes) -> bytes:
    """Key-derivation context of a pair: purpose, session label and both public keys in order."""
    lo, hi = sorted((a.to_bytes(), b.to_bytes()))
    return purpose + len(label).to_bytes(4, "little") + label + lo + hi


def share_channel(own: ClientKeyPair, peer: PublicKey, label: bytes) -> AESGCM:
    """The AEAD under which ``own`` and ``peer`` exchange shares in the session ``label``."""
    return AESGCM(own.agree(peer, _pair_info(own.public, peer, _SHARE_INFO, label)))


def share_aad(sender: int, recipient: int, label: bytes) -> bytes:
    """Who sends a share message to whom (and the session): its associated data."""
    return sender.to_bytes(ID_BYTES, "little") + recipient.to_bytes(ID_BYTES, "little") + label


def pair_mask(
    own: ClientKeyPair, own_id: int, peer: PublicKey, peer_id: int, length: int, label: bytes
) -> UInt64Array:
    """``σ(own, peer) · PRG(s_{own,peer})``: the pairwise mask ``own`` adds towards ``peer``."""
    seed = own.agree(peer, _pair_info(own.public, peer, _MASK_INFO, label))
    mask = mask_from_seed(seed, length, label)
    return mask if own_id < peer_id else np.zeros_like(mask) - mask
