r"""Paper-literal GNN4FR backward: Algorithm 5 and the secret-shared aggregation, for a node's shard.

Kept behind ``paper_literal = true`` to reproduce the paper as printed (Table 1) and to measure
what the default transposed backward (:mod:`.client`) saves.

* Direct gradients of a negative go, sealed, to its designated holder (who sent its embeddings).
* Each client holds its share of every item gradient on its edges,
  :math:`g^{(l)}_{i(u)} = D^{(l)}_{i(u)} + c_{ui} G^{(l+1)}_u` (each chain-rule term counted once),
  and sends every neighbour :math:`u'` the row
  :math:`\sum_{i\in\mathcal I_u\cap\mathcal I_{u'}} c_{u'i}\, g^{(l)}_{i(u)}` sealed to it
  (``backward/l=k/neighbour-gradients``, one unicast row per ordered pair and layer).
* Aggregation: each client encodes its layer-0 item-gradient shares in fixed point over
  :math:`\mathbb Z_{2^{64}}` as a dense ``m x d`` vector, splits it into two additive shares (OS
  CSPRNG), sends one under :math:`S` to its successor on a seeded single cycle, uploads kept +
  received, and the server returns the dense sum to every client. In ``accounted`` mode the masks
  are not drawn (they cancel): each node uploads the sum of its clients' encodings, booked as one
  dense upload per client.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto.aead import ciphertext_size
from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.fixed_point import FixedPoint
from fedgraphrec.crypto.sharing import pair_clients, split
from fedgraphrec.crypto.tokens import TOKEN_BYTES
from fedgraphrec.models.propagation import torch_csr
from fedgraphrec.protocols.gnn4fr.client_setup import SetupClient
from fedgraphrec.protocols.gnn4fr.roles import CLIENT, SERVER, Phase, Stage, token_ints
from fedgraphrec.runtime.codec import decode_tensor, encode_tensor
from fedgraphrec.runtime.endpoint import require_senders
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part
from fedgraphrec.seeding import numpy_rng

__all__ = ["backward", "gradients", "loss_reply", "ring", "update", "upload"]


def ring(n: int, seed: int) -> np.ndarray:
    """The seeded single cycle of the share exchange: ``succ[u]`` receives ``u``'s share (public)."""
    return pair_clients(n, numpy_rng(seed, "gnn4fr", "pairing"))


class _Pairs:
    """The node's per-pair matrices: M (pair rows of the edge shares), own (edge shares to own rows)."""

    def __init__(self, prog: SetupClient) -> None:
        g = prog._graph()
        n_items, dt = max(len(g.items), 1), prog.dtype
        e_user, e_item = g.own_user, g.own_item
        order = np.argsort(g.rt_item, kind="stable")
        starts = np.searchsorted(g.rt_item[order], e_item)
        counts = g.item_holders[e_item]
        edge = np.repeat(np.arange(len(e_item)), counts)
        entry = order[
            np.repeat(starts, counts)
            + (np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts))
        ]
        other = g.known[g.rt_user[entry]]
        sender = prog.clients[e_user[edge]]
        keep = other != sender
        edge, other, sender, coef = edge[keep], other[keep], sender[keep], g.rt_value[entry[keep]]
        n = int(prog.n_users)
        keys, pair_of = np.unique(sender * n + other, return_inverse=True)
        self.sender, self.receiver = keys // n, keys % n
        self.M = torch_csr(sp.csr_matrix((coef, (pair_of, edge)), shape=(len(keys), len(e_item))), dt)
        self.own = torch_csr(
            sp.csr_matrix(
                (g.own_value, (e_user, np.arange(len(e_item)))), shape=(len(prog.clients), len(e_item))
            ),
            dt,
        )
        self.c = torch.from_numpy(g.own_value).to(dt).unsqueeze(1)
        self.edge_key = e_user * n_items + e_item
        self.edge_order = np.argsort(self.edge_key, kind="stable")


def _pairs(prog: SetupClient) -> _Pairs:
    got = prog.__dict__.get("_paper_pairs")
    if got is None:
        got = prog.__dict__["_paper_pairs"] = _Pairs(prog)
    return got


def _edges_of(prog: SetupClient, user_pos: np.ndarray, items: np.ndarray, what: str) -> np.ndarray:
    """Positions of the node edges (client position, item) (an IntegrityError names ``what`` if absent)."""
    p, ids = _pairs(prog), prog.state.item_ids
    at = np.minimum(np.searchsorted(ids, items), max(len(ids) - 1, 0))
    key = user_pos * max(len(ids), 1) + at
    found = np.searchsorted(p.edge_key[p.edge_order], key)
    found = np.minimum(found, max(len(p.edge_order) - 1, 0))
    if len(key) and (
        not len(p.edge_order)
        or not np.array_equal(p.edge_key[p.edge_order][found], key)
        or not np.array_equal(ids[at], items)
    ):
        raise IntegrityError(f"gnn4fr {what}: a gradient for an item its receiver does not hold")
    return p.edge_order[found]


def loss_reply(prog: SetupClient, out: Message, loc: Any, req_holder: np.ndarray) -> Message:
    """Positives' direct gradients stay on the client's edge; negatives' go sealed to their holder.

    ``req_holder`` is the holder that answered each negative request (the key-client for the items
    nobody holds).
    """
    st, E = prog.state.step, len(_pairs(prog).edge_key)
    n_pos = len(st.pos)
    d = loc.d_rows.shape[1]
    st.d_edge = torch.zeros((E, d), dtype=prog.dtype)
    st.r_edge = torch.zeros((E, d), dtype=prog.dtype)
    at = torch.from_numpy(_edges_of(prog, st.users, st.pos, "loss"))
    st.d_edge.index_add_(0, at, loc.d_rows[:n_pos])
    st.r_edge.index_add_(0, at, loc.r_rows[:n_pos])
    neg = np.arange(len(st.neg))
    holder = req_holder[_request_of(st.req_user, st.req_item, st.users[neg], st.neg[neg], prog.n_items)]
    rows = torch.stack([loc.d_rows[n_pos + neg], loc.r_rows[n_pos + neg]], dim=1)
    blobs = [encode_tensor(r) + t for r, t in zip(rows, prog.tokens_of(st.neg[neg]), strict=True)]
    size = ciphertext_size(len(blobs[0])) if blobs else 0
    part = Part(
        Phase.NEGATIVE_GRADIENTS, "item_gradient", CLIENT, SERVER, blobs, shape="blobs", protection="sealed",
        senders=prog.clients[st.users[neg]], seal_to_role=CLIENT, seal_to=holder,
    ).with_sizes(np.full(len(blobs), size))  # fmt: skip
    return out.add("grads", part)


def _request_of(
    req_user: np.ndarray, req_item: np.ndarray, users: np.ndarray, items: np.ndarray, m: int
) -> np.ndarray:
    return np.searchsorted(req_user * m + req_item, users * m + items)


def gradients(prog: SetupClient, request: Message) -> Message:
    """Negatives' direct gradients arrived at their holders: the top layer; pair rows of layer L."""
    st, L = prog.state.step, prog.L
    part = request["grads"]
    blobs = list(part.value or [])
    if blobs:
        rows = torch.stack([_gradient_rows(prog, part, b[:-TOKEN_BYTES]) for b in blobs])
        items = prog.items_of(token_ints([b[-TOKEN_BYTES:] for b in blobs]), "negative gradients")
        held = np.isin(items, prog.state.item_ids)
        recv = np.searchsorted(prog.clients, np.asarray(part.receivers)[held])
        at = torch.from_numpy(_edges_of(prog, recv, items[held], "negative gradients"))
        mine = torch.from_numpy(np.flatnonzero(held))
        st.d_edge.index_add_(0, at, rows[mine, 0])
        st.r_edge.index_add_(0, at, rows[mine, 1])
        rest = torch.from_numpy(np.flatnonzero(~held))  # the custody's: direct part and regulariser
        _custody_paper(prog, items[~held], rows[rest, 0], rows[rest, 1], part)
    else:
        empty = torch.zeros((0, int(st.d_user.shape[1])), dtype=prog.dtype)
        _custody_paper(prog, np.zeros(0, dtype=np.int64), empty, empty, part)
    w = 1.0 / (L + 1)
    st.g_user = w * st.d_user + (st.r_user if L == 0 else 0)
    st.g_edge = w * st.d_edge + (st.r_edge if L == 0 else 0)
    return _pair_rows(prog, L) if L else _shares(prog)


def _custody_paper(
    prog: SetupClient, items: np.ndarray, d: torch.Tensor, r: torch.Tensor, part: Part
) -> None:
    """The key-client's custody steps with the direct gradients it received (nobody propagates them)."""
    cust = prog.state.custody
    if cust is None:
        if len(items):
            raise IntegrityError(f"{part.phase}: a gradient for an item no client of this node holds")
        return
    at = np.searchsorted(prog.state.custody_ids, items)
    w = 1.0 / (prog.L + 1)
    grad = torch.zeros_like(cust.param).index_add_(0, torch.from_numpy(at), w * d + r)
    cust.step(grad, prog.settings.lr)


def _pair_rows(prog: SetupClient, layer: int) -> Message:
    p = _pairs(prog)
    rows = p.M @ prog.state.step.g_edge
    part = Part(
        Phase.neighbour_gradients(layer), "user_gradient", CLIENT, SERVER, rows, protection="sealed",
        senders=p.sender, seal_to_role=CLIENT, seal_to=p.receiver,
    )  # fmt: skip
    return Message({"rows": part})


def _gradient_rows(prog: SetupClient, part: Part, blob: bytes) -> torch.Tensor:
    """A negative's direct and regulariser gradient rows ``(2, d)``, in the node's dtype (never cast)."""
    try:
        rows = decode_tensor(blob)
    except ValueError as exc:
        raise IntegrityError(f"gnn4fr stage {Stage.GRADIENTS!r}: {part.phase}: {exc}") from exc
    d = int(prog.state.users.param.shape[1])
    if rows.dtype != prog.dtype or tuple(rows.shape) != (2, d):
        raise IntegrityError(
            f"gnn4fr stage {Stage.GRADIENTS!r}: {part.phase} holds {rows.dtype} rows of shape "
            f"{tuple(rows.shape)}; this node expects {prog.dtype} rows of shape (2, {d})"
        )
    return rows


def backward(prog: SetupClient, request: Message, layer: int) -> Message:
    """Neighbours' pair rows of layer ``layer + 1`` arrived: clients' and edges' layer-``layer`` gradients.

    ``layer`` is the node's own count (the caller checked the request's field against it).
    """
    st, p, w = prog.state.step, _pairs(prog), 1.0 / (prog.L + 1)
    part = request["rows"]
    prog.check_relay(part)
    recv = torch.from_numpy(np.searchsorted(prog.clients, np.asarray(part.receivers)))
    from_nb = torch.zeros_like(st.d_user).index_add_(0, recv, torch.as_tensor(part.message_rows()))
    g_user = w * st.d_user + p.own @ st.g_edge + from_nb
    g_edge = w * st.d_edge + p.c * st.g_user[torch.from_numpy(prog._graph().own_user)]
    if layer == 0:
        g_user, g_edge = g_user + st.r_user, g_edge + st.r_edge
    st.g_user, st.g_edge = g_user, g_edge
    return _pair_rows(prog, layer) if layer else _shares(prog)


def _shares(prog: SetupClient) -> Message:
    """Fixed-point encode the layer-0 edge shares; split each client's dense vector; seal a share to succ."""
    st, g, m = prog.state.step, prog._graph(), prog.n_items
    d = int(st.g_edge.shape[1])
    fixed = FixedPoint(prog.settings.fixed_point_bits)
    top = float(st.g_edge.abs().max()) if st.g_edge.numel() else 0.0
    fixed.check_sum(int(g.item_holders.max(initial=0)), top, "aggregate")
    enc = fixed.encode(st.g_edge.detach().to(torch.float64))
    items = g.items[g.own_item]
    succ = ring(int(prog.n_users), prog.settings.seed)[prog.clients]
    size = ciphertext_size(m * d * 8)
    if prog.real:
        kept, shares = [], []
        for k in range(len(prog.clients)):
            vec = np.zeros((m, d), dtype=np.uint64)
            sel = g.own_user == k
            vec[items[sel]] = enc[sel]
            keep, share = split(vec.reshape(-1), 2)
            kept.append(keep)
            shares.append(share.tobytes())
        st.kept = np.stack(kept) if kept else np.zeros((0, m * d), dtype=np.uint64)
        value: Any = shares
    else:  # the masks cancel in the ring: the node's uploads add up to its clients' encodings
        total = np.zeros((m, d), dtype=np.uint64)
        np.add.at(total, items, enc)
        st.kept, value = total.reshape(1, -1), None
    part = Part(
        Phase.SHARES, "gradient_share", CLIENT, SERVER, value, shape="blobs", protection="sealed",
        senders=prog.clients, seal_to_role=CLIENT, seal_to=succ,
    ).with_sizes(np.full(len(prog.clients), size))  # fmt: skip
    return Message({"shares": part})


def upload(prog: SetupClient, request: Message) -> Message:
    """Kept share + the predecessor's share, uploaded masked (uniform in the ring)."""
    st, m = prog.state.step, prog.n_items
    part = request["shares"]
    succ = ring(int(prog.n_users), prog.settings.seed)
    pred = np.empty_like(succ)
    pred[succ] = np.arange(len(succ))
    require_senders(part, pred[prog.clients], "ring predecessors")
    d = int(st.g_edge.shape[1])
    if prog.real:
        if any(len(b) != m * d * 8 for b in part.value):
            raise IntegrityError(
                f"gnn4fr stage {Stage.UPLOAD!r}: {part.phase}: a share is not {m} x {d} words"
            )
        got = np.stack([np.frombuffer(b, dtype=np.uint64) for b in part.value])
        value = st.kept + got
    else:
        value = st.kept
    sizes = np.full(len(prog.clients), m * d * 8)
    up = Part(
        Phase.UPLOADS, "gradient_share", CLIENT, SERVER, value, protection="masked", senders=prog.clients
    )
    return Message({"uploads": up.with_sizes(sizes)})


def update(prog: SetupClient, request: Message) -> Message:
    """The dense sum arrived: every holder applies the same Adam step to its copies."""
    st, m = prog.state.step, prog.n_items
    part = request["sum"]
    total = part.value
    d = int(st.g_edge.shape[1])
    if not isinstance(total, np.ndarray) or total.dtype != np.uint64 or total.size != m * d:
        got = f"{getattr(total, 'dtype', type(total).__name__)} of size {getattr(total, 'size', '?')}"
        raise IntegrityError(
            f"gnn4fr stage {Stage.UPDATE!r}: {part.phase} holds {got}; this node expects {m * d} uint64 words"
        )
    total = total.reshape(m, d)
    item_grad = torch.from_numpy(FixedPoint(prog.settings.fixed_point_bits).decode(total)).to(prog.dtype)
    prog.update(st.g_user, item_grad[torch.from_numpy(prog.state.item_ids)])
    st.complete = True
    return Message()
