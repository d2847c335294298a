"""What the LP-GCN client shard's training stages share: the parts they send, the tables they read.

Convolution-items' rows go up in one part per node (one logical message per convolution-client);
users' rows and gradients go up sealed under :math:`S`, multicast to the convolution-clients the
server routes them to. A node's local item table is its convolution-items' rows followed by the
synchronised rows it received; Eq. 8 (and Eq. 29) is the own-term operator on the shard's rows
plus the pair operator on the relayed rows.
"""

from __future__ import annotations

import numpy as np
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.protocols.common import CLIENT, SERVER, regulariser_by_use
from fedgraphrec.protocols.lpgcn.client_setup import grouped
from fedgraphrec.protocols.lpgcn.expect import ExpectedParts
from fedgraphrec.protocols.lpgcn.lookup import distinct
from fedgraphrec.protocols.lpgcn.roles import CONV_CLIENT
from fedgraphrec.runtime.blocks import in_order
from fedgraphrec.runtime.endpoint import require_senders
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part

__all__ = ["StageParts"]


class StageParts(ExpectedParts):
    """Helpers of the training stages (module docstring)."""

    """Training and prediction stages of the LP-GCN client shard (module docstring)."""

    debug: dict[str, list[torch.Tensor]] | None = None
    """When a dict: every stage appends what it computed (layers, gradients), for step-by-step tests."""

    def _record(self, name: str, value: torch.Tensor) -> None:
        if self.debug is not None:
            self.debug.setdefault(name, []).append(value.detach().clone())

    @property
    def _w(self) -> float:
        return 1.0 / (self.settings.n_layers + 1)

    def _prefix(self) -> str:
        return "predict/" if self.state.step.predict else ""

    # ------------------------------------------------------------------ parts
    def _conv_part(self, phase: str, kind: str, rows: torch.Tensor) -> dict[str, Part]:
        if not len(self.state.conv_items):
            return {}
        hit = self._cache.get("conv_senders")  # static after set-up
        if hit is None:
            hit = self._cache["conv_senders"] = grouped(self.state.conv_owner)
            for a in hit:  # read-only: the transport and ledger may recognise them by identity
                a.flags.writeable = False
        senders, counts = hit
        return {"items": Part(phase, kind, CONV_CLIENT, SERVER, rows, counts=counts, senders=senders)}

    def _user_part(self, phase: str, kind: str, rows: torch.Tensor) -> dict[str, Part]:
        part = Part(
            phase,
            kind,
            CLIENT,
            SERVER,
            rows,
            protection="sealed",
            senders=self._senders(),
            seal_to_role=CONV_CLIENT,
        )
        return {"users": part}

    def _senders(self) -> np.ndarray:
        """The shard's client ids as a read-only view (one object for every part they send)."""
        hit = self._cache.get("senders")
        if hit is None or hit[0] is not self.clients:
            view = self.clients.view()
            view.flags.writeable = False
            hit = self._cache["senders"] = (self.clients, view)
        ids: np.ndarray = hit[1]
        return ids

    def _local_table(self, conv: torch.Tensor, request: Message) -> torch.Tensor:
        """The local item table: own convolution-items' rows, then the synchronised ones received."""
        got = request["items"].value if "items" in request else None
        n_sync = len(self.state.sync_items)
        if got is None or int(got.shape[0]) == 0:
            if n_sync:
                raise IntegrityError("synchronised item rows are missing")
            return conv
        if int(got.shape[0]) != n_sync:
            raise IntegrityError(f"{int(got.shape[0])} synchronised item rows for {n_sync} items")
        return torch.cat([conv, torch.as_tensor(got).to(conv.dtype)])

    def _eq8(
        self, own_rows: torch.Tensor, request: Message, name: str, nonzero: np.ndarray | None = None
    ) -> torch.Tensor:
        """Eq. 8 (``A``) or Eq. 29 (``AW``) for every convolution-item, as one product.

        The operator's columns are the neighbour table: the shard's own rows (the own term, and
        neighbours hosted here, whose received rows replace them) followed by the rows of
        neighbours hosted elsewhere, by client id. Both crypto modes build the same table, so they
        compute the same numbers bit for bit. ``nonzero``: the only non-zero rows of the shard's
        own rows, when few are (:meth:`product`).
        """
        st = self.state
        relay = request.get("users")
        if relay is None or relay.n_messages == 0:
            if len(st.nb_user):
                raise IntegrityError("the relayed neighbour rows are missing")
            return self.product(name, own_rows, nonzero)
        if relay.bound_senders is not None:  # LP-GCN binds user rows to their senders' ids only
            raise IntegrityError(f"{relay.phase}: relayed user rows name senders other than their ids")
        checked = self._cache.get("route")
        if not _same_readonly(checked, (relay.senders, relay.receivers)):
            require_senders(relay, st.nb_user, "neighbours of this node's convolution-items")
            if relay.receivers is None or not np.array_equal(relay.receivers, st.nb_conv):
                raise IntegrityError(
                    f"{relay.phase}: neighbour rows re-routed to the wrong convolution-clients"
                )
            self._cache["route"] = (relay.senders, relay.receivers)
        value = torch.as_tensor(relay.value)
        if value is own_rows:  # in process: the very rows this node sent, nothing to place
            return self.product(name, own_rows, nonzero)
        first_local, at_local, first_remote = self._placement()
        whole = self._local_rows_whole(relay.index, int(value.shape[0]))
        placed = self._relayed_rows(value, relay.index, first_local, own_rows.dtype, whole)
        if len(first_local) == int(own_rows.shape[0]):  # every shard row replaced (positions in order)
            table = placed
        else:
            table = own_rows.clone()
            table.index_copy_(0, at_local, placed)
        if len(first_remote):
            table = torch.cat([table, self._relayed_rows(value, relay.index, first_remote, own_rows.dtype)])
            if nonzero is not None:  # the rows received from the other nodes can be non-zero anywhere
                nonzero = torch.nonzero(table.any(dim=1)).flatten().numpy()
        # (a row relayed from a client of this node is the row it sealed in this phase and step, as
        # in own_rows: the sealed header names its sender and the AEAD binds phase and step)
        return self.product(name, table, nonzero)

    def _placement(self) -> tuple[np.ndarray, torch.Tensor, np.ndarray]:
        """Where each distinct neighbour's relayed row goes in the neighbour table (static after set-up).

        The first routing pair of every neighbour hosted here (its relayed row replaces the
        shard's own row, at the returned shard positions) and of every neighbour hosted
        elsewhere (appended after the shard's rows, by client id).
        """
        hit = self._cache.get("placement")
        if hit is None:
            senders, first = np.unique(self.state.nb_user, return_index=True)
            local = np.isin(senders, self.clients)
            at = torch.from_numpy(np.searchsorted(self.clients, senders[local]))
            hit = self._cache["placement"] = (first[local], at, first[~local])
        return hit

    def _local_rows_whole(self, index: np.ndarray | None, n: int) -> bool:
        """Whether the local neighbours' relayed rows are the relayed table of ``n`` rows, in order.

        True on one node (every row relayed is a distinct neighbour's, in client order). A static
        route delivers the very same read-only index every step: checked once for that array (as
        the route itself, :meth:`_eq8`); any other index is checked again.
        """
        hit = self._cache.get("local_whole")
        static = index is None or not index.flags.writeable
        if static and isinstance(hit, tuple) and hit[0] is index and hit[1] == n:
            return bool(hit[2])
        whole = _rows_in_order(index, self._placement()[0], n)
        self._cache["local_whole"] = (index, n, whole)
        return whole

    @staticmethod
    def _relayed_rows(
        value: torch.Tensor,
        index: np.ndarray | None,
        first: np.ndarray,
        dtype: torch.dtype,
        whole: bool | None = None,
    ) -> torch.Tensor:
        """Rows ``first`` of the relayed messages (read through the part's view, if any).

        The relayed table itself when those are all its rows in order (one node: no copy);
        ``whole``: that is already known (:meth:`_local_rows_whole`).
        """
        if whole is None:
            whole = _rows_in_order(index, first, int(value.shape[0]))
        if whole:
            return value.to(dtype)
        pick = first if index is None else index[first]
        return value.index_select(0, torch.from_numpy(pick)).to(dtype)

    # ------------------------------------------------------------------ whole tables or the batch's rows
    # When the minibatch touches most rows (a small graph), whole-table arithmetic is cheaper than
    # gathering rows first; the numbers are the same either way (a zero or unread row changes no sum).
    def _whole_users(self) -> bool:
        """Whether the minibatch's users are most of the shard (the user layer means are whole tables)."""
        return 2 * len(self.state.step.users) >= len(self.clients)

    def _whole_items(self) -> bool:
        """Whether the batch's known items are most of the local item table (item layer means whole)."""
        st = self.state
        return 2 * len(st.step.known_t) > len(st.conv_items) + len(st.sync_items)

    def _whole_direct_items(self) -> bool:
        """Whether most convolution-items hold a direct gradient (:math:`D^{(k)}` added whole)."""
        return 2 * len(self.state.step.v_rows) > len(self.state.conv_items)

    def _accumulate_items(self, table: torch.Tensor, layer: int) -> None:
        ss = self.state.step
        if ss.predict:
            return
        if layer == 0:
            ss.known_t = torch.from_numpy(ss.item_local[ss.item_local >= 0])
            ss.v0 = table.index_select(0, ss.known_t)
            ss.acc_i = (table if self._whole_items() else ss.v0) * self._w
        else:
            ss.acc_i.add_(table if self._whole_items() else table.index_select(0, ss.known_t), alpha=self._w)

    def _direct_rows(self) -> None:
        r"""The convolution-items' distinct non-zero direct-gradient rows and those rows' λ-terms.

        Every triple that uses item :math:`i` adds :math:`\lambda/|B|\,V^{(0)}_i` to its layer-0
        gradient (spec §2.4); the owner adds them as one product, ``count × λ/|B| × V^{(0)}_i``,
        from the rows it received for :math:`i` (``v_at``), so the senders need not send them.
        """
        st, ss = self.state, self.state.step
        ss.v_rows = distinct(ss.v_at, len(st.conv_items))
        uses = np.bincount(ss.v_at, minlength=len(st.conv_items))[ss.v_rows]
        v0 = st.item_emb.index_select(0, torch.from_numpy(ss.v_rows))
        ss.r_v = regulariser_by_use(v0, uses, self.settings.reg, ss.batch_size)

    def _plus_direct(
        self, g_u: torch.Tensor, g_v: torch.Tensor, u_rows: torch.Tensor, v_rows: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Add rows of the minibatch's users and of ``v_rows`` to whole gradient tables, in place."""
        ss = self.state.step
        return (
            g_u.index_add_(0, torch.from_numpy(ss.users), u_rows),
            g_v.index_add_(0, torch.from_numpy(ss.v_rows), v_rows),
        )

    def _plus_direct_gradients(self, g_u: torch.Tensor, g_v: torch.Tensor) -> None:
        """Add :math:`D^{(k)}` to whole gradient tables, in place: by rows, or whole (most rows hold one)."""
        ss = self.state.step
        if self._whole_users():
            g_u.add_(ss.d_u)
        else:
            g_u.index_add_(0, torch.from_numpy(ss.users), ss.d_u_rows)
        if self._whole_direct_items():
            g_v.add_(ss.d_v)
        else:
            g_v.index_add_(0, torch.from_numpy(ss.v_rows), ss.d_v_rows)

    def _nonzero_items(self, table: torch.Tensor) -> np.ndarray:
        """Rows of the local item table of :math:`G^{(L)}` that can be non-zero: direct gradients."""
        ss, c = self.state.step, len(self.state.conv_items)
        if int(table.shape[0]) == c:
            return ss.v_rows
        synced = torch.nonzero(table[c:].any(dim=1)).flatten().numpy()
        return np.concatenate([ss.v_rows, c + synced])

    def _token_columns(self, items: np.ndarray) -> torch.Tensor:
        """Each item's token as trailing columns of a message row (its bytes viewed as the dtype)."""
        table = self._cache.get("token_columns")
        if table is None or table.dtype != self.dtype:  # every catalogue item's, built once
            every = np.ascontiguousarray(self.token_table(items))
            np_dtype = torch.empty(0, dtype=self.dtype).numpy().dtype
            table = self._cache["token_columns"] = torch.from_numpy(every.view(np_dtype).copy())
        assert isinstance(table, torch.Tensor)
        return table.index_select(0, torch.from_numpy(np.asarray(items, dtype=np.int64)))

    def _finish(self, g_u: torch.Tensor, g_v: torch.Tensor) -> Message:
        """Layer-0 gradients in: Adam on every owned row (:class:`~.client_train.TrainingStages`)."""
        raise NotImplementedError


def _rows_in_order(index: np.ndarray | None, first: np.ndarray, n: int) -> bool:
    """Whether messages ``first``, read through ``index``, are rows ``0 .. n - 1`` of the relayed table."""
    pick = first if index is None else index[first]
    return bool(len(pick)) and in_order(pick, n)


def _same_readonly(checked: object, route: tuple[np.ndarray | None, np.ndarray | None]) -> bool:
    """Whether ``route`` is the very pair of read-only arrays checked before (nothing can have changed)."""
    if not isinstance(checked, tuple):
        return False
    return all(
        a is b and isinstance(b, np.ndarray) and not b.flags.writeable
        for a, b in zip(checked, route, strict=True)
    )
