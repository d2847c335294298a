r"""The client shard's loss stages: Algorithms 5 and 9, Eqs. 16-17 (spec ``lpgcn.md``).

``train/loss``: every client computes its triples' BPR loss and direct gradients :math:`D^{(l)}`
(spec §2.4) from the batch rows accumulated during the forward stages and, for negatives the node
holds no row of, the rows of every layer the server sent (Algorithm 9 line 1). Items' direct
gradients travel to their convolution-client — known to the holder from verification, named by
the server for other negatives — in one :math:`S`-sealed message per (sender, convolution-client)
holding rows ``[D | token]``; items nobody holds go to the server in the clear, and only items on
the key-client's sealed list of them (:mod:`.unheld`: the server's word alone is not enough). The
regulariser's term of an item's layer-0 gradient (:math:`\lambda/|B|\,V^{(0)}_i` for every triple
that uses :math:`i`) is added by the item's owner, who holds :math:`V^{(0)}_i` and counts the rows
it receives for :math:`i` (it learns no more than the rows themselves tell it).

``train/aggregate`` (Eqs. 16-17): each convolution-item adds what it received (checking that every
row names one of its receiver's items); :math:`G^{(L)}` of users and convolution-items out.
"""

from __future__ import annotations

import numpy as np
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.tokens import TOKEN_BYTES
from fedgraphrec.protocols.common import CLIENT, SERVER, local_bpr
from fedgraphrec.protocols.lpgcn.client_parts import StageParts
from fedgraphrec.protocols.lpgcn.lookup import pair_groups, ranks
from fedgraphrec.protocols.lpgcn.roles import CONV_CLIENT, LOSS, item_phase, user_phase
from fedgraphrec.protocols.lpgcn.unheld import server_owned_check
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part

__all__ = ["LossStages"]


class LossStages(StageParts):
    """Loss and aggregate stages of the client shard (module docstring)."""

    # ------------------------------------------------------------------ Algorithms 5 and 9
    def stage_train_loss(self, step: int, request: Message) -> Message:
        """Local BPR and direct gradients; items' gradients to their convolution-clients, sealed."""
        s, st, ss = self.settings, self.state, self.state.step
        L, d = s.n_layers, self.dim
        last = self._local_table(ss.cur_conv, request)
        self._accumulate_items(last, L)
        ss.cur_u = ss.cur_conv = torch.zeros(0)
        # negatives this node holds no row of: every layer from the server (Algorithm 9 line 1)
        got = torch.as_tensor(request["negatives"].value)
        if int(got.shape[0]) != (L + 1) * len(ss.extra):
            raise self.refuse(
                LOSS, f"{int(got.shape[0])} negative rows for {len(ss.extra)} items x {L + 1} layers"
            )
        extra = got.reshape(L + 1, -1, d) if len(ss.extra) else None
        items = ss.items
        known = np.flatnonzero(ss.item_local >= 0)
        V = torch.empty((len(items), d), dtype=self.dtype)
        V0 = torch.empty_like(V)
        known_t = torch.from_numpy(known)
        V.index_copy_(0, known_t, ss.acc_i.index_select(0, ss.known_t) if self._whole_items() else ss.acc_i)
        V0.index_copy_(0, known_t, ss.v0)
        if extra is not None:
            at = torch.from_numpy(np.searchsorted(items, ss.extra))
            acc = extra[0] * self._w
            for layer in range(1, L + 1):
                acc.add_(extra[layer], alpha=self._w)
            V[at], V0[at] = acc, extra[0]
        uix = torch.from_numpy(ranks(ss.users, ss.b_user, len(self.clients)))
        row = ranks(items, np.concatenate([ss.b_pos, ss.b_neg]), self._n_items(items))
        pix, nix = torch.from_numpy(row[: len(ss.b_pos)]), torch.from_numpy(row[len(ss.b_pos) :])
        acc_u = ss.acc_u.index_select(0, torch.from_numpy(ss.users)) if self._whole_users() else ss.acc_u
        loc = local_bpr(acc_u, V, ss.u0, V0, uix, pix, nix, s.reg, batch_size=ss.batch_size)
        ss.d_u = torch.zeros((len(self.clients), d), dtype=self.dtype)
        ss.d_u.index_copy_(0, torch.from_numpy(ss.users), loc.dU)
        ss.r_u = loc.rU  # the regulariser's rows: the minibatch's users only
        # who convolves each item row: the sender's own knowledge (held items) or the server's reply
        row_user = ss.users[loc.item_senders]
        row_item = items[loc.items.numpy()]
        owner = self._owners(
            row_user, row_item, np.asarray(request.fields.get("neg_owner", []), dtype=np.int64)
        )
        sender = self.clients[row_user]
        own = owner == sender
        ss.d_v = torch.zeros((len(st.conv_items), d), dtype=self.dtype)
        ss.v_at = np.zeros(0, dtype=np.int64)
        if own.any():
            ss.v_at = self._conv_position(owner[own], row_item[own])
            sel = torch.from_numpy(np.flatnonzero(own))
            ss.d_v.index_add_(0, torch.from_numpy(ss.v_at), loc.d_rows.index_select(0, sel))
        out = Message(fields={"bpr": float(loc.bpr), "reg": float(loc.reg)})
        out.parts.update(self._gradient_messages(~own, sender, owner, loc.d_rows, row_item))
        ss.acc_u = ss.acc_i = ss.u0 = ss.v0 = torch.zeros(0)
        return out

    def _owners(self, row_user: np.ndarray, row_item: np.ndarray, neg_owner: np.ndarray) -> np.ndarray:
        """The convolution-client of each item row: held items from verification, others from the server."""
        st, ss = self.state, self.state.step
        at = self.held_entry(row_user, row_item)
        owner = np.where(at >= 0, st.held_owner[at], -2)
        miss = np.flatnonzero(owner == -2)  # rows: the triples' positives, then their negatives
        n_pos = len(ss.b_pos)
        if len(miss) and miss[0] < n_pos:
            raise self.refuse(LOSS, "a triple's positive item (sent at layer 0) is not held by its user")
        if len(miss):
            if len(neg_owner) != len(ss.req_items):
                raise IntegrityError("loss/negative-embeddings: the server named no owner for some negatives")
            owner[miss] = neg_owner[ss.req_of[miss - n_pos]]
            assert self.data is not None
            server_owned_check(
                owner[miss], row_item[miss], self.clients[row_user[miss]], st.unheld_items,
                int(self.data.train.shape[0]),
            )  # fmt: skip
        return owner

    def _conv_position(self, owners: np.ndarray, items: np.ndarray) -> np.ndarray:
        at = self.conv_entry(owners, items)
        if (at < 0).any():
            raise RuntimeError("an item this node's client convolves is missing from its convolution-items")
        return at

    def _gradient_messages(
        self,
        remote: np.ndarray,
        sender: np.ndarray,
        owner: np.ndarray,
        d_rows: torch.Tensor,
        row_item: np.ndarray,
    ) -> dict[str, Part]:
        """One message per (sender, convolution-client): rows ``[D | token]`` of its items.

        The messages to convolution-clients come first and those to the server (items nobody
        holds) last, each group by (sender, convolution-client): each part's rows are one slice.
        The column blocks are gathered straight into the message table, in message order.
        """
        ids = np.flatnonzero(remote)
        if not len(ids):
            return {}
        to_server = owner[ids] < 0
        major = sender[ids] + to_server * (int(sender[ids].max()) + 1)  # the server's messages last
        order, first = pair_groups(major, owner[ids] + 1)  # a message per (sender, owner) pair
        ids = ids[order]
        starts = np.flatnonzero(first)
        lens = np.diff(starts, append=len(ids))
        src, dst = sender[ids[starts]], owner[ids[starts]]
        at, d = torch.from_numpy(ids), self.dim
        tokens = self._token_columns(row_item[ids])
        rows = torch.empty((len(ids), d + int(tokens.shape[1])), dtype=self.dtype)
        torch.index_select(d_rows, 0, at, out=rows[:, :d])
        rows[:, d:] = tokens
        n_msgs, n_rows = int(np.count_nonzero(dst >= 0)), int(np.count_nonzero(~to_server))
        out: dict[str, Part] = {}
        if n_msgs:
            out["grads"] = Part(
                "loss/item-gradients", "item_gradient", CLIENT, SERVER, rows[:n_rows], protection="sealed",
                senders=src[:n_msgs], counts=lens[:n_msgs], seal_to_role=CONV_CLIENT, seal_to=dst[:n_msgs],
            )  # fmt: skip
        if n_msgs < len(dst):
            out["grads-server"] = Part(
                "loss/item-gradients", "item_gradient", CLIENT, SERVER, rows[n_rows:], protection="plain",
                senders=src[n_msgs:], counts=lens[n_msgs:],
            )  # fmt: skip
        return out

    # ------------------------------------------------------------------ Eqs. 16-17 and Algorithm 6
    def stage_train_aggregate(self, step: int, request: Message) -> Message:
        """Convolution-items add the direct gradients they received; :math:`G^{(L)}` out."""
        st, ss, d = self.state, self.state.step, self.dim
        part = request.get("grads")
        if part is not None and part.n_messages:
            rows = torch.as_tensor(part.rows())
            tokens = np.ascontiguousarray(rows[:, d:].numpy()).view(np.uint8).reshape(-1, TOKEN_BYTES)
            pos = self.conv_token_index().find(tokens)
            assert part.receivers is not None
            to = np.repeat(part.receivers, part.counts if part.counts is not None else 1)
            if (pos < 0).any() or (st.conv_owner[np.maximum(pos, 0)] != to).any():
                raise IntegrityError(
                    "loss/item-gradients: a message names an item its receiver does not convolve; "
                    "the receiver rejected it (re-routed)"
                )
            # a contiguous source: index_add_ from a column slice is several times slower
            ss.d_v.index_add_(0, torch.from_numpy(pos), rows[:, :d].contiguous())
            ss.v_at = np.concatenate([ss.v_at, pos])
        self._direct_rows()
        ss.d_u, ss.d_v = ss.d_u * self._w, ss.d_v * self._w  # D^(l) of every layer l > 0
        if not self._whole_users():  # the only rows D^(k) is added by (otherwise whole tables)
            ss.d_u_rows = ss.d_u.index_select(0, torch.from_numpy(ss.users))
        if not self._whole_direct_items():
            ss.d_v_rows = ss.d_v.index_select(0, torch.from_numpy(ss.v_rows))
        if self.settings.n_layers == 0:
            return self._finish(*self._plus_direct(ss.d_u, ss.d_v, ss.r_u, ss.r_v))
        L = self.settings.n_layers
        ss.g_u, ss.cur_conv = ss.d_u, ss.d_v
        out = Message(self._conv_part(item_phase("", "gradient", L), "item_gradient", ss.d_v))
        out.parts.update(self._user_part(user_phase("", "gradient", L), "user_gradient", ss.d_u))
        return out
