"""One client's side of secure aggregation: :class:`SecAggClient`, stage by stage.

The protocol (four stages, dropout recovery, threat model) is described in
:mod:`fedgraphrec.crypto.secagg.wire`; this module holds what a client keeps and computes: its two key
pairs and self-mask seed, the Shamir shares it holds of the others' secrets, its masked input and
its answer to the unmask request, plus :meth:`SecAggClient.export_state` for nodes that restart
between stages. Formats and pairwise derivations shared with the server come from
:mod:`~fedgraphrec.crypto.secagg.wire`.
"""

from __future__ import annotations

import json
import secrets as _secrets
from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np

from fedgraphrec.crypto._primitives import KEY_BYTES, gcm_decrypt, gcm_encrypt
from fedgraphrec.crypto.agreement import ClientKeyPair
from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.ring import UInt64Array
from fedgraphrec.crypto.secagg.wire import (
    ID_BYTES,
    SHARE,
    UNMASK,
    AdvertisedKeys,
    check_id,
    pair_mask,
    require,
    share_aad,
    share_channel,
)
from fedgraphrec.crypto.shamir import SHARE_BYTES, share_from_bytes, share_secrets, share_to_bytes
from fedgraphrec.crypto.sharing import mask_from_seed

__all__ = ["SecAggClient"]


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
        self.client = check_id(client)
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
        self.client = check_id(int(state["client"]))
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
        require(len(roster), self.threshold, SHARE, "clients advertised keys")
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
            plaintext = share_aad(self.client, v, b"") + share_to_bytes(s_share) + share_to_bytes(b_share)
            aead = share_channel(self._c, roster[v].c_pk, self.label)
            blob = gcm_encrypt(aead, plaintext, share_aad(self.client, v, self.label))
            out[v] = v.to_bytes(ID_BYTES, "little") + blob
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
            if int.from_bytes(message[:ID_BYTES], "little") != self.client:
                raise IntegrityError(
                    f"secagg share-keys: the share message from {u} to client {self.client} is addressed "
                    "elsewhere (re-routed); the receiver rejected it"
                )
            aead = share_channel(self._c, self._roster[u].c_pk, self.label)
            plain = gcm_decrypt(
                aead, message[ID_BYTES:], share_aad(u, self.client, self.label), "secagg share"
            )
            if plain[: 2 * ID_BYTES] != share_aad(u, self.client, b""):
                raise IntegrityError(
                    f"secagg share-keys: the share message from {u} to client {self.client} names others"
                )
            body = plain[2 * ID_BYTES :]
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
                y += pair_mask(self._s, self.client, self._roster[v].s_pk, v, self.length, self.label)
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
        require(len(alive), self.threshold, UNMASK, "masked inputs arrived")
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
