"""What a GNN4FR node knows of the graph after Algorithm 3, as arrays (part of its typed state).

The server tells each client its neighbours (pseudonymous ids and degrees) and which neighbours
hold which of its items (the connectivity of its 2-hop ego graph). A node hosting a shard of clients
merges its clients' ego graphs into one local graph: its *items* (every item one of its clients
holds), its *known users* (its clients and all their neighbours) and the normalised edges between
them, so one sparse product computes every item of the shard at once. Every copy of an item is
equal on every holder, so the node keeps one copy per item.

Wire format of the routing message to client ``u`` (phase ``setup/neighbours``): ``|N_u|`` (int64),
then ``|N_u|`` pairs ``(neighbour id, neighbour degree)`` (int64), then one pair ``(neighbour index,
item index)`` (int32) per (neighbour, common item), items indexed in the client's token order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.models.propagation import torch_csr
from fedgraphrec.runtime.part import Part

__all__ = ["LocalGraph", "build_local_graph", "decode_routing", "encode_routing"]


def encode_routing(
    neighbours: np.ndarray, degrees: np.ndarray, nb_index: np.ndarray, item_index: np.ndarray
) -> bytes:
    """One client's routing message (module docstring)."""
    head = np.array([len(neighbours)], dtype=np.int64).tobytes()
    table = np.stack([neighbours, degrees], axis=1).astype(np.int64).tobytes()
    conn = np.stack([nb_index, item_index], axis=1).astype(np.int32).tobytes()
    return head + table + conn


def decode_routing(blob: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Inverse of :func:`encode_routing`: neighbours, degrees, connectivity (neighbour, item) indices."""
    k = int(np.frombuffer(blob[:8], dtype=np.int64)[0])
    table = np.frombuffer(blob[8 : 8 + 16 * k], dtype=np.int64).reshape(k, 2)
    conn = np.frombuffer(blob[8 + 16 * k :], dtype=np.int32).reshape(-1, 2)
    return table[:, 0].copy(), table[:, 1].copy(), conn[:, 0].astype(np.int64), conn[:, 1].astype(np.int64)


@dataclass
class LocalGraph:
    r"""A node's merged ego graphs (module docstring); every array indexed as documented.

    Attributes:
        items: the node's items (global ids, sorted).
        known: the node's clients and all their neighbours (global ids, sorted).
        own_at: position of each of the node's clients in ``known``.
        item_holders: ``|U_i|`` of every node item.
        rt_item, rt_user, rt_value: edges (item, known user) of every node item, value
            :math:`c_{ui} = 1/\sqrt{|I_u||U_i|}` (the rows of :math:`R^\top` the node needs).
        own_user, own_item, own_value: edges of the node's clients (client position, item position).
        nb_ptr, nb_ids: each client's neighbours (CSR over the node's clients, ids sorted).
        first_copy: for every known user, the index of its first copy in a relay ordered by
            (receiver, sender) over ``nb_ids`` (-1 for the node's own clients).
        rep: for every node item, the position of the node client that represents the item (its
            lowest-numbered holder on the node).
    """

    items: np.ndarray
    known: np.ndarray
    own_at: np.ndarray
    item_holders: np.ndarray
    rt_item: np.ndarray
    rt_user: np.ndarray
    rt_value: np.ndarray
    own_user: np.ndarray
    own_item: np.ndarray
    own_value: np.ndarray
    nb_ptr: np.ndarray
    nb_ids: np.ndarray
    first_copy: np.ndarray
    rep: np.ndarray

    def rt(self, dtype: torch.dtype) -> torch.Tensor:
        r""":math:`R^\top` restricted to (node items × known users), CSR."""
        return self._matrix(
            "rt", self.rt_item, self.rt_user, self.rt_value, (len(self.items), len(self.known)), dtype
        )

    def r_own(self, dtype: torch.dtype) -> torch.Tensor:
        """:math:`R` restricted to (node clients × node items), CSR."""
        shape = (len(self.own_at), len(self.items))
        return self._matrix("r", self.own_user, self.own_item, self.own_value, shape, dtype)

    def _matrix(
        self,
        name: str,
        rows: np.ndarray,
        cols: np.ndarray,
        vals: np.ndarray,
        shape: tuple[int, int],
        dtype: torch.dtype,
    ) -> torch.Tensor:
        cache: dict[str, torch.Tensor] = self.__dict__.setdefault("_csr", {})  # not a field: not state
        key = f"{name}/{dtype}"
        if key not in cache:
            cache[key] = torch_csr(sp.csr_matrix((vals, (rows, cols)), shape=shape), dtype)
        return cache[key]

    def gather_known(self, own_rows: torch.Tensor, relay: Part) -> torch.Tensor:
        """Rows of every known user: the node's own, and each neighbour's first relayed copy."""
        out = own_rows.new_empty((len(self.known), own_rows.shape[1]))
        out[torch.from_numpy(self.own_at)] = own_rows
        nb = self.first_copy >= 0
        if nb.any():
            out[torch.from_numpy(np.flatnonzero(nb))] = torch.as_tensor(
                relay.message_rows(self.first_copy[nb])
            )
        return out


def build_local_graph(
    clients: np.ndarray,
    own_items: list[np.ndarray],
    routing: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
) -> LocalGraph:
    """Merge the clients' ego graphs (their items in token order, and their routing messages)."""
    n_own = len(clients)
    nb_lists = [r[0] for r in routing]
    users = [clients, *nb_lists]
    known = np.unique(np.concatenate(users)) if n_own else np.zeros(0, dtype=np.int64)
    degree = np.zeros(len(known), dtype=np.int64)
    own_at = np.searchsorted(known, clients)
    degree[own_at] = [len(x) for x in own_items]
    edge_user: list[np.ndarray] = []
    edge_item: list[np.ndarray] = []
    for k, ((nbs, degs, nb_idx, it_idx), mine) in enumerate(zip(routing, own_items, strict=True)):
        degree[np.searchsorted(known, nbs)] = degs
        edge_user += [np.full(len(mine), clients[k]), nbs[nb_idx]]
        edge_item += [mine, mine[it_idx]]
    items = np.unique(np.concatenate(own_items)) if own_items else np.zeros(0, dtype=np.int64)
    eu = np.concatenate(edge_user) if edge_user else np.zeros(0, dtype=np.int64)
    ei = np.concatenate(edge_item) if edge_item else np.zeros(0, dtype=np.int64)
    pairs = np.unique(np.searchsorted(items, ei) * max(len(known), 1) + np.searchsorted(known, eu))
    rt_item, rt_user = pairs // max(len(known), 1), pairs % max(len(known), 1)
    holders = np.bincount(rt_item, minlength=len(items))
    rt_value = 1.0 / np.sqrt(degree[rt_user] * holders[rt_item])
    own_user = np.repeat(np.arange(n_own), [len(x) for x in own_items])
    own_item = np.searchsorted(items, np.concatenate(own_items)) if own_items else np.zeros(0, dtype=np.int64)
    own_value = 1.0 / np.sqrt(degree[own_at][own_user] * holders[own_item])
    nb_ptr = np.zeros(n_own + 1, dtype=np.int64)
    nb_ptr[1:] = np.cumsum([len(x) for x in nb_lists])
    nb_ids = np.concatenate(nb_lists) if nb_lists else np.zeros(0, dtype=np.int64)
    first_copy = np.full(len(known), -1, dtype=np.int64)
    if len(nb_ids):
        senders, first = np.unique(nb_ids, return_index=True)
        first_copy[np.searchsorted(known, senders)] = first
    first_copy[own_at] = -1
    rep = np.full(len(items), n_own, dtype=np.int64)
    np.minimum.at(rep, own_item, own_user)
    return LocalGraph(
        items=items,
        known=known,
        own_at=own_at,
        item_holders=holders,
        rt_item=rt_item,
        rt_user=rt_user,
        rt_value=rt_value,
        own_user=own_user,
        own_item=own_item,
        own_value=own_value,
        nb_ptr=nb_ptr,
        nb_ids=nb_ids,
        first_copy=first_copy,
        rep=rep,
    )
