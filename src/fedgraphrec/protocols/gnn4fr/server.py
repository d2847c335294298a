"""GNN4FR's server role: relays sealed rows and routes them by the ciphertext graph.

What the server holds: public keys and wrapped keys (never S), every client's item *tokens* (the
ciphertext graph of Algorithm 3: which pseudonymous client holds which token, plus the tokens of the
items nobody holds, which the key-client keeps), and the ciphertexts it forwards. It holds no
embedding row and no gradient. Every stage is one
:meth:`~fedgraphrec.runtime.transport.Transport.round` (:class:`~.roles.Stage`); the client side is
:mod:`.client`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto import IntegrityError
from fedgraphrec.protocols.base import ServerProgram, StepStats
from fedgraphrec.protocols.gnn4fr.graph import encode_routing
from fedgraphrec.protocols.gnn4fr.paper import ring
from fedgraphrec.protocols.gnn4fr.roles import (
    CLIENT,
    KEY_HOLDER,
    SERVER,
    TOKEN_BYTES,
    Phase,
    Stage,
    token_ints,
)
from fedgraphrec.protocols.gnn4fr.settings import GNN4FRSettings
from fedgraphrec.runtime.message import Message, Part
from fedgraphrec.runtime.transport import Transport
from fedgraphrec.seeding import numpy_rng

__all__ = ["GNN4FRServer"]


class GNN4FRServer(ServerProgram):
    """The relaying server (module docstring)."""

    settings: GNN4FRSettings

    def __init__(
        self,
        settings: GNN4FRSettings,
        transport: Transport,
        n_clients: int,
        n_items: int,
        tables: Mapping[str, torch.Tensor] | None = None,
    ) -> None:
        super().__init__(settings, transport, n_clients, n_items, tables)
        self.node_of = np.empty(n_clients, dtype=np.uint64)  # Flower node ids are unsigned 64-bit
        for node, ids in self.shards.items():
            self.node_of[ids] = node
        self.step = 0

    # ------------------------------------------------------------------ helpers
    def _all(
        self,
        stage: str,
        fields: dict[str, Any] | None = None,
        parts: dict[int, dict[str, Part]] | None = None,
    ) -> dict[int, Message]:
        """One round to every node, with ``fields`` and each node's ``parts``."""
        requests = {n: Message(dict((parts or {}).get(n, {})), dict(fields or {})) for n in self.nodes}
        return self.transport.round(stage, requests)

    def _concat(self, replies: dict[int, Message], name: str) -> Part | None:
        got = Message.merge([replies[n] for n in self.nodes], name)
        return Part.concat(got) if got else None

    def _relay(
        self, part: Part | None, plan: dict[int, tuple[np.ndarray, np.ndarray]]
    ) -> dict[int, dict[str, Part]]:
        """Forward messages ``pick`` to ``receivers`` per node (``plan[node] = (pick, receivers)``)."""
        if part is None:
            return {}
        share = part.seal_to is None  # a multicast: the copies share the sender's row
        return {
            n: {"rows": part.forward(pick, recv, CLIENT, share_rows=share)}
            for n, (pick, recv) in plan.items()
        }

    def _by_seal_to(self, part: Part | None) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Unicast messages to their sealed receivers' nodes, ordered by (receiver, sender)."""
        if part is None or part.seal_to is None:
            return {n: (np.zeros(0, np.int64), np.zeros(0, np.int64)) for n in self.nodes}
        senders = part.senders if part.senders is not None else np.zeros(len(part.seal_to), np.int64)
        order = np.lexsort((senders, part.seal_to))
        node = self.node_of[part.seal_to[order]]
        return {n: (order[node == n], part.seal_to[order][node == n]) for n in self.nodes}

    def _multicast_plan(self, part: Part) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Every client's row to each of its neighbours (the pairs of the ciphertext graph)."""
        pos = np.empty(self.n_clients, dtype=np.int64)
        assert part.senders is not None
        pos[part.senders] = np.arange(len(part.senders))
        return {n: (pos[s], r) for n, (s, r) in self.pairs.items()}

    # ------------------------------------------------------------------ set-up
    def setup(self) -> None:
        """Algorithms 2-3: keys, tokens, the items nobody holds, each client's routing."""
        n, real = self.n_clients, self.transport.net.real
        self.transport.begin_step(0)
        key_client = int(numpy_rng(self.settings.seed, "gnn4fr", "setup").integers(0, n))
        keys = self._concat(self._all(Stage.PUBLIC_KEYS, {"real": real}), "keys")
        assert keys is not None
        kc = int(self.node_of[key_client])
        assert keys.senders is not None and np.array_equal(np.sort(keys.senders), np.arange(n))
        in_order = [keys.value[k] for k in np.argsort(keys.senders).tolist()]  # client u's key at 32u
        bundle = Part(
            Phase.PUBLIC_KEYS,
            "public_key",
            SERVER,
            KEY_HOLDER,
            [b"".join(in_order)],
            shape="blobs",
            receivers=np.array([key_client]),
        )
        fields = {"real": real, "key_client": key_client}
        wrapped = self.transport.round(Stage.WRAP_KEY, {kc: Message({"keys": bundle}, fields)})[kc]["wrapped"]
        parts = {node: {"wrapped": wrapped.forward(ids, ids, CLIENT)} for node, ids in self.shards.items()}
        tokens = self._concat(self._all(Stage.UNWRAP_KEY, {"real": real}, parts), "tokens")
        assert tokens is not None and tokens.senders is not None
        self._build_graph(tokens)
        held = Part(
            Phase.CATALOGUE,
            "item_token",
            SERVER,
            KEY_HOLDER,
            [self.held_tokens],
            shape="blobs",
            protection="pseudonymous",
            receivers=np.array([key_client]),
        )
        got = self.transport.round(Stage.CATALOGUE, {kc: Message({"held": held}, fields)})[kc][
            "unheld"
        ].value[0]
        unheld = token_ints([got[k : k + TOKEN_BYTES] for k in range(0, len(got), TOKEN_BYTES)])
        if len(unheld) + len(self.col_handles) != self.n_items or np.isin(unheld, self.col_handles).any():
            raise IntegrityError(f"{Phase.CATALOGUE}: the held and unheld items do not make up the catalogue")
        self._add_custody(unheld, key_client)
        routing = {
            node: {
                "routing": Part(
                    Phase.NEIGHBOURS,
                    "graph",
                    SERVER,
                    CLIENT,
                    [self._routing(u) for u in ids.tolist()],
                    shape="blobs",
                    receivers=ids,
                )
            }
            for node, ids in self.shards.items()
        }
        self._all(Stage.ROUTING, parts=routing)
        self.succ = ring(n, self.settings.seed) if self.settings.paper_literal else None

    def _build_graph(self, tokens: Part) -> None:
        """The ciphertext graph: token columns by first appearance, holders per column, neighbour pairs."""
        n = self.n_clients
        lens = np.array([len(b) // TOKEN_BYTES for b in tokens.value], dtype=np.int64)
        flat = b"".join(tokens.value)
        handles = token_ints([flat[k : k + TOKEN_BYTES] for k in range(0, len(flat), TOKEN_BYTES)])
        owner = np.repeat(np.asarray(tokens.senders), lens)
        uniq, first, col = np.unique(handles, return_index=True, return_inverse=True)
        rank = np.argsort(np.argsort(first))  # columns numbered by first appearance
        col = rank[col]
        self.col_handles = np.empty(len(uniq), dtype=np.int64)
        self.col_handles[rank] = uniq
        self.held_tokens = b"".join(
            flat[TOKEN_BYTES * k : TOKEN_BYTES * (k + 1)] for k in first[np.argsort(rank)].tolist()
        )
        self.holding = sp.csr_matrix((np.ones(len(col)), (owner, col)), shape=(n, len(uniq)))
        self.holding.sort_indices()
        self.by_col = self.holding.tocsc()
        self.by_col.sort_indices()
        self.degree = np.diff(self.holding.indptr)
        self.own_cols = {int(u): col[owner == u] for u in np.unique(owner)}  # in each client's upload order
        nb = (self.holding @ self.holding.T).tocsr()
        nb.setdiag(0)
        nb.eliminate_zeros()
        nb.sort_indices()
        self.nb = nb
        self.pairs = {}
        for node, ids in self.shards.items():
            sub = nb[ids]
            self.pairs[node] = (sub.indices.astype(np.int64), np.repeat(ids, np.diff(sub.indptr)))
        self._handle_order = np.argsort(self.col_handles)

    def _add_custody(self, unheld: np.ndarray, custodian: int) -> None:
        """Columns for the items nobody holds, all routed to the custodian (not part of the graph)."""
        n_held = len(self.col_handles)
        self.col_handles = np.concatenate([self.col_handles, unheld])
        self.custody = np.arange(n_held, len(self.col_handles))
        rows = np.concatenate([self.by_col.tocoo().row, np.full(len(unheld), custodian)])
        cols = np.concatenate([self.by_col.tocoo().col, self.custody])
        self.route = sp.csc_matrix(
            (np.ones(len(rows)), (rows, cols)), shape=(self.n_clients, len(self.col_handles))
        )
        self.route.sort_indices()
        self._handle_order = np.argsort(self.col_handles)

    def _routing(self, u: int) -> bytes:
        """Client ``u``'s neighbours, their degrees, and who holds which of its items."""
        nbs = self.nb.indices[self.nb.indptr[u] : self.nb.indptr[u + 1]].astype(np.int64)
        cols = self.own_cols.get(u, np.zeros(0, np.int64))
        counts = np.diff(self.by_col.indptr)[cols]
        holders = (
            np.concatenate(
                [
                    self.by_col.indices[self.by_col.indptr[c] : self.by_col.indptr[c + 1]]
                    for c in cols.tolist()
                ]
            )
            if len(cols)
            else np.zeros(0, np.int64)
        )
        item_idx = np.repeat(np.arange(len(cols)), counts)
        keep = holders != u
        return encode_routing(nbs, self.degree[nbs], np.searchsorted(nbs, holders[keep]), item_idx[keep])

    def _cols_of(self, handles: np.ndarray) -> np.ndarray:
        """Columns of token handles (-1: an item nobody holds)."""
        at = np.minimum(
            np.searchsorted(self.col_handles[self._handle_order], handles),
            max(len(self._handle_order) - 1, 0),
        )
        cols = self._handle_order[at] if len(self._handle_order) else np.zeros(len(handles), np.int64)
        if len(cols) and not np.array_equal(self.col_handles[cols], handles):
            raise IntegrityError("gnn4fr: a client named an item token that is not in the catalogue")
        return cols

    # ------------------------------------------------------------------ one minibatch
    def _forward(self, replies: dict[int, Message], prefix: str) -> dict[int, Message]:
        for layer in range(self.settings.n_layers):
            part = self._concat(replies, "rows")
            assert part is not None
            replies = self._all(
                Stage.FORWARD,
                {"layer": layer, "prefix": prefix},
                self._relay(part, self._multicast_plan(part)),
            )
        return replies

    def train_step(self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> StepStats:
        """One minibatch: forward, negatives, loss, backward (transposed or paper-literal), Adam."""
        s, L = self.settings, self.settings.n_layers
        self.transport.begin_step(self.step)
        u, p, q = users.numpy(), pos.numpy(), neg.numpy()
        node = self.node_of[u]
        batches = {
            n: Message(
                fields={
                    "users": u[node == n].tolist(),
                    "pos": p[node == n].tolist(),
                    "neg": q[node == n].tolist(),
                    "batch": len(u),
                }
            )
            for n in self.nodes
        }
        replies = self._forward(self.transport.round(Stage.BEGIN, batches), "forward")
        replies = self._negatives(replies)
        bpr = sum(float(r.fields["bpr"]) for r in replies.values())
        reg = sum(float(r.fields["reg"]) for r in replies.values())
        grads = self._concat(replies, "grads")
        if s.paper_literal:
            replies = self._all(
                Stage.GRADIENTS,
                parts={
                    n: {"grads": grads.forward(pk, rc, CLIENT)}
                    for n, (pk, rc) in self._by_seal_to(grads).items()
                }
                if grads is not None
                else {},
            )
            for layer in range(L, 0, -1):
                part = self._concat(replies, "rows")
                replies = self._all(
                    Stage.BACKWARD, {"layer": layer}, self._relay(part, self._by_seal_to(part))
                )
            self._aggregate(replies)
        else:
            tokens = self._concat(replies, "tokens")
            replies = self.transport.round(Stage.GRADIENTS, self._route_gradients(grads, tokens))
            for layer in range(L, 0, -1):
                part = self._concat(replies, "rows")
                assert part is not None
                replies = self._all(
                    Stage.BACKWARD, {"layer": layer}, self._relay(part, self._multicast_plan(part))
                )
        self.step += 1
        return StepStats(loss=bpr + s.reg * reg, bpr=bpr, reg=reg, clients=len(np.unique(u)))

    def _negatives(self, replies: dict[int, Message]) -> dict[int, Message]:
        """Negatives' embeddings of all layers from their designated holder (the lowest id)."""
        req = self._concat(replies, "requests")
        handles = token_ints(list(req.value)) if req is not None else np.zeros(0, np.int64)
        requester = req.senders if req is not None and req.senders is not None else np.zeros(0, np.int64)
        holder = self.route.indices[self.route.indptr[self._cols_of(handles)]].astype(np.int64)
        serve = {
            n: Message(
                fields={
                    "holders": holder[sel].tolist(),
                    "requesters": requester[sel].tolist(),
                    "tokens": handles[sel].tolist(),
                }
            )
            for n in self.nodes
            for sel in [np.flatnonzero(self.node_of[holder] == n)]
        }
        emb = self._concat(self.transport.round(Stage.NEGATIVES, serve), "embeddings")
        assert emb is not None
        parts = {
            n: {"embeddings": emb.forward(pick, recv, CLIENT)}
            for n, (pick, recv) in self._by_seal_to(emb).items()
        }
        return self._all(Stage.LOSS, parts=parts)

    def _route_gradients(self, grads: Part | None, tokens: Part | None) -> dict[int, Message]:
        """Each direct item gradient to every holder of its item but the sender (its token alongside)."""
        if grads is None or tokens is None or grads.senders is None:
            raise RuntimeError(f"{Phase.ITEM_GRADIENTS}: a node sent no direct gradients part")
        handles = token_ints(list(tokens.value))
        cols = self._cols_of(handles)
        counts = np.diff(self.route.indptr)[cols]
        msg = np.repeat(np.arange(len(cols)), counts)
        start = np.repeat(self.route.indptr[cols], counts)
        recv = self.route.indices[
            start + np.arange(len(msg)) - np.repeat(np.cumsum(counts) - counts, counts)
        ].astype(np.int64)
        keep = (recv != grads.senders[msg]) | np.isin(cols[msg], self.custody)  # the custodian gets its own
        msg, recv = msg[keep], recv[keep]
        order = np.lexsort((msg, recv))
        msg, recv = msg[order], recv[order]
        node = self.node_of[recv]
        return {
            n: Message(
                {"grads": grads.forward(msg[node == n], recv[node == n], CLIENT, share_rows=True)},
                {"tokens": handles[msg[node == n]].tolist()},
            )
            for n in self.nodes
        }

    def _aggregate(self, replies: dict[int, Message]) -> None:
        """Paper-literal: shares to the ring successors, uploads summed, the dense sum to everybody."""
        shares = self._concat(replies, "shares")
        assert shares is not None
        parts = {
            n: {"shares": shares.forward(pk, rc, CLIENT)} for n, (pk, rc) in self._by_seal_to(shares).items()
        }
        ups = self._concat(self._all(Stage.UPLOAD, parts=parts), "uploads")
        assert ups is not None
        total = np.sum(np.asarray(ups.value, dtype=np.uint64), axis=0, dtype=np.uint64)
        size = int(total.size) * 8
        out = {
            n: {
                "sum": Part(
                    Phase.SUM, "item_gradient", SERVER, CLIENT, total, shape="broadcast", receivers=ids
                ).with_sizes(np.full(len(ids), size))
            }
            for n, ids in self.shards.items()
        }
        self._all(Stage.UPDATE, parts=out)

    # ------------------------------------------------------------------ prediction (Algorithm 6)
    def predict(self) -> None:
        """A forward pass; one random holder per item uploads it; every client gets what it lacks."""
        self.transport.begin_step(self.step)
        self._forward(self._all(Stage.BEGIN, {"prefix": "predict/forward"}), "predict/forward")
        rng = numpy_rng(self.settings.seed, "gnn4fr", "predict", self.step)
        deg = np.diff(self.route.indptr)
        pick = self.route.indices[
            self.route.indptr[:-1] + (rng.random(len(deg)) * deg).astype(np.int64)
        ].astype(np.int64)
        cols = np.arange(len(deg))
        node = self.node_of[pick]
        asks = {
            n: Message(
                fields={
                    "holders": pick[node == n].tolist(),
                    "tokens": self.col_handles[cols[node == n]].tolist(),
                }
            )
            for n in self.nodes
        }
        items = self._concat(self.transport.round(Stage.PREDICT_ITEMS, asks), "items")
        assert items is not None
        pos = np.empty(len(cols), dtype=np.int64)
        pos[np.concatenate([cols[node == n] for n in self.nodes])] = np.arange(len(cols))
        parts: dict[int, dict[str, Part]] = {}
        for n, ids in self.shards.items():
            lack = [
                np.setdiff1d(cols, self.holding.indices[self.holding.indptr[u] : self.holding.indptr[u + 1]])
                for u in ids.tolist()
            ]
            recv = np.repeat(ids, [len(x) for x in lack])
            pick = pos[np.concatenate(lack)] if lack else np.zeros(0, np.int64)
            parts[n] = {"items": items.forward(pick, recv, CLIENT, share_rows=True)}
        self._all(Stage.PREDICT_DELIVER, parts=parts)

    def state_dict(self) -> dict[str, Any]:
        """The step counter (the server holds no parameter)."""
        return {"step": self.step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.step = int(state["step"])
