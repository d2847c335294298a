"""The set-up half of GNN4FR's server program: routing helpers and Algorithms 2-3.

:class:`SetupServer` relays the key set-up (public keys to the key-client, wrapped keys back to
their owners), numbers the uploaded item tokens (by first appearance), builds the ciphertext graph
(holders per token, neighbour pairs, each client's routing message), learns the tokens of the items
nobody holds (routed to the key-client, which keeps them) and plans every relay of a step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.tokens import TOKEN_BYTES
from fedgraphrec.protocols.base import ServerProgram
from fedgraphrec.protocols.gnn4fr.graph import encode_routing
from fedgraphrec.protocols.gnn4fr.paper import ring
from fedgraphrec.protocols.gnn4fr.roles import (
    CLIENT,
    KEY_HOLDER,
    SERVER,
    Phase,
    Stage,
    key_client_of,
    token_ints,
)
from fedgraphrec.protocols.gnn4fr.settings import GNN4FRSettings
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part

__all__ = ["SetupServer"]


class SetupServer(ServerProgram):
    """The relaying server: its helpers and set-up (module docstring)."""

    settings: GNN4FRSettings

    def init_state(self) -> None:
        """Each client's node (for routing) and the step counter."""
        self.node_of = np.empty(self.n_clients, dtype=np.uint64)  # Flower node ids are unsigned 64-bit
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
        return {  # forwarded parts are views: multicast copies share the sender's row
            n: {"rows": part.forward(pick, recv, CLIENT)} for n, (pick, recv) in plan.items()
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
        key_client = key_client_of(n, self.settings.seed)
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
