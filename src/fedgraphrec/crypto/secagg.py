"""Secure aggregation with dropout recovery (Bonawitz et al., CCS 2017), honest-but-curious version.

The server learns ``Σ_u x_u`` over the clients whose masked inputs it received and nothing else
about any single ``x_u``, even when clients drop out mid-protocol, as long as at least ``t``
(``threshold``) clients stay until the end. Inputs are vectors over the ring ``Z_{2^64}`` (encode
floats with :class:`~fedgraphrec.crypto.sharing.FixedPoint`), so the sum is exact.

The protocol runs in four stages, each a method on :class:`SecAggClient` and
:class:`SecAggServer` (the staging follows Flower's SecAgg+ workflow; the transport is the
caller's business, so the same objects serve the in-process driver :func:`secure_sum` and a
cross-process deployment):

0. **Advertise keys.** Client ``u`` draws two X25519 key pairs, ``c_u`` (to encrypt shares to other
   clients) and ``s_u`` (to agree mask seeds), and a 32-byte self-mask seed ``b_u``; it sends both
   public keys. The server broadcasts the roster ``U1``.
1. **Share keys.** ``u`` Shamir-shares (:mod:`~fedgraphrec.crypto.shamir`) ``s_u``'s private key and
   ``b_u`` with threshold ``t`` among ``U1``, encrypts each share to its holder ``v`` under
   AES-256-GCM with the key agreed from ``c_u, c_v``, and sends them through the server, which
   forwards them. ``U2`` = clients whose shares arrived.
2. **Masked input.** ``u`` uploads
   ``y_u = x_u + PRG(b_u) + Σ_{v∈U2, v≠u} σ(u,v) PRG(s_{u,v})`` with ``σ(u,v) = +1`` if ``u < v``
   else ``-1``, where ``s_{u,v}`` is agreed from ``s_u, s_v`` and PRG is
   :func:`~fedgraphrec.crypto.sharing.mask_from_seed`. Pairwise masks cancel in the sum.
   ``U3`` = clients whose masked input arrived; ``|U3| < t`` aborts.
3. **Unmask.** The server announces ``U3``. Each client still online sends, for every ``v ∈ U2``,
   its share of ``b_v`` if ``v ∈ U3`` or of ``s_v``'s private key if ``v`` dropped (never both for
   one ``v``). With ``t`` responses the server rebuilds the seeds, removes the self masks of ``U3``
   and the pairwise masks that ``U3`` applied towards the dropped clients, and obtains
   ``Σ_{u∈U3} x_u``. Clients that drop *after* uploading are still summed.

Security rests on ``t`` exceeding the number of clients that can collude with the server; the
original paper's malicious-server variant (signatures, consistency checks) is not implemented.
Every secret comes from the operating system's CSPRNG, so runs are not bit-reproducible at the mask
level, but the sum is exact, so results are.
"""

from __future__ import annotations

import json
import secrets as _secrets
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from fedgraphrec.crypto._primitives import KEY_BYTES, gcm_decrypt, gcm_encrypt
from fedgraphrec.crypto.aead import ciphertext_size
from fedgraphrec.crypto.errors import CryptoError, IntegrityError
from fedgraphrec.crypto.keys import ClientKeyPair, PublicKey
from fedgraphrec.crypto.shamir import (
    SHARE_BYTES,
    recover,
    share_from_bytes,
    share_secrets,
    share_to_bytes,
)
from fedgraphrec.crypto.sharing import UInt64Array, mask_from_seed

__all__ = [
    "ADVERTISE_BYTES",
    "SHARE_MESSAGE_BYTES",
    "UNMASK_ENTRY_BYTES",
    "AdvertisedKeys",
    "SecAggAbortError",
    "SecAggClient",
    "SecAggResult",
    "SecAggServer",
    "StageTraffic",
    "secagg_traffic",
    "secure_sum",
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


@dataclass
class _Held:
    """Shares a client holds of another client's two secrets."""

    s_share: np.ndarray
    b_share: np.ndarray


class SecAggClient:
    """One client's side of a secure-aggregation session.

    Args:
        client: this client's id (``0 ≤ id < 2^31 - 2``; it also fixes its Shamir point ``id + 1``).
        threshold: ``t``, the number of shares needed to rebuild a secret.
        vector_length: ring elements per input.
        label: session context (e.g. protocol, round and purpose) bound into every key and mask, so
            no mask is ever reused across sessions.
    """

    def __init__(self, client: int, threshold: int, vector_length: int, label: bytes = b"") -> None:
        self.client = _check_id(client)
        self.threshold = threshold
        self.length = vector_length
        self.label = bytes(label)
        self._c = ClientKeyPair.generate()
        self._s = ClientKeyPair.generate()
        self._b = _secrets.token_bytes(KEY_BYTES)
        self._roster: dict[int, AdvertisedKeys] = {}
        self._held: dict[int, _Held] = {}
        self._sent_input = False
        self._revealed: set[int] = set()

    # ---------------------------------------------------------------- persistence
    def export_state(self) -> bytes:
        """Everything this client holds (private keys included), for a node's local state store.

        A deployment whose client program restarts between stages (a Flower ``ClientApp`` runs in a
        fresh process per message) keeps these bytes on the node and resumes with :meth:`restore`;
        they must never leave the node.
        """
        state = {
            "client": self.client,
            "threshold": self.threshold,
            "length": self.length,
            "label": self.label.hex(),
            "c": self._c.private_bytes().hex(),
            "s": self._s.private_bytes().hex(),
            "b": self._b.hex(),
            "roster": {str(v): a.to_bytes().hex() for v, a in self._roster.items()},
            "held": {
                str(v): share_to_bytes(h.s_share).hex() + share_to_bytes(h.b_share).hex()
                for v, h in self._held.items()
            },
            "sent_input": self._sent_input,
            "revealed": sorted(self._revealed),
        }
        return json.dumps(state).encode()

    @classmethod
    def restore(cls, data: bytes) -> SecAggClient:
        """Inverse of :meth:`export_state`."""
        state = json.loads(data)
        self = cls.__new__(cls)
        self.client = _check_id(int(state["client"]))
        self.threshold = int(state["threshold"])
        self.length = int(state["length"])
        self.label = bytes.fromhex(state["label"])
        self._c = ClientKeyPair.from_private_bytes(bytes.fromhex(state["c"]))
        self._s = ClientKeyPair.from_private_bytes(bytes.fromhex(state["s"]))
        self._b = bytes.fromhex(state["b"])
        self._roster = {
            int(v): AdvertisedKeys.from_bytes(bytes.fromhex(a)) for v, a in state["roster"].items()
        }
        self._held = {}
        for v, h in state["held"].items():
            raw = bytes.fromhex(h)
            self._held[int(v)] = _Held(
                share_from_bytes(raw[:SHARE_BYTES]), share_from_bytes(raw[SHARE_BYTES:])
            )
        self._sent_input = bool(state["sent_input"])
        self._revealed = {int(v) for v in state["revealed"]}
        return self

    # ---------------------------------------------------------------- stage 0
    def advertise(self) -> AdvertisedKeys:
        """Stage 0: the two public keys."""
        return AdvertisedKeys(self.client, self._c.public, self._s.public)

    # ---------------------------------------------------------------- stage 1
    def share_keys(self, roster: Mapping[int, AdvertisedKeys]) -> dict[int, bytes]:
        """Stage 1: encrypted shares of ``s_u``'s private key and ``b_u`` for every other client.

        Raises:
            SecAggAbortError: the roster has fewer than ``threshold`` clients.
            ValueError: the roster does not contain this client's own keys.
        """
        if len(roster) < self.threshold:
            raise SecAggAbortError(
                f"stage share-keys: {len(roster)} clients advertised keys, below the threshold "
                f"{self.threshold}"
            )
        if roster.get(self.client) != self.advertise():
            raise ValueError(f"client {self.client}: the roster does not carry this client's own keys")
        self._roster = dict(roster)
        ids = sorted(roster)
        shares = share_secrets([self._s.private_bytes(), self._b], self.threshold, [i + 1 for i in ids])
        out: dict[int, bytes] = {}
        for pos, v in enumerate(ids):
            s_share, b_share = shares[0, pos], shares[1, pos]
            if v == self.client:
                self._held[v] = _Held(s_share, b_share)
                continue
            plaintext = _share_aad(self.client, v, b"") + share_to_bytes(s_share) + share_to_bytes(b_share)
            aead = _channel(self._c, roster[v].c_pk, self.label)
            blob = gcm_encrypt(aead, plaintext, _share_aad(self.client, v, self.label))
            out[v] = v.to_bytes(_ID_BYTES, "little") + blob
        return out

    def receive_shares(self, messages: Mapping[int, bytes]) -> None:
        """Stage 1, receiving end: decrypt and keep the shares other clients sent (keyed by sender).

        Raises:
            IntegrityError: a message fails authentication (tampered, replayed from another session,
                or not meant for this client) or names the wrong sender or recipient.
        """
        for u, message in messages.items():
            if u not in self._roster:
                raise IntegrityError(
                    f"secagg share-keys: client {self.client} got shares from {u}, not in the roster"
                )
            if int.from_bytes(message[:_ID_BYTES], "little") != self.client:
                raise IntegrityError(
                    f"secagg share-keys: the share message from {u} to client {self.client} is addressed "
                    "elsewhere (re-routed); the receiver rejected it"
                )
            aead = _channel(self._c, self._roster[u].c_pk, self.label)
            plain = gcm_decrypt(
                aead, message[_ID_BYTES:], _share_aad(u, self.client, self.label), "secagg share"
            )
            if plain[: 2 * _ID_BYTES] != _share_aad(u, self.client, b""):
                raise IntegrityError(
                    f"secagg share-keys: the share message from {u} to client {self.client} names others"
                )
            body = plain[2 * _ID_BYTES :]
            self._held[u] = _Held(share_from_bytes(body[:SHARE_BYTES]), share_from_bytes(body[SHARE_BYTES:]))

    # ---------------------------------------------------------------- stage 2
    def masked_input(self, x: UInt64Array, shared: Collection[int]) -> UInt64Array:
        """Stage 2: ``x`` plus the self mask and the pairwise masks towards every client in ``shared``.

        Args:
            x: ``uint64`` vector of length ``vector_length`` (ring elements).
            shared: ``U2``, the clients whose shares this client received (itself included).
        """
        missing = [v for v in shared if v != self.client and v not in self._held]
        if missing:
            raise IntegrityError(
                f"secagg masked-input: the server lists client(s) {missing[:5]} as having shared keys, but "
                f"client {self.client} never received their shares (dropped); the receiver rejected the round"
            )
        value = np.asarray(x)
        if value.dtype != np.uint64 or value.shape != (self.length,):
            raise ValueError(
                f"client {self.client}: input must be a uint64 vector of length {self.length}, "
                f"got {value.dtype} {value.shape}"
            )
        y = value + mask_from_seed(self._b, self.length, self.label)
        for v in shared:
            if v != self.client:
                y += _pair_mask(self._s, self.client, self._roster[v].s_pk, v, self.length, self.label)
        self._sent_input = True
        return y

    # ---------------------------------------------------------------- stage 3
    def unmask(self, survivors: Collection[int], shared: Collection[int]) -> dict[int, bytes]:
        """Stage 3: shares of ``b_v`` for survivors ``v`` and of ``s_v``'s key for dropped ``v``.

        Returns a dict ``v → share bytes``; which secret a share belongs to follows from whether
        ``v`` is in ``survivors``.

        Raises:
            SecAggAbortError: fewer than ``threshold`` survivors (revealing would not help the server
                and could expose a client).
            ValueError: a survivor never sent shares, or this session was already unmasked.
        """
        alive = set(survivors)
        if len(alive) < self.threshold:
            raise SecAggAbortError(
                f"stage unmask: {len(alive)} masked inputs arrived, below the threshold {self.threshold}"
            )
        if not alive <= set(shared):
            raise ValueError(
                f"client {self.client}: survivors {sorted(alive - set(shared))} never shared keys"
            )
        if self._revealed:
            raise ValueError(f"client {self.client}: already answered an unmask request")
        out: dict[int, bytes] = {}
        for v in shared:
            held = self._held[v]
            out[v] = share_to_bytes(held.b_share if v in alive else held.s_share)
            self._revealed.add(v)
        return out


@dataclass
class SecAggResult:
    """Outcome of one aggregation."""

    total: UInt64Array
    included: tuple[int, ...]
    dropped: tuple[int, ...] = ()
    unresponsive: tuple[int, ...] = ()
    traffic: list[StageTraffic] = field(default_factory=list)
    masked_inputs: dict[int, UInt64Array] = field(default_factory=dict)  # what the server saw, if kept
    shares: dict[int, dict[int, bytes]] = field(default_factory=dict)  # sender → recipient → sealed share


class SecAggServer:
    """The server's side: routes shares, collects masked inputs, removes the masks.

    Args:
        threshold: ``t``; every stage aborts when fewer clients than this remain.
        vector_length: ring elements per input.
        label: the session label the clients use.
    """

    def __init__(self, threshold: int, vector_length: int, label: bytes = b"") -> None:
        if threshold < 1:
            raise ValueError(f"threshold must be at least 1, got {threshold}")
        self.threshold = threshold
        self.length = vector_length
        self.label = bytes(label)
        self.roster: dict[int, AdvertisedKeys] = {}
        self.shared: tuple[int, ...] = ()
        self.survivors: tuple[int, ...] = ()
        self._sum: UInt64Array | None = None

    def _need(self, count: int, stage: str, what: str) -> None:
        if count < self.threshold:
            raise SecAggAbortError(
                f"secure aggregation aborted at stage {stage}: only {count} {what}, "
                f"below the threshold {self.threshold}"
            )

    def collect_keys(self, adverts: Iterable[AdvertisedKeys]) -> dict[int, AdvertisedKeys]:
        """Stage 0: the roster ``U1`` to broadcast."""
        self.roster = {a.client: a for a in adverts}
        self._need(len(self.roster), "advertise-keys", "clients advertised keys")
        return dict(self.roster)

    def route_shares(self, outgoing: Mapping[int, Mapping[int, bytes]]) -> dict[int, dict[int, bytes]]:
        """Stage 1: forward each share message to its recipient; ``U2`` = the senders."""
        self.shared = tuple(sorted(outgoing))
        self._need(len(self.shared), "share-keys", "clients sent shares")
        inbox: dict[int, dict[int, bytes]] = {v: {} for v in self.shared}
        for u, messages in outgoing.items():
            for v, message in messages.items():
                if v in inbox:
                    inbox[v][u] = message
        return inbox

    def collect_masked(self, inputs: Mapping[int, UInt64Array]) -> tuple[int, ...]:
        """Stage 2: sum the masked inputs; returns ``U3`` (to announce for unmasking)."""
        unknown = set(inputs) - set(self.shared)
        if unknown:
            raise ValueError(f"masked inputs from clients that never shared keys: {sorted(unknown)}")
        self.survivors = tuple(sorted(inputs))
        self._need(len(self.survivors), "masked-input", "masked inputs arrived")
        total = np.zeros(self.length, dtype=np.uint64)
        for y in inputs.values():
            total += y
        self._sum = total
        return self.survivors

    def unmask(self, responses: Mapping[int, Mapping[int, bytes]]) -> UInt64Array:
        """Stage 3: rebuild the seeds from ``t`` responses and return ``Σ_{u∈U3} x_u``."""
        if self._sum is None:
            raise ValueError("unmask called before collect_masked")
        self._need(len(responses), "unmask", "clients answered the unmask request")
        alive = set(self.survivors)
        holders = sorted(responses)[: self.threshold]
        points = [h + 1 for h in holders]
        total = self._sum.copy()
        for v in self.shared:
            shares = np.stack([share_from_bytes(responses[h][v]) for h in holders])
            secret = recover(points, shares)
            if v in alive:  # remove v's self mask
                total -= mask_from_seed(secret, self.length, self.label)
                continue
            keys = ClientKeyPair.from_private_bytes(secret)  # v dropped: undo the masks U3 added towards v
            if keys.public != self.roster[v].s_pk:
                raise SecAggAbortError(
                    f"the shares of dropped client {v}'s key are inconsistent with its key"
                )
            for u in self.survivors:  # u added σ(u,v)·PRG(s_uv); v's side of it is σ(v,u)·PRG = its negation
                total += _pair_mask(keys, v, self.roster[u].s_pk, u, self.length, self.label)
        return total


@dataclass(frozen=True)
class StageTraffic:
    """Messages of one stage in one direction: ``senders`` each send ``messages_each`` of ``bytes_each``."""

    stage: str
    sender: str
    receiver: str
    clients: tuple[int, ...]
    messages_each: int
    bytes_each: int

    @property
    def total_bytes(self) -> int:
        """All bytes of the stage."""
        return len(self.clients) * self.messages_each * self.bytes_each


def secagg_traffic(
    advertised: Collection[int],
    shared: Collection[int],
    survivors: Collection[int],
    responders: Collection[int],
    vector_length: int,
) -> list[StageTraffic]:
    """Exactly what :func:`secure_sum` transmits, stage by stage, for the given participation.

    Lets a protocol count secure-aggregation bytes without running the cryptography (crypto mode
    ``accounted``); a test checks it against the serialized messages of a real run.
    """
    u1, u2, u3, u4 = (tuple(sorted(s)) for s in (advertised, shared, survivors, responders))
    return [
        StageTraffic("advertise-keys", "client", "server", u1, 1, ADVERTISE_BYTES),
        StageTraffic("advertise-keys", "server", "client", u1, 1, ADVERTISE_BYTES * len(u1)),
        StageTraffic("share-keys", "client", "server", u2, len(u1) - 1, SHARE_MESSAGE_BYTES),
        StageTraffic("share-keys", "server", "client", u2, len(u2) - 1, SHARE_MESSAGE_BYTES),
        StageTraffic("masked-input", "client", "server", u3, 1, 8 * vector_length),
        StageTraffic("unmask", "server", "client", u3, 1, _ID_BYTES * len(u3)),
        StageTraffic("unmask", "client", "server", u4, 1, UNMASK_ENTRY_BYTES * len(u2)),
    ]


def secure_sum(
    inputs: Mapping[int, UInt64Array],
    threshold: int,
    *,
    label: bytes = b"",
    drop_before_input: Collection[int] = (),
    drop_after_input: Collection[int] = (),
    keep_uploads: bool = False,
    tamper: Callable[[str, dict[int, dict[int, bytes]]], dict[int, dict[int, bytes]]] | None = None,
) -> SecAggResult:
    """Run all four stages in-process for the clients in ``inputs``; the exact sum of what arrived.

    Args:
        inputs: client id → ``uint64`` vector (all of the same length).
        threshold: ``t``.
        label: session label.
        drop_before_input: clients that go offline after sharing keys, before uploading: their
            inputs are *not* in the sum; their pairwise masks are removed through their shared keys.
        drop_after_input: clients that go offline after uploading, before unmasking: their inputs
            *are* in the sum; their self masks are removed through the others' shares.
        keep_uploads: return the masked inputs the server received (for transcripts and audits).
        tamper: an *active* server's hook on the routed share messages (stage name, recipient →
            sender → message), for integrity audits; receivers detect what it alters or withholds.

    Raises:
        SecAggAbortError: fewer than ``threshold`` clients upload, or fewer answer the unmask request.
    """
    if not inputs:
        raise ValueError("secure_sum needs at least one client")
    lengths = {len(v) for v in inputs.values()}
    if len(lengths) != 1:
        raise ValueError(f"all inputs must have the same length, got lengths {sorted(lengths)}")
    (length,) = lengths
    before, after = set(drop_before_input), set(drop_after_input)
    if before & after:
        raise ValueError(f"clients {sorted(before & after)} cannot drop both before and after uploading")
    ids = sorted(inputs)
    clients = {u: SecAggClient(u, threshold, length, label) for u in ids}
    server = SecAggServer(threshold, length, label)
    roster = server.collect_keys(c.advertise() for c in clients.values())
    outgoing = {u: c.share_keys(roster) for u, c in clients.items()}
    inbox = server.route_shares(outgoing)
    if tamper is not None:
        inbox = tamper("share-keys", inbox)
    for v, messages in inbox.items():
        clients[v].receive_shares(messages)
    shared = server.shared
    uploads = {u: clients[u].masked_input(inputs[u], shared) for u in ids if u not in before}
    survivors = server.collect_masked(uploads)
    responders = [u for u in survivors if u not in after]
    total = server.unmask({u: clients[u].unmask(survivors, shared) for u in responders})
    return SecAggResult(
        total=total,
        included=survivors,
        dropped=tuple(sorted(before)),
        unresponsive=tuple(sorted(after)),
        traffic=secagg_traffic(ids, shared, survivors, responders, length),
        masked_inputs=uploads if keep_uploads else {},
        shares=outgoing,
    )
