r"""GNN4FR's client role for a shard of clients (spec ``gnn4fr.md``; stages in :class:`~.roles.Stage`).

Set-up (Algorithms 2–3, :mod:`.client_setup`): every client sends an X25519 public key; the
key-client draws :math:`S` and wraps it for everybody (the server relays wrapped keys only); every
client uploads the tokens of its items; the server tells each client its neighbours, their degrees
and who holds which of its items, from which the node builds its local graph (:mod:`.graph`).

One minibatch:

1. **Forward** (Algorithm 4), ``L`` rounds: every client multicasts :math:`S(U^{(k)}_u)` to its
   neighbours; each node computes :math:`V^{(k+1)}` of all its items from all their users (every
   holder computes the same row) and :math:`U^{(k+1)}` of its clients.
2. **Loss**: negatives' embeddings of all layers come sealed from their designated holder (items
   nobody holds from the key-client, which keeps them); each client computes its BPR loss.
3. **Backward**, by default the *transpose of the forward*: each client sends the direct gradient
   of every item of its triples, sealed, to the item's holders; then, for ``l = L-1 .. 0``, every
   client multicasts its :math:`G^{(l+1)}_u` to its neighbours and every holder computes
   :math:`G^{(l)}_i = w\,\partial_i + \sum_{u\in\mathcal U_i} c_{ui} G^{(l+1)}_u` of its items (as it
   computed :math:`V^{(l+1)}_i`) and :math:`G^{(l)}_u` of its clients. Every holder then has the
   exact item gradient and applies the same Adam step: no item gradient is aggregated at all.
   With ``paper_literal`` the node runs Algorithm 5 and the secret-shared sum as the paper prints
   them instead (:mod:`.paper`).

Why the transposed backward is at least as private as the paper's scheme (issue #25):

* **Server.** It relays only sealed rows, as before, and no longer receives any upload whose sum
  it learns: the paper's server learns every item's aggregate gradient :math:`\sum_u g_{i(u)}` at
  every step; here it learns no gradient value. What it newly sees is routing: which item token a
  triple's direct gradient is for. Negatives' tokens it saw already (negative requests); a
  positive is a draw from the client's item set, whose tokens the server holds since set-up.
* **Neighbours.** They hold :math:`S` in both schemes. In the paper's scheme that makes the
  "secret" shares readable to any client colluding with the server (shares travel under
  :math:`S` through the server), so the server plus any one client unmasks every upload; here
  there is nothing to unmask. A neighbour receives :math:`G^{(l)}_u` rows where the paper sends
  it :math:`\sum_{i\in\mathcal I_u\cap\mathcal I_{u'}} c_{u'i}\, g^{(l)}_{i(u)}` (a gradient row of the
  same user, combined per pair), and the direct gradients of triples on items it holds, whose
  holders it already knows from the set-up connectivity.
* **Cost.** Per client and step: ``2L`` received multicast rows per neighbour (the paper: ``3L``
  rows per neighbour, ``L`` of them sent unicast) and a few rows per triple, instead of four dense
  ``m x d`` vectors; and one AEAD operation per row a client *sends*, not per pair.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.protocols.common import layer_mean, local_bpr
from fedgraphrec.protocols.gnn4fr import paper
from fedgraphrec.protocols.gnn4fr.client_setup import SetupClient
from fedgraphrec.protocols.gnn4fr.expect import check_field, check_rows
from fedgraphrec.protocols.gnn4fr.roles import CLIENT, HOLDER_OF_ITEM, SERVER, Phase, Stage
from fedgraphrec.protocols.gnn4fr.state import StepState
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part
from fedgraphrec.runtime.sealing import party_names

__all__ = ["GNN4FRClient", "gradient_names"]


def gradient_names(senders: np.ndarray, handles: np.ndarray) -> list[str]:
    """Sender names bound into direct item-gradient rows: the client and the item's token handle."""
    return [f"client:{s}/item:{h}" for s, h in zip(senders.tolist(), handles.tolist(), strict=True)]


class GNN4FRClient(SetupClient):
    """A shard of GNN4FR clients (module docstring): the stages of a minibatch and of a prediction."""

    # ------------------------------------------------------------------ forward (Algorithm 4)
    def stage_step_begin(self, step: int, request: Message) -> Message:
        """A minibatch (or a prediction) starts from the layer-0 rows.

        The triples must be the node's own: its clients, positives they hold, items of the catalogue.
        """
        f = request.fields
        prefix = f.get("prefix", "forward")
        if prefix not in ("forward", "predict/forward"):
            raise IntegrityError(f"gnn4fr stage {Stage.BEGIN!r}: field 'prefix' = {prefix!r} names no cycle")
        users, pos, neg = (np.asarray(f.get(k, []), dtype=np.int64) for k in ("users", "pos", "neg"))
        st = StepState(
            users=self._triples(users, pos, neg, int(f.get("batch", 0)), predict=prefix != "forward"),
            pos=pos,
            neg=neg,
            batch=int(f.get("batch", 0)),
            predict=prefix != "forward",
            complete=False,
            u_layers=self.state.users.param.detach().unsqueeze(0).clone(),
            v_layers=self.state.items.param.detach().unsqueeze(0).clone(),
        )
        self.state.step = st
        return self._after_layer(0)

    def _triples(
        self, users: np.ndarray, pos: np.ndarray, neg: np.ndarray, batch: int, predict: bool
    ) -> np.ndarray:
        """Positions of the triples' users, once the triples are checked against the node's own data."""
        where = f"gnn4fr stage {Stage.BEGIN!r}"
        if predict:
            if len(users) or len(pos) or len(neg) or batch:
                raise IntegrityError(f"{where}: a prediction carries no triples")
            return users
        if not (len(users) == len(pos) == len(neg)) or batch < max(len(users), 1):
            raise IntegrityError(
                f"{where}: {len(users)} users, {len(pos)} positives, {len(neg)} negatives "
                f"in a batch of {batch}"
            )
        if len(neg) and (neg.min() < 0 or neg.max() >= self.n_items):
            raise IntegrityError(f"{where}: a negative is not a catalogue item")
        if not self.holds(users, pos).all():
            raise IntegrityError(
                f"{where}: a triple's user is not on this node or does not hold its positive"
            )
        return np.searchsorted(self.clients, users)

    def stage_step_forward(self, step: int, request: Message) -> Message:
        """Layer ``k`` of the neighbours arrived: every node item and client at layer ``k + 1``."""
        st, k = self.state.step, self.occurrence  # the layer: how many forwards ran this step
        check_field(Stage.FORWARD, request.fields, "layer", k)
        check_field(Stage.FORWARD, request.fields, "prefix", "predict/forward" if st.predict else "forward")
        part = request["rows"]
        self.check_relay(part)
        g = self._graph()
        known = g.gather_known(st.u_layers[k], part)
        v_next = g.rt(self.dtype) @ known
        u_next = g.r_own(self.dtype) @ st.v_layers[k]
        st.u_layers = torch.cat([st.u_layers, u_next.unsqueeze(0)])
        st.v_layers = torch.cat([st.v_layers, v_next.unsqueeze(0)])
        return self._after_layer(k + 1)

    def _after_layer(self, k: int) -> Message:
        st = self.state.step
        if k < self.L:
            prefix = "predict/forward" if st.predict else "forward"
            return self.rows_part(Phase.forward(k, prefix), "user_embedding", st.u_layers[k])
        if st.predict:  # a prediction: keep the final rows
            self.state.final_users = layer_mean(list(st.u_layers))
            st.g_item = layer_mean(list(st.v_layers))
            return Message()
        key = np.unique(st.users * self.n_items + st.neg)  # one request per (client, negative)
        st.req_user, st.req_item = key // self.n_items, key % self.n_items
        part = Part(
            Phase.NEGATIVE_REQUESTS, "item_token", CLIENT, SERVER, self.tokens_of(st.req_item), shape="blobs",
            protection="pseudonymous", senders=self.clients[st.req_user],
        )  # fmt: skip
        return Message({"requests": part})

    # ------------------------------------------------------------------ loss
    def stage_step_negatives(self, step: int, request: Message) -> Message:
        """Designated holders send the requested items' embeddings of all layers, sealed to the requester."""
        f = request.fields
        holders = np.asarray(f["holders"], dtype=np.int64)
        requesters = np.asarray(f["requesters"], dtype=np.int64)
        handles = np.asarray(f["tokens"], dtype=np.int64)
        if not (len(holders) == len(requesters) == len(handles)):
            raise IntegrityError(
                f"gnn4fr stage {Stage.NEGATIVES!r}: holders, requesters and tokens differ in count"
            )
        if len(requesters) and (requesters.min() < 0 or requesters.max() >= self.n_users):
            raise IntegrityError(f"gnn4fr stage {Stage.NEGATIVES!r}: a requester is not a client of the run")
        items = self.items_of(handles, "negative requests")
        self.check_holders(Stage.NEGATIVES, holders, items)
        v = self.state.step.v_layers
        rows = self.item_rows(items, v, "negative requests").reshape(len(items), v.shape[0] * v.shape[2])
        part = Part(
            Phase.NEGATIVE_EMBEDDINGS, "item_embedding", CLIENT, SERVER, rows, protection="sealed",
            senders=holders, seal_to_role=CLIENT, seal_to=requesters,
            bound_senders=party_names(HOLDER_OF_ITEM, handles.tolist()),
        )  # fmt: skip
        return Message({"embeddings": part})

    def stage_step_loss(self, step: int, request: Message) -> Message:
        """Every client's BPR loss and direct gradients; the direct item gradients go to the holders."""
        st, L, m = self.state.step, self.L, self.n_items
        d = int(st.u_layers.shape[-1])
        part = request["embeddings"]
        handles = np.array([int(s.rpartition(":")[2]) for s in part.bound_senders or []], dtype=np.int64)
        recv = np.searchsorted(self.clients, part.receivers if part.receivers is not None else [])
        keys = recv * m + self.items_of(handles, "negative embeddings")
        order = np.argsort(keys, kind="stable")
        if not np.array_equal(keys[order], st.req_user * m + st.req_item):
            raise IntegrityError(f"{part.phase}: the delivered rows do not answer this node's requests")
        neg_rows = torch.as_tensor(part.message_rows(order)).reshape(len(order), L + 1, d)
        holder = (part.senders if part.senders is not None else np.full(len(order), -1))[order]
        # the local item space: the node's items, then requested negatives the node does not hold
        ids = self.state.item_ids
        extra = np.setdiff1d(st.req_item, ids)
        by_item = np.argsort(st.req_item, kind="stable")
        first = by_item[np.searchsorted(st.req_item[by_item], extra)]
        v_all = torch.cat([st.v_layers, neg_rows[torch.from_numpy(first)].permute(1, 0, 2)], dim=1)
        space = np.concatenate([ids, extra])
        local = np.argsort(space, kind="stable")
        pos_l = local[np.searchsorted(space[local], st.pos)]
        neg_l = local[np.searchsorted(space[local], st.neg)]
        U, V = layer_mean(list(st.u_layers)), layer_mean(list(v_all))
        loc = local_bpr(
            U, V, st.u_layers[0], v_all[0], torch.from_numpy(st.users), torch.from_numpy(pos_l),
            torch.from_numpy(neg_l), self.settings.reg, batch_size=st.batch,
        )  # fmt: skip
        st.d_user, st.r_user = loc.dU, loc.rU
        out = Message(fields={"bpr": float(loc.bpr), "reg": float(loc.reg)})
        occ_user = np.concatenate([st.users, st.users])
        occ_item = np.concatenate([st.pos, st.neg])
        if self.settings.paper_literal:
            return paper.loss_reply(self, out, loc, holder)
        return self._direct_gradients(out, loc, occ_user, occ_item)

    def _direct_gradients(
        self, out: Message, loc: Any, occ_user: np.ndarray, occ_item: np.ndarray
    ) -> Message:
        """Each triple's direct item gradients: kept by a representative holder, sent to the others."""
        st, g, ids = self.state.step, self._graph(), self.state.item_ids
        n_pos = len(st.pos)
        on_node = np.zeros(len(occ_item), dtype=bool)
        at = np.minimum(np.searchsorted(ids, occ_item), max(len(ids) - 1, 0))
        on_node[:n_pos] = True  # a positive is held by its own client
        local = on_node & (g.rep[at] == occ_user) if len(ids) else on_node
        others = np.ones(len(occ_item), dtype=bool)
        others[:n_pos] = g.item_holders[at[:n_pos]] > 1 if n_pos else others[:n_pos]
        send = others
        st.d_item = torch.zeros((len(ids), loc.d_rows.shape[1]), dtype=self.dtype)
        st.d_item.index_add_(
            0, torch.from_numpy(at[local]), loc.d_rows[torch.from_numpy(np.flatnonzero(local))]
        )
        st.r_item = torch.from_numpy(np.bincount(at[local], minlength=len(ids)).astype(np.float64)).to(
            self.dtype
        )
        sel = np.flatnonzero(send)
        senders = self.clients[occ_user[sel]]
        handles = self.state.catalogue_tokens[occ_item[sel], :8].copy().view(">i8").ravel().astype(np.int64)
        names = gradient_names(senders, handles) if self.real else None  # bound into the AEAD (real mode)
        out.add("grads", Part(
            Phase.ITEM_GRADIENTS, "item_gradient", CLIENT, SERVER, loc.d_rows[torch.from_numpy(sel)],
            protection="sealed", senders=senders, seal_to_role=CLIENT, bound_senders=names,
        ))  # fmt: skip
        out.add("tokens", Part(
            Phase.ITEM_GRADIENT_TOKENS, "item_token", CLIENT, SERVER, self.tokens_of(occ_item[sel]),
            shape="blobs", protection="pseudonymous", senders=senders,
        ))  # fmt: skip
        return out

    # ------------------------------------------------------------------ backward
    def stage_step_gradients(self, step: int, request: Message) -> Message:
        """The holders' share of the triples' direct item gradients arrived: the top layer's gradients."""
        if self.settings.paper_literal:
            return paper.gradients(self, request)
        st, g, ids, L = self.state.step, self._graph(), self.state.item_ids, self.L
        part = request["grads"]
        check_rows(Stage.GRADIENTS, part, self.dtype, int(st.d_user.shape[1]))
        handles = np.asarray(request.fields.get("tokens", []), dtype=np.int64)
        if len(handles) != (0 if part.receivers is None else len(part.receivers)):
            raise IntegrityError(
                f"gnn4fr stage {Stage.GRADIENTS!r}: {part.phase} and its tokens differ in count"
            )
        if (
            part.bound_senders is not None
            and part.senders is not None
            and part.bound_senders != gradient_names(part.senders, handles)
        ):
            raise IntegrityError(f"{part.phase}: a direct gradient is bound to another sender or item")
        items = self.items_of(handles, "item gradients")
        held = np.isin(items, ids)
        self._custody_step(
            items[~held], torch.as_tensor(part.message_rows(np.flatnonzero(~held))), part, st.batch
        )
        keep = np.flatnonzero(held)
        items = items[held]
        at = np.searchsorted(ids, items)
        recv = np.searchsorted(self.clients, part.receivers[held] if part.receivers is not None else [])
        edges = g.own_user * max(len(ids), 1) + g.own_item
        if len(items) and not np.isin(recv * max(len(ids), 1) + at, edges).all():
            raise IntegrityError(f"{part.phase}: a direct gradient for an item its receiver does not hold")
        use = g.rep[at] == recv if len(items) else np.zeros(0, dtype=bool)
        st.d_item.index_add_(0, torch.from_numpy(at[use]), torch.as_tensor(part.message_rows(keep[use])))
        counts = st.r_item + torch.from_numpy(np.bincount(at[use], minlength=len(ids)).astype(np.float64)).to(
            self.dtype
        )
        st.r_item = self.settings.reg * st.v_layers[0] * counts.unsqueeze(1) / st.batch
        w = 1.0 / (L + 1)
        st.g_user = w * st.d_user + (st.r_user if L == 0 else 0)
        st.g_item = w * st.d_item + (st.r_item if L == 0 else 0)
        if L == 0:
            self.update(st.g_user, st.g_item)
            st.complete = True
            return Message()
        return self.rows_part(Phase.user_gradients(L), "user_gradient", st.g_user)

    def _custody_step(self, items: np.ndarray, rows: torch.Tensor, part: Part, batch: int) -> None:
        """The key-client's custody: direct gradients of the items nobody holds, and their Adam step."""
        cust = self.state.custody
        if cust is None:
            if len(items):
                raise IntegrityError(
                    f"{part.phase}: a direct gradient for an item no client of this node holds"
                )
            return
        ids = self.state.custody_ids
        at = np.searchsorted(ids, items)
        if len(items) and (at.max() >= len(ids) or not np.array_equal(ids[at], items)):
            raise IntegrityError(f"{part.phase}: a direct gradient for an item no client of this node holds")
        grad = torch.zeros_like(cust.param).index_add_(0, torch.from_numpy(at), rows.to(cust.param.dtype))
        counts = torch.from_numpy(np.bincount(at, minlength=len(ids)).astype(np.float64)).to(grad.dtype)
        w = 1.0 / (self.L + 1)  # nobody holds the item: V^(l) = 0 for l >= 1, so only layer 0 feels it
        cust.step(w * grad + self.settings.reg * cust.param * counts.unsqueeze(1) / batch, self.settings.lr)

    def stage_step_backward(self, step: int, request: Message) -> Message:
        """Layer ``l + 1`` user gradients of the neighbours arrived: layer ``l`` of items and clients."""
        st = self.state.step
        check_field(Stage.BACKWARD, request.fields, "layer", self.L - self.occurrence)
        layer = self.L - self.occurrence - 1  # the layer computed here: from the node's own count
        st.backward += 1
        if self.settings.paper_literal:
            return paper.backward(self, request, layer)
        g, w = self._graph(), 1.0 / (self.L + 1)
        part = request["rows"]
        self.check_relay(part)
        known = g.gather_known(st.g_user, part)
        g_item = w * st.d_item + g.rt(self.dtype) @ known
        g_user = w * st.d_user + g.r_own(self.dtype) @ st.g_item
        if layer == 0:
            self.update(g_user + st.r_user, g_item + st.r_item)
            st.complete = True
            return Message()
        st.g_user, st.g_item = g_user, g_item
        return self.rows_part(Phase.user_gradients(layer), "user_gradient", g_user)

    def stage_step_upload(self, step: int, request: Message) -> Message:
        """Paper-literal: kept share plus the predecessor's share, uploaded (:mod:`.paper`)."""
        return paper.upload(self, request)

    def stage_step_update(self, step: int, request: Message) -> Message:
        """Paper-literal: the server's sum arrived; every holder applies the same Adam step."""
        return paper.update(self, request)

    # ------------------------------------------------------------------ prediction (Algorithm 6)
    def stage_predict_items(self, step: int, request: Message) -> Message:
        """The picked holder of each item uploads its final embedding, sealed for any client."""
        f = request.fields
        holders = np.asarray(f["holders"], dtype=np.int64)
        handles = np.asarray(f["tokens"], dtype=np.int64)
        if len(holders) != len(handles):
            raise IntegrityError(f"gnn4fr stage {Stage.PREDICT_ITEMS!r}: holders and tokens differ in count")
        self.check_holders(Stage.PREDICT_ITEMS, holders, self.items_of(handles, "predict"))
        final = self.state.step.g_item.unsqueeze(0)  # one "layer": the final rows (custody: w V^(0))
        rows = self.item_rows(self.items_of(handles, "predict"), final, "predict").reshape(
            len(handles), final.shape[2]
        )
        cust = np.isin(self.items_of(handles, "predict"), self.state.custody_ids)
        rows[torch.from_numpy(np.flatnonzero(cust))] /= self.L + 1
        part = Part(
            Phase.PREDICT_ITEMS, "item_embedding", CLIENT, SERVER, rows, protection="sealed", senders=holders,
            seal_to_role=CLIENT, bound_senders=party_names(HOLDER_OF_ITEM, handles.tolist()),
        )  # fmt: skip
        return Message({"items": part})

    def stage_predict_deliver(self, step: int, request: Message) -> Message:
        """Each client gets the final embeddings of every item it lacks and assembles the item table."""
        part = request["items"]
        items = self.items_of(self._handles_of(part), "predict")
        got_to = np.asarray(part.receivers if part.receivers is not None else [], dtype=np.int64)
        recv = np.minimum(np.searchsorted(self.clients, got_to), len(self.clients) - 1)
        if not np.array_equal(self.clients[recv], got_to):
            raise IntegrityError(
                f"{part.phase}: final item rows for clients of another node were delivered here"
            )
        m, ptr = self.n_items, self.state.own_ptr
        lacking = m - np.diff(ptr)
        key = recv * m + items
        seq = self.state.own_seq
        own = np.repeat(np.arange(len(self.clients)), np.diff(ptr)) * m + seq
        if (
            (np.bincount(recv, minlength=len(self.clients)) != lacking).any()
            or len(np.unique(key)) != len(key)
            or np.isin(key, own).any()
        ):
            raise IntegrityError(f"{part.phase}: a client did not get exactly the items it lacks")
        table = torch.zeros((m, int(self.state.items.param.shape[1])), dtype=self.dtype)
        got, first = np.unique(items, return_index=True)  # copies of one item are equal (authenticated)
        table[torch.from_numpy(got)] = torch.as_tensor(part.message_rows(first)).to(self.dtype)
        table[torch.from_numpy(self.state.item_ids)] = self.state.step.g_item
        self.state.final_items = table
        self.state.step.complete = True
        return Message()
