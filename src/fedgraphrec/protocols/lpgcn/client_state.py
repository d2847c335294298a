r"""The LP-GCN client shard's typed state and the helpers its set-up and training stages share.

A node hosts a shard of clients (spec ``lpgcn.md`` §1.3: every client is a user; some are
convolution-clients). Its state holds, for all of them at once: their real and virtual items and
upload order, their key pairs and the shared key :math:`S`, who convolves each held item (learnt
from verification), the convolution-items assigned to them with their verified real holders
(:math:`\mathcal U_{\tilde i}`) and weights :math:`c_{ui}`, the rows they own (user rows for the
LightGCN backbone, convolution-items' :math:`V^{(0)}` and, for LightGCN+, :math:`W` rows) with
their Adam moments, and the minibatch in flight.

Local item space. A node computes over one table of items: its convolution-items (in the order
of their convolution-clients, as the server assigned them) followed by the items its clients
hold that other nodes convolve (``sync``, in the server's column order). Eq. 7 is one sparse
product :math:`R_{\text{local}}\,V_{\text{local}}`, Eq. 8 one product of the convolution operator
with the relayed neighbour rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto.agreement import ClientKeyPair
from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.models.propagation import torch_csr
from fedgraphrec.protocols.base import ClientProgram
from fedgraphrec.protocols.lpgcn.holdings import TokenIndex, item_tokens
from fedgraphrec.protocols.lpgcn.lookup import IdIndex, PairIndex
from fedgraphrec.protocols.lpgcn.settings import LPGCNSettings
from fedgraphrec.protocols.lpgcn.step import StepState, empty_tensor
from fedgraphrec.runtime.state import SECRET, empty_ids

__all__ = ["ClientBase", "LPGCNState"]


def _f64() -> np.ndarray:
    return np.zeros(0, dtype=np.float64)


@dataclass
class LPGCNState:
    r"""Everything a node keeps between LP-GCN messages (module docstring).

    Held items are stored per client in upload order (``held_ptr``/``held_idx``, CSR layout);
    ``held_virtual``, ``held_owner`` (the client convolving the item; the holder itself for its own
    convolution-items) and ``held_col`` (the server's column) are aligned with them.
    ``unheld_items``: the items nobody holds, from the key-client's sealed list (:mod:`.unheld`).
    Convolution items (``conv_*``) are in the server's assignment order. ``a_*`` is Eq. 8 over the
    relayed neighbour rows (column = routing pair), ``own_*`` its own-term part (column = shard position);
    ``aw``/``ownw`` are the same pairs weighted :math:`1/\sqrt{|\mathcal I_u|}` (Eq. 29).
    """

    real_ptr: np.ndarray = field(default_factory=empty_ids)
    real_idx: np.ndarray = field(default_factory=empty_ids)
    held_ptr: np.ndarray = field(default_factory=empty_ids)
    held_idx: np.ndarray = field(default_factory=empty_ids)
    held_virtual: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    held_owner: np.ndarray = field(default_factory=empty_ids)
    held_col: np.ndarray = field(default_factory=empty_ids)
    private_keys: np.ndarray = field(
        default_factory=lambda: np.zeros((0, 32), dtype=np.uint8), metadata=SECRET
    )
    key: bytes = field(default=b"", metadata=SECRET)
    unheld_items: np.ndarray = field(default_factory=empty_ids)
    conv_items: np.ndarray = field(default_factory=empty_ids)
    conv_owner: np.ndarray = field(default_factory=empty_ids)
    conv_degree: np.ndarray = field(default_factory=_f64)
    nb_conv: np.ndarray = field(default_factory=empty_ids)
    nb_user: np.ndarray = field(default_factory=empty_ids)
    a_row: np.ndarray = field(default_factory=empty_ids)
    a_col: np.ndarray = field(default_factory=empty_ids)
    a_val: np.ndarray = field(default_factory=_f64)
    aw_val: np.ndarray = field(default_factory=_f64)
    own_row: np.ndarray = field(default_factory=empty_ids)
    own_col: np.ndarray = field(default_factory=empty_ids)
    own_val: np.ndarray = field(default_factory=_f64)
    ownw_val: np.ndarray = field(default_factory=_f64)
    sync_items: np.ndarray = field(default_factory=empty_ids)
    sync_degree: np.ndarray = field(default_factory=_f64)
    user_emb: torch.Tensor = field(default_factory=empty_tensor)
    user_m: torch.Tensor = field(default_factory=empty_tensor)
    user_v: torch.Tensor = field(default_factory=empty_tensor)
    item_emb: torch.Tensor = field(default_factory=empty_tensor)
    item_m: torch.Tensor = field(default_factory=empty_tensor)
    item_v: torch.Tensor = field(default_factory=empty_tensor)
    item_w: torch.Tensor = field(default_factory=empty_tensor)
    w_m: torch.Tensor = field(default_factory=empty_tensor)
    w_v: torch.Tensor = field(default_factory=empty_tensor)
    steps: int = 0
    dim: int = 0
    dtype: str = "float32"
    n_columns: int = 0
    step: StepState = field(default_factory=StepState)
    final_u: torch.Tensor = field(default_factory=empty_tensor)
    final_v: torch.Tensor = field(default_factory=empty_tensor)


class ClientBase(ClientProgram[LPGCNState]):
    """Shared helpers of the set-up and training stages (state access, operators, tokens)."""

    settings: LPGCNSettings

    def __init__(self, settings: LPGCNSettings, clients: np.ndarray, data: Any) -> None:
        self._cache: dict[str, Any] = {}
        super().__init__(settings, clients, data)
        self.state = LPGCNState()

    @property
    def state(self) -> LPGCNState:
        """The node's typed state; replacing it (a restored checkpoint) drops every derived cache."""
        return self._state

    @state.setter
    def state(self, value: LPGCNState) -> None:
        self._state = value
        self._cache.clear()

    # ------------------------------------------------------------------ keys and tokens
    def group_key(self) -> SharedKey | None:
        """:math:`S`, once unwrapped (``None`` before, and in ``accounted`` mode)."""
        raw = self.state.key
        if not raw:
            return None
        hit = self._cache.get("group_key")  # rebuilt when the key bytes change (set-up, a reload)
        if hit is None or hit[0] is not raw:
            hit = self._cache["group_key"] = (raw, SharedKey.from_bytes(raw))
        key: SharedKey = hit[1]
        return key

    def keypair(self, position: int) -> ClientKeyPair:
        """The key pair of the shard's client at ``position``."""
        return ClientKeyPair.from_private_bytes(bytes(self.state.private_keys[position]))

    def tokens_of(self, items: np.ndarray) -> np.ndarray:
        """Tokens of ``items`` under :math:`S` (item ids stand in for them in ``accounted`` mode)."""
        return self.token_table(items)[np.asarray(items, dtype=np.int64)]

    def token_table(self, items: np.ndarray | None = None) -> np.ndarray:
        """Every catalogue item's token, built once (without data: up to the largest of ``items``)."""
        table = self._cache.get("tokens")
        if table is None:
            if self.data is not None:
                n_items = int(self.data.train.shape[1])
            else:
                n_items = int(np.max(items)) + 1 if items is not None and len(items) else 0
            table = self._cache["tokens"] = item_tokens(np.arange(n_items), self.group_key())
        assert isinstance(table, np.ndarray)
        return table

    # ------------------------------------------------------------------ shapes and positions
    @property
    def dim(self) -> int:
        """Embedding size :math:`d`."""
        return self.state.dim

    @property
    def dtype(self) -> torch.dtype:
        """The tables' dtype."""
        dtype: torch.dtype = getattr(torch, self.state.dtype)
        return dtype

    def remember_table_type(self, table: torch.Tensor) -> None:
        """Keep the embedding size and dtype of the run's tables."""
        self.state.dim, self.state.dtype = int(table.shape[1]), str(table.dtype).removeprefix("torch.")

    def position(self, clients: np.ndarray) -> np.ndarray:
        """Shard positions of global client ids (all must be hosted here)."""
        pos = self._id_index("clients", lambda: self.clients).find(clients)
        if len(pos) and pos.min() < 0:
            raise ValueError("a client id is not hosted on this node")
        return pos

    def held_rows(self) -> np.ndarray:
        """Shard position of every held entry (aligned with ``held_idx``)."""
        return np.repeat(np.arange(len(self.clients)), np.diff(self.state.held_ptr))

    def held(self, k: int) -> np.ndarray:
        """Held items (upload order) of the shard's client at position ``k``."""
        st = self.state
        return st.held_idx[st.held_ptr[k] : st.held_ptr[k + 1]]

    @property
    def local_items(self) -> np.ndarray:
        """Item ids of the local item space: convolution-items, then synchronised items."""
        return np.concatenate([self.state.conv_items, self.state.sync_items])

    def local_position(self, items: np.ndarray) -> np.ndarray:
        """Local position of every item id (``-1``: the node holds no row of it)."""
        return self._id_index("local_index", lambda: self.local_items).find(items)

    def _id_index(self, name: str, ids: Callable[[], np.ndarray]) -> IdIndex:
        """A cached :class:`IdIndex` of a static id array (rebuilt after set-up changes or a reload)."""
        hit = self._cache.get(name)
        if hit is None:
            hit = self._cache[name] = IdIndex(ids())
        assert isinstance(hit, IdIndex)
        return hit

    def held_entry(self, rows: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Position in ``held_idx`` of each (shard position, item) pair (``-1``: not held)."""
        hit = self._cache.get("idx:held")
        if hit is None:
            st = self.state
            hit = self._cache["idx:held"] = PairIndex(
                self.held_rows(), st.held_idx, len(self.clients), self._n_items(st.held_idx)
            )
        assert isinstance(hit, PairIndex)
        return hit.find(rows, items)

    def conv_entry(self, owners: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Position among the convolution-items of each (convolution-client id, item) pair (``-1``: none)."""
        hit = self._cache.get("idx:conv")
        if hit is None:
            st = self.state
            hit = self._cache["idx:conv"] = PairIndex(
                self.position(st.conv_owner), st.conv_items, len(self.clients), self._n_items(st.conv_items)
            )
        assert isinstance(hit, PairIndex)
        return hit.find(self._id_index("clients", lambda: self.clients).find(owners), items)

    @staticmethod
    def _n_items(items: np.ndarray) -> int:
        """Past the largest item id of a static set (ids beyond are looked up as absent)."""
        return int(items.max()) + 1 if len(items) else 0

    def conv_token_index(self) -> TokenIndex:
        """Bulk lookup of a token among the convolution-items'."""
        idx = self._cache.get("conv_tokens")
        if idx is None:
            idx = self._cache["conv_tokens"] = TokenIndex(self.tokens_of(self.state.conv_items))
        assert isinstance(idx, TokenIndex)
        return idx

    # ------------------------------------------------------------------ operators
    def operator(self, name: str) -> torch.Tensor:
        """A cached torch CSR operator built from the state's arrays (rebuilt after a reload).

        ``R`` (Eq. 7 on the local item space), ``A`` (Eq. 8) and ``AW`` (Eq. 29's weights) on the
        neighbour table (:meth:`neighbour_table`), ``F`` (Eq. 6 over the server's columns).
        """
        op = self._cache.get("op:" + name)
        if op is None:
            op = self._cache["op:" + name] = torch_csr(self._scipy(name), self.dtype)
        assert isinstance(op, torch.Tensor)
        return op

    def operator_rows(self, name: str, rows: np.ndarray) -> torch.Tensor:
        """Rows ``rows`` (shard positions) of operator ``name``: a product for only the rows a step needs.

        Each row's sum runs over the same entries in the same order as in :meth:`operator`.
        """
        return torch_csr(self._cached_scipy(name)[rows], self.dtype)

    def product(self, name: str, x: torch.Tensor, rows: np.ndarray | None = None) -> torch.Tensor:
        """``operator(name) @ x``; given ``rows`` (sorted, distinct), over only those rows of ``x``.

        ``rows`` must hold every non-zero row of ``x``. The first backward layer multiplies
        gradients that are non-zero on the minibatch's rows only (a few percent of the entries
        on a large graph): the operator's matching columns, cut from its cached transpose, give
        the same sums over the non-zero terms in the same order, at a fraction of the cost.
        """
        if rows is not None and 2 * len(rows) < int(x.shape[0]):
            m = self._cache.get("spT:" + name)
            if m is None:
                m = self._cache["spT:" + name] = self._cached_scipy(name).T.tocsr()
            assert isinstance(m, sp.csr_matrix)
            return torch_csr(m[rows].T.tocsr(), self.dtype) @ x.index_select(0, torch.from_numpy(rows))
        return self.operator(name) @ x

    def _cached_scipy(self, name: str) -> sp.csr_matrix:
        m = self._cache.get("sp:" + name)
        if m is None:
            m = self._cache["sp:" + name] = self._scipy(name).sorted_indices()
        assert isinstance(m, sp.csr_matrix)
        return m

    def remote_senders(self) -> np.ndarray:
        """Neighbours of this node's convolution-items hosted elsewhere (sorted ids)."""
        st = self.state
        return np.unique(st.nb_user[~np.isin(st.nb_user, self.clients)])

    def neighbour_columns(self) -> np.ndarray:
        """Column of each routing pair's neighbour in the neighbour table (shard position, or after)."""
        st = self.state
        local = np.isin(st.nb_user, self.clients)
        cols = np.empty(len(st.nb_user), dtype=np.int64)
        cols[local] = np.searchsorted(self.clients, st.nb_user[local])
        cols[~local] = len(self.clients) + np.searchsorted(self.remote_senders(), st.nb_user[~local])
        return cols

    def _scipy(self, name: str) -> sp.csr_matrix:
        st = self.state
        s, c = len(self.clients), len(st.conv_items)
        if name in ("A", "AW"):  # the own term and the neighbours' terms, one column space
            nb = self.neighbour_columns()[st.a_col]
            vals = np.concatenate([st.a_val, st.own_val] if name == "A" else [st.aw_val, st.ownw_val])
            rows, cols = np.concatenate([st.a_row, st.own_row]), np.concatenate([nb, st.own_col])
            return sp.csr_matrix((vals, (rows, cols)), shape=(c, s + len(self.remote_senders())))
        deg_u = np.diff(st.real_ptr).astype(np.float64)
        rows = np.repeat(np.arange(s), np.diff(st.real_ptr))
        if name == "F":
            cols = st.held_col[_real_entries(st)]
            n_cols = self.state.n_columns
            vals = 1.0 / np.sqrt(deg_u[rows]) if len(rows) else _f64()
            return sp.csr_matrix((vals, (rows, cols)), shape=(s, n_cols))
        if name == "R":
            local = self.local_position(st.real_idx)
            if len(local) and local.min() < 0:
                raise RuntimeError("a real item has no row on this node")
            deg_i = np.concatenate([st.conv_degree, st.sync_degree])[local]
            vals = 1.0 / np.sqrt(deg_u[rows] * deg_i) if len(rows) else _f64()
            return sp.csr_matrix((vals, (rows, local)), shape=(s, c + len(st.sync_items)))
        raise KeyError(name)

    def forget_operators(self) -> None:
        """Drop cached operators and indices (after the state changed)."""
        prefixes = (
            "op:",
            "sp:",
            "spT:",
            "idx:",
            "clients",
            "local_index",
            "conv_tokens",
            "conv_senders",
            "placement",
            "route",
        )
        for key in [k for k in self._cache if k.startswith(prefixes)]:
            del self._cache[key]


def _real_entries(st: LPGCNState) -> np.ndarray:
    """Positions in ``held_idx`` of the real items, in ``real_idx`` order (per client, sorted ids)."""
    out = np.empty(len(st.real_idx), dtype=np.int64)
    for_rows = np.repeat(np.arange(len(st.real_ptr) - 1), np.diff(st.real_ptr))
    keys_held = np.repeat(np.arange(len(st.held_ptr) - 1), np.diff(st.held_ptr)) * (1 << 32) + st.held_idx
    order = np.argsort(keys_held, kind="stable")
    keys_real = for_rows * (1 << 32) + st.real_idx
    out[:] = order[np.searchsorted(keys_held[order], keys_real)]
    return out
