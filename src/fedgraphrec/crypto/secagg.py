"""Secure aggregation with dropout recovery (Bonawitz et al., CCS 2017), honest-but-curious version.

The server learns ``Σ_u x_u`` over the clients whose masked inputs it received and nothing else
about any single ``x_u``, even when clients drop out mid-protocol, as long as at least ``t``
(``threshold``) clients stay until the end. Inputs are vectors over the ring ``Z_{2^64}`` (encode
floats with :class:`~fedgraphrec.crypto.fixed_point.FixedPoint`), so the sum is exact.

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

Where the parts live: :mod:`~fedgraphrec.crypto.secagg_client` (:class:`SecAggClient`),
:mod:`~fedgraphrec.crypto.secagg_server` (:class:`SecAggServer`) and
:mod:`~fedgraphrec.crypto.secagg_wire` (message formats and sizes, :class:`AdvertisedKeys`,
:class:`SecAggAbortError`, pairwise keys and masks). This module keeps the in-process driver
:func:`secure_sum`, its :class:`SecAggResult` and the byte accounting :func:`secagg_traffic`, and
re-exports the others' public names, so ``fedgraphrec.crypto.secagg`` still names all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from fedgraphrec.crypto.ring import UInt64Array
from fedgraphrec.crypto.secagg_client import SecAggClient
from fedgraphrec.crypto.secagg_server import SecAggServer
from fedgraphrec.crypto.secagg_wire import (
    _ID_BYTES,
    ADVERTISE_BYTES,
    SHARE_MESSAGE_BYTES,
    UNMASK_ENTRY_BYTES,
    AdvertisedKeys,
    SecAggAbortError,
)

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
