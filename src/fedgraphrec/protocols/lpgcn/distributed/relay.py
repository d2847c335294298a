"""LP-GCN's server role over a transport (:class:`RelayServer`) and an in-process transport.

See :mod:`fedgraphrec.protocols.lpgcn.distributed` for the rounds it drives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.protocols.common import TOKEN_BYTES
from fedgraphrec.protocols.lpgcn.cover import plan_convolution
from fedgraphrec.protocols.lpgcn.distributed.shard import (
    LostNodeError,
    Msg,
    ShardClient,
    ShardSettings,
    ShardSource,
    Transport,
    pack_blobs,
    unpack_blobs,
)
from fedgraphrec.seeding import numpy_rng

__all__ = [
    "LocalTransport",
    "Prediction",
    "RelayServer",
]


@dataclass
class Prediction:
    """Final embeddings as the parties hold them (exported for evaluation), and the layer-0 tables."""

    user: torch.Tensor
    item: torch.Tensor
    user0: torch.Tensor
    item0: torch.Tensor


@dataclass
class _NodePlan:
    users: np.ndarray
    conv_cols: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    sync_cols: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    nb_users: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    neg_cols: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


class RelayServer:
    """The server role of LP-GCN over a :class:`Transport` (module docstring).

    Args:
        transport: carries the rounds.
        settings: the run's public hyper-parameters.
        n_users: number of clients (pseudonyms ``0..n-1``).
        nodes: node ids; user ``u`` lives on ``nodes[u % len(nodes)]``.

    Raises:
        ValueError: naming the parameter, on an empty node list or no users.
    """

    def __init__(
        self, transport: Transport, settings: ShardSettings, n_users: int, nodes: Sequence[int]
    ) -> None:
        if not nodes:
            raise ValueError("nodes: at least one node is needed")
        if n_users < 1:
            raise ValueError(f"n_users must be positive, got {n_users}")
        self.transport = transport
        self.s = settings
        self.n_users = n_users
        all_nodes = [int(x) for x in nodes]
        # node *indices* in arrays (Flower's node ids are unsigned 64-bit); ids only at the transport
        self.node_ids = all_nodes
        self._index = {nd: j for j, nd in enumerate(all_nodes)}
        self.node_of = np.arange(n_users, dtype=np.int64) % len(all_nodes)
        self.plan = {
            nd: _NodePlan(np.flatnonzero(self.node_of == j).astype(np.int64))
            for j, nd in enumerate(all_nodes)
            if (self.node_of == j).any()
        }
        self.steps = 0
        self.rounds = 0
        self._deg_sent = False

    def _round(self, op: str, requests: Mapping[int, Msg]) -> dict[int, Msg]:
        replies = self.transport.round(op, requests)
        missing = sorted(set(requests) - set(replies))
        if missing:
            raise LostNodeError(
                f"LP-GCN round {op!r}: node(s) {missing} did not answer; LP-GCN has no dropout recovery"
            )
        self.rounds += 1
        return replies

    # ------------------------------------------------------------------ set-up
    def setup(self) -> None:
        """Algorithm 2 (keys, S, tokens, degrees), Algorithm 3 and verification: five rounds."""
        n, m = self.n_users, self.s.n_items
        replies = self._round("keys", {nd: ({}, {"users": p.users}) for nd, p in self.plan.items()})
        pub = np.zeros((n, 32), dtype=np.uint8)
        for nd, p in self.plan.items():
            pub[p.users] = replies[nd][1]["pub"]
        key_client = int(numpy_rng(self.s.seed, "lpgcn", "setup").integers(0, n))
        kc_node = self.node_ids[int(self.node_of[key_client])]
        wrapped = self._round("wrap", {kc_node: ({"key_client": key_client}, {"roster": pub})})[kc_node][1][
            "wrapped"
        ]
        if len(wrapped) != n:
            raise RuntimeError(f"the key-client wrapped {len(wrapped)} keys for {n} clients")
        replies = self._round(
            "tokens", {nd: ({}, {"wrapped": wrapped[p.users]}) for nd, p in self.plan.items()}
        )
        tok_lists: list[list[bytes]] = [[] for _ in range(n)]
        deg_ct: np.ndarray | None = None
        for nd, p in self.plan.items():
            arr = replies[nd][1]
            toks = unpack_blobs(arr["tok"])
            bounds = np.concatenate([[0], np.cumsum(arr["count"])])
            for j, u in enumerate(p.users):
                tok_lists[u] = toks[bounds[j] : bounds[j + 1]]
            if deg_ct is None:
                deg_ct = np.zeros((n, arr["deg"].shape[1]), dtype=np.uint8)
            deg_ct[p.users] = arr["deg"]
        assert deg_ct is not None
        # Algorithm 3 on the token graph: tokens numbered by first appearance
        col_of: dict[bytes, int] = {}
        rows, cols = [], []
        for u in range(n):
            for tok in tok_lists[u]:
                rows.append(u)
                cols.append(col_of.setdefault(tok, len(col_of)))
        if len(col_of) != m:
            raise ValueError(
                f"{m - len(col_of)} of {m} items are held by no client; LP-GCN on separate nodes needs every "
                "item held (raise alpha, or drop items without training interactions)"
            )
        self.col_of = col_of
        self.tokens = pack_blobs(list(col_of), TOKEN_BYTES)
        holdings = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, m))
        holdings.sort_indices()
        conv_user = np.asarray(plan_convolution(holdings, self.s.seed).conv_client_of_item, dtype=np.int64)
        self.conv_node = self.node_of[conv_user]
        coo = holdings.tocoo()
        h_user, h_col = coo.row.astype(np.int64), coo.col.astype(np.int64)
        verify: dict[int, Msg] = {}
        asked: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        ask = conv_user[h_col] != h_user
        for nd, p in self.plan.items():
            j = self._index[nd]
            p.conv_cols = np.flatnonzero(self.conv_node == j)
            held = np.unique(h_col[self.node_of[h_user] == j])
            p.sync_cols = np.setdiff1d(held, p.conv_cols)
            holders = h_user[np.isin(h_col, p.conv_cols)]
            p.nb_users = np.unique(holders[self.node_of[holders] != j])
            q = np.flatnonzero(ask & (self.node_of[h_user] == j))
            asked[nd] = (h_user[q], h_col[q])
            verify[nd] = (
                {},
                {
                    "a_user": conv_user[p.conv_cols],
                    "a_tok": self.tokens[p.conv_cols],
                    "q_user": h_user[q],
                    "q_tok": self.tokens[h_col[q]],
                    "q_pk": pub[conv_user[h_col[q]]],
                    "q_asker": conv_user[h_col[q]],
                },
            )
        replies = self._round("verify", verify)
        routed: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {nd: [] for nd in self.plan}
        for nd in self.plan:
            holder, col = asked[nd]
            answers = replies[nd][1]["ans"]
            for dest in self.plan:
                sel = self.conv_node[col] == self._index[dest]
                if sel.any():
                    pos = np.searchsorted(self.plan[dest].conv_cols, col[sel])
                    routed[dest].append((pos, holder[sel], answers[sel]))
        init: dict[int, Msg] = {}
        width = max(replies[nd][1]["ans"].shape[1] for nd in self.plan)
        for nd, p in self.plan.items():
            parts = routed[nd]
            init[nd] = (
                {},
                {
                    "r_pos": np.concatenate([np.zeros(0, np.int64), *[a for a, _, _ in parts]]),
                    "r_holder": np.concatenate([np.zeros(0, np.int64), *[b for _, b, _ in parts]]),
                    "r_ans": np.concatenate([np.zeros((0, width), np.uint8), *[c for _, _, c in parts]]),
                    "nb_users": p.nb_users,
                    "nb_deg": deg_ct[p.nb_users],
                    "sync_tok": self.tokens[p.sync_cols],
                },
            )
        replies = self._round("init", init)
        L, d = self.s.n_layers, self.s.dim
        np_dtype = np.float64 if self.s.dtype == "float64" else np.float32
        self.V = [np.zeros((m, d), dtype=np_dtype) for _ in range(L + 1)]
        self.item_deg = np.zeros(m)
        self.ct: np.ndarray | None = None
        for nd, p in self.plan.items():
            _, arr = replies[nd]
            self.V[0][p.conv_cols] = arr["conv"]
            self.item_deg[p.conv_cols] = arr["conv_deg"]
            self._store_ct(p.users, arr["ct"])

    def _store_ct(self, users: np.ndarray, ct: np.ndarray) -> None:
        if self.ct is None:
            self.ct = np.zeros((self.n_users, ct.shape[1]), dtype=np.uint8)
        self.ct[users] = ct

    # ------------------------------------------------------------------ Algorithm 1 body
    def _forward(
        self, t: int, triples: tuple[np.ndarray, np.ndarray, np.ndarray] | None, final: bool
    ) -> dict[int, Msg]:
        assert self.ct is not None
        L = self.s.n_layers
        last: dict[int, Msg] = {}
        for k in range(1, L + 1):
            requests: dict[int, Msg] = {}
            for nd, p in self.plan.items():
                fields: dict[str, Any] = {"t": t, "k": k, "final": bool(final and k == L)}
                arrays = {"rows": self.V[k - 1][p.sync_cols], "nb_ct": self.ct[p.nb_users]}
                if k == 1 and not self._deg_sent:
                    arrays["deg"] = self.item_deg[p.sync_cols]
                if k == 1 and triples is not None:
                    users, pos, neg = triples
                    mine = self.node_of[users] == self._index[nd]
                    fields["B"] = len(users)
                    arrays.update(b_user=users[mine], b_pos=pos[mine], b_neg=neg[mine])
                requests[nd] = (fields, arrays)
            last = self._round("forward", requests)
            self._deg_sent = True
            for nd, p in self.plan.items():
                _, arr = last[nd]
                self.V[k][p.conv_cols] = arr["conv"]
                if "ct" in arr:
                    self._store_ct(p.users, arr["ct"])
                if "neg_tok" in arr:
                    p.neg_cols = np.asarray(
                        [self.col_of[tok] for tok in unpack_blobs(arr["neg_tok"])], dtype=np.int64
                    )
        return last

    def train_step(self, users: np.ndarray, pos: np.ndarray, neg: np.ndarray) -> float:
        """One minibatch (``2L + 2`` rounds); returns the batch loss (BPR + λ·reg, summed over nodes)."""
        assert self.ct is not None
        users, pos, neg = (np.asarray(a, dtype=np.int64) for a in (users, pos, neg))
        if not (len(users) == len(pos) == len(neg)) or not len(users):
            raise ValueError("users, pos, neg: a minibatch needs equal, non-zero numbers of triples")
        L, t = self.s.n_layers, self.steps
        self._forward(t, (users, pos, neg), final=False)
        loss_req = {
            nd: (
                {"t": t},
                {
                    "rows": self.V[L][p.sync_cols],
                    "neg_rows": np.stack([self.V[j][p.neg_cols] for j in range(L + 1)]),
                },
            )
            for nd, p in self.plan.items()
        }
        replies = self._round("loss", loss_req)
        bpr = sum(float(f["bpr"]) for f, _ in replies.values())
        reg = sum(float(f["reg"]) for f, _ in replies.values())
        mail: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {nd: [] for nd in self.plan}
        width = 0
        for _, arr in replies.values():
            if not len(arr["g_user"]):
                continue
            width = arr["g_ct"].shape[1]
            dest = self.conv_node[[self.col_of[tok] for tok in unpack_blobs(arr["g_tok"])]]
            for nd in self.plan:
                sel = dest == self._index[nd]
                if sel.any():
                    mail[nd].append((arr["g_user"][sel], arr["g_tok"][sel], arr["g_ct"][sel]))
        agg_req = {
            nd: (
                {"t": t},
                {
                    "g_user": np.concatenate([np.zeros(0, np.int64), *[a for a, _, _ in mail[nd]]]),
                    "g_tok": np.concatenate(
                        [np.zeros((0, TOKEN_BYTES), np.uint8), *[b for _, b, _ in mail[nd]]]
                    ),
                    "g_ct": np.concatenate([np.zeros((0, width), np.uint8), *[c for _, _, c in mail[nd]]]),
                },
            )
            for nd in self.plan
        }
        replies = self._round("aggregate", agg_req)
        G = np.zeros_like(self.V[0])
        for nd, p in self.plan.items():
            G[p.conv_cols] = replies[nd][1]["conv"]
            self._store_ct(p.users, replies[nd][1]["ct"])
        for k in range(L - 1, -1, -1):
            req = {
                nd: ({"t": t, "k": k}, {"rows": G[p.sync_cols], "nb_ct": self.ct[p.nb_users]})
                for nd, p in self.plan.items()
            }
            replies = self._round("backward", req)
            G = np.zeros_like(G)
            for nd, p in self.plan.items():
                G[p.conv_cols] = replies[nd][1]["conv"]
                self._store_ct(p.users, replies[nd][1]["ct"])
        self.V[0] = G  # after k = 0 the convolution-clients return their updated layer-0 rows
        self.steps += 1
        return bpr + self.s.reg * reg

    def predict(self) -> Prediction:
        """``L`` forward rounds; the last returns final user rows (for evaluation) and item rows."""
        last = self._forward(self.steps, None, final=True)
        n, m, d = self.n_users, self.s.n_items, self.s.dim
        dtype = self.s.torch_dtype
        U, V = torch.zeros((n, d), dtype=dtype), torch.zeros((m, d), dtype=dtype)
        U0, V0 = torch.zeros_like(U), torch.zeros_like(V)
        for _, arr in last.values():
            users, items = torch.from_numpy(arr["users"]), torch.from_numpy(arr["items"])
            U[users], U0[users] = torch.from_numpy(arr["U"]), torch.from_numpy(arr["U0"])
            V[items], V0[items] = torch.from_numpy(arr["V"]), torch.from_numpy(arr["V0"])
        return Prediction(U, V, U0, V0)


class LocalTransport:
    """Every node's :class:`ShardClient` in this process (tests; no Flower).

    Arrays are copied on the way in and out, as serialisation would. ``dead`` nodes never answer.

    Args:
        settings: the run's public hyper-parameters.
        source: every node's data source.
        nodes: node ids.
    """

    def __init__(self, settings: ShardSettings, source: ShardSource, nodes: Sequence[int]) -> None:
        self.settings = settings
        self.source = source
        self.states: dict[int, dict[str, np.ndarray]] = {int(n): {} for n in nodes}
        self.dead: set[int] = set()
        self.ops: list[str] = []

    def round(self, op: str, requests: Mapping[int, Msg]) -> dict[int, Msg]:
        """Run each live node's handler on a copy of its request."""
        self.ops.append(op)
        replies = {}
        for node, (fields, arrays) in requests.items():
            if node in self.dead:
                continue
            client = ShardClient(self.settings, self.states[node], self.source)
            out_f, out_a = client.handle(
                op, dict(fields), {k: np.array(v, copy=True) for k, v in arrays.items()}
            )
            replies[node] = (dict(out_f), {k: np.array(v, copy=True) for k, v in out_a.items()})
        return replies
