"""The set-up half of GNN4FR's client program: the node's rows, its helpers, Algorithms 2-3.

:class:`SetupClient` holds a shard's state and everything the stages of one minibatch
(:mod:`.client`) share; its stages run once per run: key pairs, the group key S (wrapped by the
key-client, relayed by the server, never seen by it), the item tokens, the key-client's custody of
the items nobody holds, and each client's routing, from which the node merges its ego graphs.
"""

from __future__ import annotations

import numpy as np
import torch

from fedgraphrec.crypto.agreement import PUBLIC_KEY_BYTES, ClientKeyPair
from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.group_key import client_keys, unwrap_all, wrap_for_all
from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.crypto.tokens import TOKEN_BYTES
from fedgraphrec.protocols.base import ClientProgram
from fedgraphrec.protocols.gnn4fr.expect import check_field, expectation, gnn4fr_flow
from fedgraphrec.protocols.gnn4fr.graph import LocalGraph, build_local_graph, decode_routing
from fedgraphrec.protocols.gnn4fr.roles import (
    CLIENT,
    KEY_HOLDER,
    SERVER,
    Phase,
    Stage,
    item_tokens,
    key_client_of,
    token_ints,
)
from fedgraphrec.protocols.gnn4fr.settings import GNN4FRSettings
from fedgraphrec.protocols.gnn4fr.state import Adam, GNN4FRState
from fedgraphrec.runtime.endpoint import require_senders
from fedgraphrec.runtime.expect import Expectation, StageFlow
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part

__all__ = ["SetupClient"]


class SetupClient(ClientProgram[GNN4FRState]):
    """A shard of GNN4FR clients: state, helpers and the set-up stages (module docstring)."""

    settings: GNN4FRSettings

    def init_state(self) -> None:
        """The shard's items per client and the Adam states of its users' and items' rows."""
        data = self.node_data("a GNN4FR node needs its clients' interactions and the initial tables")
        train = data.train.tocsr()
        self.n_users, self.n_items = int(train.shape[0]), int(train.shape[1])
        own = train[self.clients]
        own.sort_indices()
        self._own_rows = [
            own.indices[a:b].astype(np.int64) for a, b in zip(own.indptr[:-1], own.indptr[1:], strict=True)
        ]
        item_ids = np.unique(own.indices).astype(np.int64)
        users, items = data.tables["user_emb"], data.tables["item_emb"]
        self.dtype = items.dtype
        self.state = GNN4FRState(
            users=Adam.of(users[torch.from_numpy(self.clients)]),
            items=Adam.of(items[torch.from_numpy(item_ids)]),
            item_ids=item_ids,
        )

    # ------------------------------------------------------------------ what the node accepts
    @property
    def key_client(self) -> int:
        """u_c of Algorithm 2 (public: the run seed's ``setup`` stream, as the server draws it)."""
        return key_client_of(self.n_users, self.settings.seed)

    def stage_flow(self) -> StageFlow:
        """The node's stage order (:func:`.expect.gnn4fr_flow`): its layers, mode, key-client or not."""
        key_node = bool((self.clients == self.key_client).any())
        return gnn4fr_flow(self.L, self.settings.paper_literal, key_node)

    def expect(self, stage: str) -> Expectation:
        """The parts this node expects in ``stage`` (:func:`.expect.expectation`)."""
        return expectation(self, stage)

    # ------------------------------------------------------------------ helpers
    @property
    def real(self) -> bool:
        """Whether this run encrypts for real (told at set-up)."""
        return self.state.real

    @property
    def L(self) -> int:
        """Layers."""
        return self.settings.n_layers

    def group_key(self) -> SharedKey | None:
        """The group key S, once unwrapped."""
        return SharedKey.from_bytes(self.state.key) if self.state.key else None

    def owned_rows(self) -> dict[str, tuple[np.ndarray, torch.Tensor]]:
        """The clients' user rows and the node's item copies (equal on every holder), custody included."""
        ids, rows = self.state.item_ids, self.state.items.param
        if self.state.custody is not None:
            ids, rows = (
                np.concatenate([ids, self.state.custody_ids]),
                torch.cat([rows, self.state.custody.param]),
            )
        return {"user_emb": (self.clients, self.state.users.param), "item_emb": (ids, rows)}

    def item_rows(self, items: np.ndarray, layers: torch.Tensor, what: str) -> torch.Tensor:
        """Rows ``(len(items), L + 1, d)`` of the node's items or of its custody (zero above layer 0)."""
        ids, cust = self.state.item_ids, self.state.custody_ids
        at = np.minimum(np.searchsorted(ids, items), max(len(ids) - 1, 0))
        mine = (at < len(ids)) & (ids[at] == items) if len(ids) else np.zeros(len(items), dtype=bool)
        out = layers.new_zeros((len(items), layers.shape[0], layers.shape[2]))
        out[torch.from_numpy(np.flatnonzero(mine))] = layers[:, torch.from_numpy(at[mine])].permute(1, 0, 2)
        rest = np.flatnonzero(~mine)
        if len(rest):
            c = np.minimum(np.searchsorted(cust, items[rest]), max(len(cust) - 1, 0))
            if self.state.custody is None or not len(cust) or not np.array_equal(cust[c], items[rest]):
                raise IntegrityError(f"gnn4fr {what}: asked for an item no client of this node holds")
            out[torch.from_numpy(rest), 0] = self.state.custody.param[torch.from_numpy(c)]
        return out

    def prediction(self) -> tuple[np.ndarray, torch.Tensor, torch.Tensor | None]:
        """Final user rows and the whole final item table as the clients assembled it (Algorithm 6)."""
        return self.clients, self.state.final_users, self.state.final_items

    def _graph(self) -> LocalGraph:
        if self.state.graph is None:
            raise RuntimeError("gnn4fr: the node has no routing yet (set-up did not run)")
        return self.state.graph

    def tokens_of(self, items: np.ndarray) -> list[bytes]:
        """16-byte tokens of ``items`` (global ids)."""
        raw = self.state.catalogue_tokens[np.asarray(items, dtype=np.int64)]
        flat = raw.tobytes()
        return [flat[k : k + TOKEN_BYTES] for k in range(0, len(flat), TOKEN_BYTES)]

    def items_of(self, handles: np.ndarray, what: str) -> np.ndarray:
        """Global item ids of token handles (the server's names for items); unknown handles are rejected."""
        table = self.catalogue_handles()
        order = np.argsort(table, kind="stable")
        at = np.searchsorted(table[order], handles)
        at = np.minimum(at, len(order) - 1)
        items = order[at]
        if len(handles) and not np.array_equal(table[items], handles):
            raise IntegrityError(f"gnn4fr {what}: a message names an item token no catalogue item has")
        return items

    def holds(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Whether each (client id, item id) is an interaction of a client of this node."""
        at = np.minimum(np.searchsorted(self.clients, users), max(len(self.clients) - 1, 0))
        if not len(self.clients):
            return np.zeros(len(users), dtype=bool)
        m, ptr = self.n_items, self.state.own_ptr
        edges = np.repeat(np.arange(len(self.clients)), np.diff(ptr)) * m + self.state.own_seq
        ok = (self.clients[at] == users) & (items >= 0) & (items < m)
        return ok & np.isin(at * m + items, edges)

    def check_holders(self, stage: str, holders: np.ndarray, items: np.ndarray) -> None:
        """Each named holder is a client of this node holding the item (or the key-client, its custody).

        Raises:
            IntegrityError: naming the stage, when the server names another holder.
        """
        ok = self.holds(holders, items)
        cust = np.isin(items, self.state.custody_ids) & (holders == self.key_client)
        if len(holders) and not (ok | (cust & np.isin(holders, self.clients))).all():
            raise IntegrityError(
                f"gnn4fr stage {stage!r}: the server names a holder that does not hold the item"
            )

    def rows_part(self, phase: str, kind: str, rows: torch.Tensor) -> Message:
        """The clients' rows multicast to their neighbours, sealed under S."""
        part = Part(
            phase, kind, CLIENT, SERVER, rows, protection="sealed", senders=self.clients, seal_to_role=CLIENT
        )
        return Message({"rows": part})

    def check_relay(self, part: Part) -> None:
        """A relay of the neighbours' rows: every expected (receiver, sender) copy, in order."""
        g = self._graph()
        require_senders(part, g.nb_ids, "the neighbours' rows")
        expect = np.repeat(self.clients, np.diff(g.nb_ptr))
        if part.receivers is None or not np.array_equal(part.receivers, expect):
            raise IntegrityError(f"{part.phase}: the relay is not addressed to this node's clients as routed")

    @staticmethod
    def _handles_of(part: Part) -> np.ndarray:
        """Token handles bound into the names of a relay of item rows (``holder-of-item:<handle>``).

        Copies that share a row share its name, so each distinct row's name is parsed once.
        """
        names = part.bound_senders or []
        if part.index is None:
            return np.array([int(s.rpartition(":")[2]) for s in names], dtype=np.int64)
        rows, first = np.unique(part.index, return_index=True)
        parsed = np.array([int(names[k].rpartition(":")[2]) for k in first.tolist()], dtype=np.int64)
        return parsed[np.searchsorted(rows, part.index)]

    def update(self, g_user: torch.Tensor, g_item: torch.Tensor) -> None:
        """One Adam step of the clients' rows and of the node's item copies."""
        self.state.users.step(g_user, self.settings.lr)
        self.state.items.step(g_item, self.settings.lr)

    # ------------------------------------------------------------------ set-up (Algorithms 2-3)
    def stage_setup_public_keys(self, step: int, request: Message) -> Message:
        """Every client makes an X25519 key pair and sends the public half."""
        self.state.real = self.settings.crypto == "real"  # the node's own configuration, not the wire's
        check_field(Stage.PUBLIC_KEYS, request.fields, "real", self.state.real)
        self.state.private_keys, blobs = client_keys(len(self.clients), self.state.real)
        part = Part(
            Phase.PUBLIC_KEYS, "public_key", CLIENT, SERVER, blobs, shape="blobs", senders=self.clients
        )
        return Message({"keys": part})

    def stage_setup_wrap_key(self, step: int, request: Message) -> Message:
        """The key-client draws S and wraps it for every public key (the server never sees S)."""
        key_client = self.key_client
        check_field(Stage.WRAP_KEY, request.fields, "key_client", key_client)
        check_field(Stage.WRAP_KEY, request.fields, "real", self.real)
        if not (self.clients == key_client).any():  # the stage order already refuses it: said twice
            raise IntegrityError(f"gnn4fr stage {Stage.WRAP_KEY!r}: the key-client is not on this node")
        got = request["keys"]
        n = self.n_users
        if len(got.value) != 1 or len(got.value[0]) != PUBLIC_KEY_BYTES * n:
            raise IntegrityError(
                f"gnn4fr stage {Stage.WRAP_KEY!r}: {got.phase} must be one bundle of {n} public keys"
            )
        blob = got.value[0]
        if self.real:
            self._check_own_keys(blob)
        _, wrapped = wrap_for_all(blob, self.real)  # S stays unused here: this node unwraps it as all do
        part = Part(  # ECIES ciphertexts of their own: relayed as they are, alterable by an active server
            Phase.WRAPPED_KEY, "wrapped_key", KEY_HOLDER, SERVER, wrapped, shape="blobs", protection="sealed",
            presealed=True, senders=np.full(n, key_client), seal_to_role=CLIENT, seal_to=np.arange(n),
        )  # fmt: skip
        return Message({"wrapped": part})

    def _check_own_keys(self, bundle: bytes) -> None:
        """The bundle holds this node's own clients' public keys where they belong.

        Only a partial check: the server could still swap the keys of clients on other nodes (the
        public keys are not authenticated; SECURITY.md), but not those of the key-client's node.
        """
        for k, u in enumerate(self.clients.tolist()):
            w = PUBLIC_KEY_BYTES  # an X25519 key, private or public
            own = ClientKeyPair.from_private_bytes(self.state.private_keys[w * k : w * (k + 1)])
            if bundle[w * u : w * (u + 1)] != own.public.to_bytes():
                raise IntegrityError(
                    f"gnn4fr stage {Stage.WRAP_KEY!r}: the bundle holds another public key for client:{u}"
                )

    def stage_setup_unwrap_key(self, step: int, request: Message) -> Message:
        """Every client unwraps S, then uploads its items' tokens (sorted: the order reveals nothing)."""
        check_field(Stage.UNWRAP_KEY, request.fields, "real", self.real)
        got = request["wrapped"]
        if got.receivers is None or not np.array_equal(got.receivers, self.clients):
            raise IntegrityError(f"{got.phase}: wrapped keys for other clients were delivered here")
        require_senders(got, np.full(len(self.clients), self.key_client), "the key-client")
        key = unwrap_all(
            got.value, self.state.private_keys, self.real, phase=got.phase, clients=self.clients.tolist()
        )
        if key is not None:
            self.state.key = key
        self.state.private_keys = b""
        tokens = item_tokens(self.group_key(), np.arange(self.n_items))
        self.state.catalogue_tokens = (
            np.frombuffer(b"".join(tokens), dtype=np.uint8).reshape(-1, TOKEN_BYTES).copy()
        )
        handles = token_ints(tokens)
        seq = [rows[np.argsort(handles[rows], kind="stable")] for rows in self._own_rows]
        self.state.own_ptr = np.concatenate([[0], np.cumsum([len(s) for s in seq])]).astype(np.int64)
        self.state.own_seq = np.concatenate(seq) if seq else np.zeros(0, dtype=np.int64)
        blobs = [b"".join(tokens[i] for i in s.tolist()) for s in seq]
        part = Part(
            Phase.ITEM_TOKENS, "item_token", CLIENT, SERVER, blobs, shape="blobs", protection="pseudonymous",
            senders=self.clients,
        )  # fmt: skip
        return Message({"tokens": part})

    def stage_setup_catalogue(self, step: int, request: Message) -> Message:
        """The key-client takes custody of the items nobody holds and names their tokens.

        Nobody's interactions involve them, but negatives do: their rows must live somewhere their
        gradients can reach sealed. The server learns only their tokens, never their ids or rows.
        """
        check_field(Stage.CATALOGUE, request.fields, "key_client", self.key_client)
        got = request["held"]
        if len(got.value) != 1 or len(got.value[0]) % TOKEN_BYTES:
            raise IntegrityError(f"gnn4fr stage {Stage.CATALOGUE!r}: {got.phase} must be one list of tokens")
        blob = got.value[0]
        held = token_ints([blob[k : k + TOKEN_BYTES] for k in range(0, len(blob), TOKEN_BYTES)])
        mine = self.catalogue_handles()
        unheld = np.flatnonzero(~np.isin(mine, held)).astype(np.int64)
        assert self.data is not None
        self.state.custody_ids = unheld
        self.state.custody = Adam.of(self.data.tables["item_emb"][torch.from_numpy(unheld)])
        key_client = self.key_client
        body = b"".join(self.tokens_of(unheld))
        part = Part(
            Phase.CATALOGUE, "item_token", KEY_HOLDER, SERVER, [body], shape="blobs",
            protection="pseudonymous", senders=np.array([key_client]),
        )  # fmt: skip
        return Message({"unheld": part})

    def catalogue_handles(self) -> np.ndarray:
        """The token handle of every catalogue item."""
        return self.state.catalogue_tokens[:, :8].copy().view(">i8").ravel().astype(np.int64)

    def stage_setup_routing(self, step: int, request: Message) -> Message:
        """Algorithm 3: each client's neighbours and connectivity; the node merges the ego graphs."""
        got = request["routing"]
        if got.receivers is None or not np.array_equal(got.receivers, self.clients):
            raise IntegrityError(f"{got.phase}: routing for other clients was delivered here")
        ptr, seq = self.state.own_ptr, self.state.own_seq
        own = [seq[ptr[k] : ptr[k + 1]] for k in range(len(self.clients))]
        routing = [
            self._routing(b, int(u), len(o)) for b, u, o in zip(got.value, self.clients, own, strict=True)
        ]
        self.state.graph = build_local_graph(self.clients, own, routing)
        return Message()

    def _routing(
        self, blob: bytes, u: int, n_own: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Client ``u``'s routing message, decoded strictly.

        Neighbours are other clients of the run, sorted and distinct, of positive degree; the
        connectivity indexes within the neighbour table and ``u``'s own items.

        Raises:
            IntegrityError: naming the stage and the client, for a malformed message.
        """
        k = int(np.frombuffer(blob[:8], dtype=np.int64)[0]) if len(blob) >= 8 else -1
        if k < 0 or len(blob) < 8 + 16 * k or (len(blob) - 8 - 16 * k) % 8:
            raise IntegrityError(f"gnn4fr stage {Stage.ROUTING!r}: the routing of client:{u} is malformed")
        nbs, degs, nb_idx, it_idx = decode_routing(blob)
        if (
            (len(nbs) and (nbs.min() < 0 or nbs.max() >= self.n_users or (np.diff(nbs) <= 0).any()))
            or (nbs == u).any()
            or (degs <= 0).any()
            or (
                len(nb_idx)
                and (nb_idx.min() < 0 or nb_idx.max() >= k or it_idx.min() < 0 or it_idx.max() >= n_own)
            )
        ):
            raise IntegrityError(f"gnn4fr stage {Stage.ROUTING!r}: the routing of client:{u} is inconsistent")
        return nbs, degs, nb_idx, it_idx
