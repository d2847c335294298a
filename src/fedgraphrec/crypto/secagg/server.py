"""The server's side of secure aggregation: :class:`SecAggServer` routes shares and removes the masks.

The protocol is described in :mod:`fedgraphrec.crypto.secagg.wire`. The server never holds a secret of
its own: it builds the roster, forwards the encrypted shares, sums the masked inputs and, from ``t``
clients' unmask answers, rebuilds the self-mask seeds of the survivors and the mask keys of the
dropped clients (pairwise masks derived as in :mod:`~fedgraphrec.crypto.secagg.wire`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from fedgraphrec.crypto.agreement import ClientKeyPair
from fedgraphrec.crypto.ring import UInt64Array
from fedgraphrec.crypto.secagg.wire import (
    ADVERTISE,
    MASK,
    SHARE,
    UNMASK,
    AdvertisedKeys,
    SecAggAbortError,
    pair_mask,
    require,
)
from fedgraphrec.crypto.shamir import recover, share_from_bytes
from fedgraphrec.crypto.sharing import mask_from_seed

__all__ = ["SecAggServer"]


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

    def collect_keys(self, adverts: Iterable[AdvertisedKeys]) -> dict[int, AdvertisedKeys]:
        """Stage 0: the roster ``U1`` to broadcast."""
        self.roster = {a.client: a for a in adverts}
        require(len(self.roster), self.threshold, ADVERTISE, "clients advertised keys")
        return dict(self.roster)

    def route_shares(self, outgoing: Mapping[int, Mapping[int, bytes]]) -> dict[int, dict[int, bytes]]:
        """Stage 1: forward each share message to its recipient; ``U2`` = the senders."""
        self.shared = tuple(sorted(outgoing))
        require(len(self.shared), self.threshold, SHARE, "clients sent shares")
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
        require(len(self.survivors), self.threshold, MASK, "masked inputs arrived")
        total = np.zeros(self.length, dtype=np.uint64)
        for y in inputs.values():
            total += y
        self._sum = total
        return self.survivors

    def unmask(self, responses: Mapping[int, Mapping[int, bytes]]) -> UInt64Array:
        """Stage 3: rebuild the seeds from ``t`` responses and return ``Σ_{u∈U3} x_u``."""
        if self._sum is None:
            raise ValueError("unmask called before collect_masked")
        require(len(responses), self.threshold, UNMASK, "clients answered the unmask request")
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
                total += pair_mask(keys, v, self.roster[u].s_pk, u, self.length, self.label)
        return total
