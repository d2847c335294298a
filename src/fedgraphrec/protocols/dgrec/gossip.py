"""DGREC's users as peer programs: the public-item share and Algorithm 2's flooding, peer to peer.

Every user is a :class:`UserPeer` registered with a :class:`~fedgraphrec.runtime.peer.PeerTransport`
(no server): it sends its public item list to its social neighbours once at set-up, and in each group
step it floods messages (its own, then what it received) to its neighbours in the group for ``2H``
synchronous rounds. Each peer acts only on its own state and on what it received, and checks every
incoming message against what it expects (:meth:`UserPeer.expect`): the phase of the current round
(so rounds cannot be reordered or replayed), a sender that is one of its neighbours in the group, the
kind and the size; on receipt it checks the payload's dtype and length and refuses a message id it
already holds.

Flooding (Algorithm 2, de-duplicated). The group's members are told their links of the group's
breadth-first tree from the centre (a subset of the sampled links ``N^s_v``; the centre knows the
group it sampled). In round 0 a member sends its own message (a random per-iteration id, not its user
id, with its payload) to each tree neighbour; in round ``r > 0`` it forwards what it received in round
``r - 1`` to its other tree neighbours. Every member then receives every other member's message
exactly once: ``|U|(|U| - 1)`` messages per group, the de-duplicated count, and the tree's depth is at
most ``H``, so ``2H`` rounds deliver everything. A one-bit message costs ``ceil(n_s / 8)`` payload
bytes plus an 8-byte id (:func:`message_bytes`); a float message ``8 n_s + 8`` (:func:`float_bytes`).
With transcripts on, each receiving user's transcript holds exactly the vectors it got (round 0:
straight from their originators).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.runtime.network import Network
from fedgraphrec.runtime.peer import PeerExpect, PeerMessage, PeerTransport

__all__ = [
    "ID_BYTES",
    "UserPeer",
    "float_bytes",
    "flood",
    "flood_routes",
    "flood_tree",
    "message_bytes",
    "share_public_items",
]

ID_BYTES = 8
PUBLIC_ITEMS = "dgrec/public_items"


def message_bytes(n_s: int) -> int:
    """Bytes of one encoded message: one bit per coordinate plus its id."""
    return (n_s + 7) // 8 + ID_BYTES


def float_bytes(n_s: int) -> int:
    """Bytes of one float message (plain, clipped or Laplace sharing): 8 per coordinate plus its id."""
    return 8 * n_s + ID_BYTES


def flood_tree(links: Mapping[int, set[int]], root: int) -> dict[int, set[int]]:
    """The breadth-first tree of the group ``links`` from ``root`` (neighbours visited in id order).

    Raises:
        ValueError: ``root`` is not a member, or the group is not connected.
    """
    if root not in links:
        raise ValueError(f"links: the centre {root} is not a member of the group")
    tree: dict[int, set[int]] = {v: set() for v in links}
    seen, frontier = {root}, [root]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(links[v]):
                if w not in seen:
                    seen.add(w)
                    tree[v].add(w)
                    tree[w].add(v)
                    nxt.append(w)
        frontier = nxt
    if len(seen) != len(links):
        raise ValueError(f"links: the group is not connected ({len(links) - len(seen)} members unreachable)")
    return tree


def flood_routes(links: Mapping[int, set[int]], hops: int) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """Who sends to whom in each round of :func:`flood`, from the flooding tree's distances alone.

    A message of origin ``o`` reaches member ``w`` in round ``dist(o, w) - 1`` (``dist``: the
    distance in :func:`flood_tree` of ``links`` from its first member, the centre), sent by ``w``'s
    neighbour on the tree path from ``o``: its child towards ``o`` when ``o`` lies below ``w``, its
    parent otherwise. Returns ``(round, senders, receivers)`` for every round that carries messages,
    in round order (the rounds :func:`flood` books in the ledger, one message per pair).

    Raises:
        RuntimeError: two members farther apart than ``2·hops`` (the flood would not deliver).
    """
    members = list(links)
    tree = flood_tree(links, members[0])
    at = {v: i for i, v in enumerate(members)}
    m = len(members)
    parent = np.full(m, -1, np.int64)
    depth = np.zeros(m, np.int64)
    order = [members[0]]
    for v in order:  # breadth-first over the tree (the list grows while it is read)
        for w in tree[v]:
            if w != members[0] and parent[at[w]] < 0:
                parent[at[w]], depth[at[w]] = at[v], depth[at[v]] + 1
                order.append(w)
    anc = np.full((m, int(depth.max()) + 2), -1, np.int64)  # anc[v, k]: v's ancestor at depth k
    for v in order:
        i = at[v]
        if parent[i] >= 0:
            anc[i] = anc[parent[i]]
        anc[i, depth[i]] = i
    common = ((anc[:, None, :] == anc[None, :, :]) & (anc[:, None, :] >= 0)).sum(-1)
    dist = depth[:, None] + depth[None, :] - 2 * (common - 1)
    if dist.max() > 2 * hops:
        raise RuntimeError("flooding did not deliver every gradient within 2H rounds")
    origin, dest = np.nonzero(dist > 0)
    below = anc[origin, depth[dest]] == dest  # the origin lies in the receiver's subtree
    sender = np.where(below, anc[origin, depth[dest] + 1], parent[dest])
    ids = np.asarray(members, dtype=np.int64)
    rounds = dist[origin, dest] - 1
    out = []
    for r in range(2 * hops):
        sel = rounds == r
        if sel.any():
            out.append((r, ids[sender[sel]], ids[dest[sel]]))
    return out


class UserPeer:
    """One user's peer program (module docstring).

    Args:
        ident: the user's id.
        neighbours: the user's social neighbours (who may send it their public items).
        public_items: the items this user publicises.
        n_items: the size of the item space (received item ids are checked against it).
    """

    def __init__(
        self, ident: int, neighbours: frozenset[int], public_items: np.ndarray, n_items: int
    ) -> None:
        self.ident = int(ident)
        self.neighbours = neighbours
        self.public_items = np.asarray(public_items, dtype=np.int64)
        self.n_items = n_items
        self.received_public: dict[int, np.ndarray] = {}
        self._expect: PeerExpect | None = None
        self._tree: frozenset[int] = frozenset()
        self._order: list[int] = []
        self._held: dict[int, torch.Tensor] = {}
        self._new: list[tuple[int, int, torch.Tensor]] = []  # (id, from, payload) of the last round
        self._n_s = 0
        self._kind = ""

    # ------------------------------------------------------------------ set-up: public items
    def public_outbox(self) -> list[PeerMessage]:
        """The user's public item list to each social neighbour (and be ready to receive theirs)."""
        self._expect = PeerExpect(PUBLIC_ITEMS, "public_items", senders=self.neighbours)
        return [
            PeerMessage(
                PUBLIC_ITEMS, "public_items", self.ident, v, self.public_items, 8 * len(self.public_items)
            )
            for v in sorted(self.neighbours)
        ]

    def end_setup(self) -> None:
        """The set-up is over: public item lists are no longer accepted."""
        self._expect = None

    # ------------------------------------------------------------------ a group step
    def join(self, tree: set[int], message: tuple[int, torch.Tensor], kind: str, size: int) -> None:
        """Take part in a group's flooding with tree neighbours ``tree`` and own ``(id, payload)``."""
        self._tree = frozenset(tree)
        self._order = sorted(tree)
        self._held = {int(message[0]): message[1]}
        self._new = [(int(message[0]), self.ident, message[1])]
        self._n_s, self._kind, self._size = int(message[1].numel()), kind, size

    def start_round(self, phase: str) -> list[PeerMessage]:
        """Open a flooding round: forward last round's news; accept only ``phase`` from tree neighbours."""
        out = [
            PeerMessage(phase, self._kind, self.ident, w, payload, self._size, tag=mid)
            for mid, origin, payload in self._new
            for w in self._order
            if w != origin
        ]
        self._new = []
        self._expect = PeerExpect(phase, self._kind, senders=self._tree, size=self._size)
        return out

    def leave(self) -> dict[int, torch.Tensor]:
        """End the group's flooding; returns what this user holds (message id → payload)."""
        held, self._held, self._new, self._expect = self._held, {}, [], None
        return held

    # ------------------------------------------------------------------ the transport's side
    def expect(self, step: int) -> PeerExpect | None:
        """What this user accepts now (set by the stage it is in)."""
        return self._expect

    def receive(self, message: PeerMessage, step: int) -> None:
        """Store a checked message (a public item list, or a flooded payload under a new id).

        Raises:
            IntegrityError: item ids outside the item space or a size that is not 8 bytes per item;
                a payload of the wrong dtype or length, or a message id this user already holds.
        """
        if message.phase == PUBLIC_ITEMS:
            items = np.asarray(message.payload)
            if message.size != 8 * len(items) or (
                len(items) and (items.min() < 0 or items.max() >= self.n_items)
            ):
                raise IntegrityError(f"{PUBLIC_ITEMS}: user {message.sender} sent a malformed item list")
            self.received_public[message.sender] = items
            return
        x = message.payload
        want = torch.int8 if self._kind == "one_bit_gradient" else None
        if (
            not (type(x) is torch.Tensor or isinstance(x, torch.Tensor))
            or x.numel() != self._n_s
            or (want is not None and x.dtype != want)
        ):
            raise IntegrityError(
                f"{message.phase}: user {message.sender} sent a payload of the wrong shape or dtype"
            )
        if message.tag in self._held:
            raise IntegrityError(
                f"{message.phase}: message id {message.tag} delivered twice to user {self.ident}"
            )
        self._held[message.tag] = x
        self._new.append((message.tag, message.sender, x))

    def link_key(self, other: int) -> SharedKey | None:
        """DGREC's messages are plain (LDP-encoded for the neighbours that read them): no link keys."""
        return None


def share_public_items(transport: PeerTransport, peers: Mapping[int, UserPeer]) -> None:
    """Set-up: every user sends its public item list to its social neighbours (one batch)."""
    batch = [m for u in sorted(peers) for m in peers[u].public_outbox()]
    transport.send(batch)
    for peer in peers.values():
        peer.end_setup()


def flood(
    links: Mapping[int, set[int]],
    messages: Mapping[int, tuple[int, torch.Tensor]],
    hops: int,
    transport: PeerTransport | None = None,
    *,
    phase: str = "dgrec/flood",
    kind: str = "one_bit_gradient",
    size: int | None = None,
) -> dict[int, dict[int, torch.Tensor]]:
    """Run ``2·hops`` flooding rounds among the group's peers; return what each holds, by message id.

    Args:
        links: sampled neighbour sets ``N^s_v`` of the group (symmetric), the centre first (as
            :func:`~fedgraphrec.protocols.dgrec.sampling.sample_group` returns them).
        messages: member → (message id, payload); every member of ``links`` must have one.
        hops: H; the flooding tree's depth is at most H, so 2H rounds deliver everything.
        transport: the peers' transport (ledger, transcripts); members without a registered
            :class:`UserPeer` get one. ``None``: a transport with no accounting kept.
        phase: phase prefix (``{phase}/round={r}``).
        kind: payload kind (``one_bit_gradient``, ``float_gradient``, ...).
        size: bytes per message (default: :func:`message_bytes` of the payload length).
    """
    members = list(links)
    missing = [v for v in members if v not in messages]
    if missing:
        raise ValueError(f"messages: no payload for group members {missing[:5]}")
    if transport is None:
        transport = PeerTransport(Network(max(members) + 1))
    tree = flood_tree(links, members[0])
    each = message_bytes(messages[members[0]][1].numel()) if size is None else size
    peers: dict[int, UserPeer] = {}
    for v in members:
        peer = transport.peers.get(v)
        if not isinstance(peer, UserPeer):
            peer = UserPeer(v, frozenset(), np.zeros(0, np.int64), 0)
            transport.register(v, peer)
        peer.join(tree[v], messages[v], kind, each)
        peers[v] = peer
    for r in range(2 * hops):
        round_phase = f"{phase}/round={r}"
        transport.send([m for v in members for m in peers[v].start_round(round_phase)])
    return {v: peers[v].leave() for v in members}
