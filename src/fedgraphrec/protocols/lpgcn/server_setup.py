r"""The LP-GCN server's set-up: Algorithm 2's relaying, Algorithm 3, verification routing.

The server never holds :math:`S`, an item id of a held item, a user embedding or a user gradient
in the clear. What it learns and keeps (spec ``lpgcn.md`` §1.3): the public keys, the bipartite
graph of client pseudonyms and item *tokens* (real and virtual edges alike) numbered by first
appearance (its *columns*), the candidate convolution-clients and the assignment (Algorithm 3:
greedy cover, then a uniformly drawn candidate holder per item), and the routing that follows:
who receives whose sealed rows, which item rows each holder needs. Items nobody holds are named to
it by the key-client and owned by it (§11.17).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto.agreement import PUBLIC_KEY_BYTES
from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.tokens import TOKEN_BYTES
from fedgraphrec.protocols.base import ServerProgram
from fedgraphrec.protocols.common import CLIENT, KEY_HOLDER, SERVER
from fedgraphrec.protocols.lpgcn.cover import plan_convolution
from fedgraphrec.protocols.lpgcn.holdings import TokenIndex, key_client_of
from fedgraphrec.protocols.lpgcn.roles import (
    CONV_CLIENT,
    SETUP_DEGREES,
    SETUP_INIT,
    SETUP_KEYS,
    SETUP_TOKENS,
    SETUP_UNHELD,
    SETUP_VERIFY,
    SETUP_WRAP,
)
from fedgraphrec.protocols.lpgcn.settings import LPGCNSettings
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part
from fedgraphrec.runtime.state import empty_ids

__all__ = ["NodePlan", "SetupRounds"]


@dataclass
class NodePlan:
    """What the server routes to and from one node (its clients' pseudonyms, never their data).

    Attributes:
        clients: the node's clients (sorted).
        conv_cols, conv_owner: its convolution-items (columns) and their convolution-clients, in
            the assignment's order (by convolution-client, then column).
        conv_senders, conv_counts: its convolution-clients and how many items each convolves.
        sync_cols: columns its clients hold that other nodes convolve (sorted).
        sync_node, sync_pos: where each of them is convolved (node index, position there).
        sync_to, sync_counts: its clients that receive synchronised rows, and how many each.
        held_cols: every column its clients hold (sorted).
        relay: per source node index, the positions of the senders in that node's upload and the
            convolution-clients here that receive them (the routing pairs, in delivery order).
    """

    clients: np.ndarray
    conv_cols: np.ndarray = field(default_factory=empty_ids)
    conv_owner: np.ndarray = field(default_factory=empty_ids)
    conv_senders: np.ndarray = field(default_factory=empty_ids)
    conv_counts: np.ndarray = field(default_factory=empty_ids)
    sync_cols: np.ndarray = field(default_factory=empty_ids)
    sync_node: np.ndarray = field(default_factory=empty_ids)
    sync_pos: np.ndarray = field(default_factory=empty_ids)
    sync_to: np.ndarray = field(default_factory=empty_ids)
    sync_counts: np.ndarray = field(default_factory=empty_ids)
    held_cols: np.ndarray = field(default_factory=empty_ids)
    relay: list[tuple[int, np.ndarray, np.ndarray]] = field(default_factory=list)


class SetupRounds(ServerProgram):
    """Set-up rounds of the LP-GCN server (module docstring)."""

    settings: LPGCNSettings

    def _init_plan(self) -> None:
        self.node_ids = list(self.nodes)
        self.node_index = np.zeros(self.n_clients, dtype=np.int64)
        for j, node in enumerate(self.node_ids):
            self.node_index[self.shards[node]] = j
        self.plans = [NodePlan(self.shards[node]) for node in self.node_ids]

    def _round(self, stage: str, requests: dict[int, Message]) -> dict[int, Message]:
        return self.transport.round(stage, requests)

    def setup(self) -> None:
        """Algorithm 2 (keys, :math:`S`, tokens), Algorithm 3, verification, degrees: seven rounds."""
        s, n, m = self.settings, self.n_clients, self.n_items
        self._init_plan()
        self.transport.begin_step(-1)
        # --- Algorithm 2 lines 1-7: public keys to the key-client, S wrapped for everybody
        replies = self._round(SETUP_KEYS, {node: Message() for node in self.node_ids})
        roster: list[bytes] = [b""] * n
        for part in Message.merge(replies, "public-keys"):
            if part.value is not None and part.senders is not None:
                for u, pk in zip(part.senders.tolist(), part.value, strict=True):
                    roster[u] = pk
        self.roster = roster
        self.key_client = key_client_of(s.seed, n)
        kc_node = self.node_ids[int(self.node_index[self.key_client])]
        keys = Part(
            "setup/public-keys", "public_key", SERVER, KEY_HOLDER, [b"".join(roster)] if s.real else None,
            shape="blobs", receivers=np.array([self.key_client]),
        ).with_sizes(np.array([n * PUBLIC_KEY_BYTES]))  # fmt: skip
        fields = {"key_client": self.key_client, "n_clients": n, "n_items": m}
        wrapped = self._round(SETUP_WRAP, {kc_node: Message({"public-keys": keys}, fields)})[kc_node][
            "wrapped"
        ]
        requests = {
            node: Message({"wrapped": wrapped.forward(plan.clients, plan.clients, CLIENT)})
            for node, plan in zip(self.node_ids, self.plans, strict=True)
        }
        replies = self._round(SETUP_TOKENS, requests)
        self._token_graph(replies)
        self._unheld(kc_node, fields)
        # --- Algorithm 3: candidate convolution-clients by greedy cover, one per item at random
        self.conv_of_col = np.asarray(plan_convolution(self.view, s.seed).conv_client_of_item, dtype=np.int64)
        self.degree_parts = {node: replies[node]["degrees"] for node in self.node_ids}
        self._verification()

    # ------------------------------------------------------------------ token graph
    def _token_graph(self, replies: dict[int, Message]) -> None:
        """Columns numbered by first appearance (clients in id order), never by token value."""
        n, m = self.n_clients, self.n_items
        uploads: list[bytes] = [b""] * n
        for part in Message.merge(replies, "tokens"):
            assert part.senders is not None
            for u, blob in zip(part.senders.tolist(), part.value, strict=True):
                uploads[u] = blob
        counts = np.fromiter((len(b) // TOKEN_BYTES for b in uploads), dtype=np.int64, count=n)
        flat = np.frombuffer(b"".join(uploads), dtype=np.uint8).reshape(-1, TOKEN_BYTES)
        keys = np.ascontiguousarray(flat).view(np.dtype((np.void, TOKEN_BYTES))).ravel()
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        rank = np.empty(len(first), dtype=np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(len(first))
        self.hold_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.hold_col = rank[inverse.ravel()]
        self.n_held = len(first)
        if self.n_held > m:
            raise IntegrityError(f"setup/item-tokens: {self.n_held} distinct tokens for {m} items")
        self.col_tokens = np.zeros((m, TOKEN_BYTES), dtype=np.uint8)
        self.col_tokens[rank] = flat[first]
        rows = np.repeat(np.arange(n), counts)
        self.view = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, self.hold_col)), shape=(n, m))
        self.view.sort_indices()

    def _unheld(self, kc_node: int, fields: dict[str, int]) -> None:
        """Items no client holds: the key-client names them (token, id); the server owns their rows.

        The key-client also seals the list for every client (:mod:`.unheld`), relayed at
        verification. The stage runs even when every item has a holder (an empty list): every
        node expects the list.
        """
        h, m = self.n_held, self.n_items
        held = Part(
            "setup/held-tokens", "item_token", SERVER, KEY_HOLDER, [self.col_tokens[:h].tobytes()],
            shape="blobs", protection="pseudonymous", receivers=np.array([self.key_client]),
        )  # fmt: skip
        reply = self._round(SETUP_UNHELD, {kc_node: Message({"held-tokens": held}, fields)})[kc_node]
        self.unheld_list = reply["unheld-list"]
        body = np.frombuffer(reply["unheld"].value[0], dtype=np.uint8).reshape(-1, TOKEN_BYTES + 8)
        if len(body) != m - h:
            raise IntegrityError(f"setup/unheld-items: {len(body)} items named for {m - h} unheld ones")
        self.col_tokens[h:] = body[:, :TOKEN_BYTES]
        self.unheld_ids = np.ascontiguousarray(body[:, TOKEN_BYTES:]).view("<i8").ravel().astype(np.int64)
        self.token_index = TokenIndex(self.col_tokens)
        dtype = self.tables["item_emb"].dtype
        ids = torch.from_numpy(self.unheld_ids)
        self.own_rows = self.tables["item_emb"][ids].clone().to(dtype)
        self.own_m, self.own_v = torch.zeros_like(self.own_rows), torch.zeros_like(self.own_rows)
        self.dim = int(self.tables["item_emb"].shape[1])
        self.dtype = dtype

    # ------------------------------------------------------------------ verification and routing
    def _verification(self) -> None:
        """Assignment to convolution-clients; each holder asked by the item's convolution-client."""
        s = self.settings
        conv, nodes = self.conv_of_col, self.node_index
        hold_rows = np.repeat(np.arange(self.n_clients), np.diff(self.hold_ptr))
        owner = conv[self.hold_col]
        ask = owner != hold_rows
        requests: dict[int, Message] = {}
        asked: dict[int, np.ndarray] = {}
        for j, (node, plan) in enumerate(zip(self.node_ids, self.plans, strict=True)):
            cols = np.flatnonzero((conv >= 0) & (nodes[np.maximum(conv, 0)] == j))
            order = np.lexsort((cols, conv[cols]))
            plan.conv_cols, plan.conv_owner = cols[order], conv[cols[order]]
            plan.conv_senders, plan.conv_counts = np.unique(plan.conv_owner, return_counts=True)
            plan.conv_counts = plan.conv_counts.astype(np.int64)
            msg = Message()  # the key-client's list of unheld items: each client's own copy
            msg.add("unheld-list", self.unheld_list.forward(plan.clients, plan.clients))
            if len(plan.conv_senders):
                bounds = np.concatenate([[0], np.cumsum(plan.conv_counts)]).tolist()
                blobs = [
                    self.col_tokens[plan.conv_cols[a:b]].tobytes() for a, b in itertools.pairwise(bounds)
                ]
                msg.add("assignment", Part(
                    "setup/assignment", "item_token", SERVER, CONV_CLIENT, blobs, shape="blobs",
                    protection="pseudonymous", receivers=plan.conv_senders,
                ))  # fmt: skip
            q = np.flatnonzero(ask & (nodes[hold_rows] == j))
            asked[node] = self.hold_col[q]
            tok = self.col_tokens[self.hold_col[q]]
            msg.add("questions", Part(
                "setup/verification-question", "item_token", SERVER, CLIENT, [bytes(t) for t in tok],
                shape="blobs", protection="pseudonymous", receivers=hold_rows[q], senders=owner[q],
                from_role=CONV_CLIENT,
            ))  # fmt: skip
            pairs = np.unique(hold_rows[q] * self.n_clients + owner[q])
            who, asker = pairs // self.n_clients, pairs % self.n_clients
            keys = [self.roster[a] for a in asker.tolist()] if s.real else None
            msg.add("asker-keys", Part(
                "setup/asker-keys", "public_key", SERVER, CLIENT, keys, shape="blobs", receivers=who,
                senders=asker, from_role=CONV_CLIENT,
            ).with_sizes(np.full(len(who), PUBLIC_KEY_BYTES)))  # fmt: skip
            requests[node] = msg
        replies = self._round(SETUP_VERIFY, requests)
        self._initial_rows(replies, asked)

    def _initial_rows(self, replies: dict[int, Message], asked: dict[int, np.ndarray]) -> None:
        """Answers and degrees to the convolution-clients; they return their items' real degrees."""
        s, conv, nodes = self.settings, self.conv_of_col, self.node_index
        hold_rows = np.repeat(np.arange(self.n_clients), np.diff(self.hold_ptr))
        owner = conv[self.hold_col]
        requests: dict[int, Message] = {}
        for j, (node, plan) in enumerate(zip(self.node_ids, self.plans, strict=True)):
            ans_parts, ans_cols = [], []
            for src in self.node_ids:
                part = replies[src]["answers"]
                assert part.seal_to is not None
                pick = np.flatnonzero(nodes[part.seal_to] == j) if len(part.seal_to) else empty_ids()
                if len(pick):
                    ans_parts.append(part.forward(pick, part.seal_to[pick], CONV_CLIENT))
                    ans_cols.append(asked[src][pick])
            # routing pairs: every holder (real or virtual) of a convolution-item here, but its owner
            mine = (owner >= 0) & (nodes[np.maximum(owner, 0)] == j) & (owner != hold_rows)
            pairs = np.unique(owner[mine] * self.n_clients + hold_rows[mine])
            p_conv, p_user = pairs // self.n_clients, pairs % self.n_clients
            plan.relay = []
            deg_parts = []
            for k, src in enumerate(self.node_ids):
                sel = nodes[p_user] == k
                if sel.any():
                    pick = np.searchsorted(self.plans[k].clients, p_user[sel])
                    plan.relay.append((k, pick, p_conv[sel]))
                    deg_parts.append(self.degree_parts[src].forward(pick, p_conv[sel], CONV_CLIENT))
            msg = Message(fields={
                "held_col": self.hold_col[_entries(self.hold_ptr, plan.clients)],
                "n_columns": self.n_items,
                "answer_cols": np.concatenate(ans_cols) if ans_cols else empty_ids(),
            })  # fmt: skip
            if ans_parts:
                msg.add("answers", Part.concat(ans_parts))
            if deg_parts:
                msg.add("degrees", Part.concat(deg_parts))
            requests[node] = msg
        replies = self._round(SETUP_INIT, requests)
        self.item_degree = np.zeros(self.n_items)
        if s.plus:
            self.W = torch.zeros((self.n_items, self.dim), dtype=self.dtype)
            self.W[torch.from_numpy(np.arange(self.n_held, self.n_items))] = self.tables["item_w"][
                torch.from_numpy(self.unheld_ids)
            ].to(self.dtype)
        for node, plan in zip(self.node_ids, self.plans, strict=True):
            if "item-degrees" in replies[node]:
                self.item_degree[plan.conv_cols] = np.asarray(replies[node]["item-degrees"].value).ravel()
            if s.plus and "initial-w" in replies[node]:
                self.W[torch.from_numpy(plan.conv_cols)] = torch.as_tensor(replies[node]["initial-w"].value)
        if s.plus:
            self.W_m, self.W_v = torch.zeros_like(self.W), torch.zeros_like(self.W)
        self._synchronisation()

    def _synchronisation(self) -> None:
        """Which rows each holder needs from elsewhere; their real degrees go with the first of them."""
        conv, nodes = self.conv_of_col, self.node_index
        hold_rows = np.repeat(np.arange(self.n_clients), np.diff(self.hold_ptr))
        owner = conv[self.hold_col]
        not_own = owner != hold_rows
        self.held_not_own = np.bincount(hold_rows[not_own], minlength=self.n_clients).astype(np.int64)
        self.conv_node = np.full(self.n_items, -1, dtype=np.int64)
        self.conv_pos = np.full(self.n_items, -1, dtype=np.int64)
        for j, plan in enumerate(self.plans):
            self.conv_node[plan.conv_cols] = j
            self.conv_pos[plan.conv_cols] = np.arange(len(plan.conv_cols))
        requests: dict[int, Message] = {}
        for j, (node, plan) in enumerate(zip(self.node_ids, self.plans, strict=True)):
            mine = nodes[hold_rows] == j
            plan.held_cols = np.unique(self.hold_col[mine])
            plan.sync_cols = plan.held_cols[self.conv_node[plan.held_cols] != j]
            plan.sync_node, plan.sync_pos = self.conv_node[plan.sync_cols], self.conv_pos[plan.sync_cols]
            plan.sync_to = plan.clients[self.held_not_own[plan.clients] > 0]
            plan.sync_counts = self.held_not_own[plan.sync_to]
            # static for the run: read-only, so the ledger books every step's syncs by identity
            plan.sync_to.flags.writeable = plan.sync_counts.flags.writeable = False
            msg = Message(fields={"sync_cols": plan.sync_cols})
            if len(plan.sync_to):
                degrees = self.item_degree[plan.sync_cols].reshape(-1, 1)
                msg.add("degrees", Part(
                    "setup/item-degrees", "item_degree", SERVER, CLIENT, degrees, shape="broadcast",
                    counts=plan.sync_counts, receivers=plan.sync_to,
                ).with_sizes(plan.sync_counts * 8))  # fmt: skip
            requests[node] = msg
        self._round(SETUP_DEGREES, requests)


def _entries(indptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Positions ``indptr[r]:indptr[r + 1]`` of every row in ``rows``, concatenated."""
    starts, lens = indptr[rows], indptr[rows + 1] - indptr[rows]
    if not lens.sum():
        return empty_ids()
    return np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
