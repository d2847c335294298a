r"""The client shard's training and prediction stages: Algorithms 1, 4, 5/9, 6 and 7 (spec ``lpgcn.md``).

One minibatch is ``train/layer0``, ``train/forward`` for :math:`k = 1..L`, ``train/loss``,
``train/aggregate``, ``train/backward`` for :math:`k = L-1..0` and, for LightGCN+, ``train/update``
(the server program drives them, :mod:`.server_train`). Every stage computes over the whole shard
at once: Eq. 7 for all its users is one sparse product over the local item table, Eq. 8 for all its
convolution-items one product with the relayed rows; only the minibatch's rows are gathered.

* Layer 0 (Alg. 1 lines 3-6; Alg. 8 with Eq. 6 for LightGCN+): users' rows (or
  :math:`U^{(0)} = F W`), convolution-items' rows up; :math:`S(e^{(0)}_u)` up.
* Forward, layer :math:`k` (Algorithm 4): items' layer :math:`k-1` rows in (synchronised), the
  neighbours' :math:`S(e^{(k-1)}_u)` in (relayed); :math:`e^{(k)}_u` by Eq. 7 (real items only) and
  :math:`e^{(k)}_{\tilde i}` by Eq. 8 (verified real holders, own term only if real for the
  convolution-client) out. At :math:`k = L` the batch's negatives are requested by token.
* Loss (Algorithms 5 and 9): local BPR and direct gradients :math:`D^{(l)}` (spec §2.4). Items'
  direct gradients travel to their convolution-client in one :math:`S`-sealed message per
  (sender, convolution-client), items nobody holds to the server in the clear.
* Aggregate (Eqs. 16-17): convolution-items sum what they received; :math:`G^{(L)}` out.
* Backward, layer :math:`k` (Algorithm 6): :math:`G^{(k)}_u = D^{(k)}_u + \sum_i c_{ui}G^{(k+1)}_i`
  (Eqs. 18, 21, 22, 25, 26), :math:`G^{(k)}_{\tilde i} = D^{(k)}_{\tilde i} + \sum_u c_{u\tilde i}
  G^{(k+1)}_u` (Eqs. 19, 20, 24, 27), from the synchronised item gradients and the relayed sealed
  user gradients (option (B) of §4.10). At :math:`k = 0` every owner runs Adam on its rows.
* Update (Algorithm 7 lines 10-16, LightGCN+): :math:`\nabla W_i = \sum_{u\in\mathcal U_i}
  G^{(0)}_u/\sqrt{|\mathcal I_u|}` (Eq. 29) at the convolution-clients from the relayed sealed user
  gradients (lossless, spec §11.1), or per client in the clear with random rows for virtual items
  (``paper_literal``).
* Prediction (§4.6): the forward stages without a batch, then ``predict/final`` brings every final
  item embedding (in token order); each client ranks with its own final row.
"""

from __future__ import annotations

import numpy as np
import torch

from fedgraphrec.crypto.tokens import TOKEN_BYTES
from fedgraphrec.privacy.noise_source import SecureNoise
from fedgraphrec.protocols.common import CLIENT, SERVER
from fedgraphrec.protocols.lpgcn.client_parts import StageParts
from fedgraphrec.protocols.lpgcn.holdings import token_order
from fedgraphrec.protocols.lpgcn.lookup import distinct, in_first_order, unique_pairs
from fedgraphrec.protocols.lpgcn.roles import BACKWARD, FINAL, FORWARD, LAYER0, item_phase, user_phase
from fedgraphrec.protocols.lpgcn.step import StepState
from fedgraphrec.protocols.optim import adam_step
from fedgraphrec.runtime.blobs import PackedBlobs
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part
from fedgraphrec.seeding import torch_generator

__all__ = ["TrainingStages"]


class TrainingStages(StageParts):
    """Layer-0, forward, backward, update and prediction stages of the client shard (module docstring)."""

    # ------------------------------------------------------------------ layer 0
    def stage_train_layer0(self, step: int, request: Message) -> Message:
        """Layer-0 rows up: convolution-items', users' sealed (Alg. 1 l. 3-6; Eq. 6 for LightGCN+)."""
        s, st = self.settings, self.state
        f = request.fields
        predict = self._cycle_fields(f)
        ss = st.step = StepState(cycle="predict" if predict else "train", predict=predict)
        if s.plus and int(request["W"].value.shape[0]) != st.n_columns:
            raise self.refuse(
                LAYER0, f"sync/W has {int(request['W'].value.shape[0])} rows for {st.n_columns} columns"
            )
        U0 = self.operator("F") @ torch.as_tensor(request["W"].value) if s.plus else st.user_emb
        ss.cur_u, ss.cur_conv = U0, st.item_emb
        if ss.predict:
            ss.acc_u = U0 * self._w
        else:
            self._take_batch(f)
            ss.u0 = U0.index_select(0, torch.from_numpy(ss.users))
            ss.acc_u = (U0 if self._whole_users() else ss.u0) * self._w
        self._record("user_layers", U0)
        self._record("conv_layers", st.item_emb)
        out = Message(
            self._conv_part(item_phase(self._prefix(), "embedding", 0), "item_embedding", st.item_emb)
        )
        if s.n_layers:
            out.parts.update(
                self._user_part(user_phase(self._prefix(), "embedding", 0), "user_embedding", U0)
            )
        elif not ss.predict:
            out.parts.update(self._negative_requests())
        return out

    def _cycle_fields(self, f: dict[str, object]) -> bool:
        """Whether layer 0 opens a prediction cycle; a training cycle's fields are the triples, no more."""
        predict = f.get("predict")
        if not isinstance(predict, bool | np.bool_):
            raise self.refuse(LAYER0, f"field 'predict' = {predict!r}; this node expects True or False")
        names = {"predict"} if predict else {"predict", "users", "pos", "neg", "batch_size"}
        if set(f) != names:
            cycle = "prediction" if predict else "training"
            raise self.refuse(LAYER0, f"fields {sorted(f)}; a {cycle} cycle has {sorted(names)}")
        return bool(predict)

    def _take_batch(self, f: dict[str, object]) -> None:
        """This node's triples (global user ids, item ids), the distinct rows they need, the requests."""
        ss = self.state.step
        assert self.data is not None, "training needs the node's data"
        m = int(self.data.train.shape[1])
        ss.b_user = self.position(np.asarray(f["users"], dtype=np.int64))
        ss.b_pos = np.asarray(f["pos"], dtype=np.int64)
        ss.b_neg = np.asarray(f["neg"], dtype=np.int64)
        for name, ids in (("pos", ss.b_pos), ("neg", ss.b_neg)):
            if len(ids) != len(ss.b_user) or (len(ids) and (ids.min() < 0 or ids.max() >= m)):
                raise self.refuse(LAYER0, f"field {name!r}: {len(ids)} item ids in [0, {m}) expected")
        ss.batch_size = int(f["batch_size"])  # type: ignore[call-overload]
        ss.users = distinct(ss.b_user, len(self.clients))
        ss.items = distinct(np.concatenate([ss.b_pos, ss.b_neg]), m)
        ss.item_local = self.local_position(ss.items)
        if (self.local_position(ss.b_pos) < 0).any():
            raise self.refuse(LAYER0, "a triple's positive item is held by no client of this node")
        # one request per (client, negative); ``req_of``: each triple's request
        rows, items, ss.req_of = unique_pairs(ss.b_user, ss.b_neg)
        ss.req_ptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=len(self.clients)))])
        ss.req_items = items
        ss.extra = in_first_order(items[self.local_position(items) < 0])

    def _negative_requests(self) -> dict[str, Part]:
        ss = self.state.step
        counts = np.diff(ss.req_ptr)
        who = np.flatnonzero(counts)
        flat = self.tokens_of(ss.req_items).tobytes()
        # the requesting clients' tokens are the whole buffer in order: no bytes object per client
        blobs = PackedBlobs(flat, np.append(ss.req_ptr[who] * TOKEN_BYTES, len(flat)))
        part = Part(
            "loss/negative-requests", "item_token", CLIENT, SERVER, blobs, shape="blobs",
            protection="pseudonymous", senders=self.clients[who],
        )  # fmt: skip
        return {"negatives": part}

    # ------------------------------------------------------------------ Algorithm 4
    def stage_train_forward(self, step: int, request: Message) -> Message:
        """Algorithm 4, layer k: Eq. 7 for every user, Eq. 8 for every convolution-item."""
        st, ss, L = self.state, self.state.step, self.settings.n_layers
        k = ss.layer = self.known_field(FORWARD, request.fields, "k", self.occurrence + 1)
        prev = self._local_table(ss.cur_conv, request)
        self._accumulate_items(prev, k - 1)
        conv_next = self._eq8(ss.cur_u, request, "A")  # Eq. 8, verified real holders
        if k == L and not ss.predict and not self._whole_users():
            # layer L's user rows go nowhere: the minibatch's users only (few of them: a large graph)
            ss.acc_u.add_(self.operator_rows("R", ss.users) @ prev, alpha=self._w)  # Eq. 7
            u_next = self.operator("R") @ prev if self.debug is not None else torch.zeros(0)
        else:
            u_next = self.operator("R") @ prev  # Eq. 7, real items only
            whole = ss.predict or self._whole_users()
            ss.acc_u.add_(
                u_next if whole else u_next.index_select(0, torch.from_numpy(ss.users)), alpha=self._w
            )
        ss.cur_u, ss.cur_conv = u_next, conv_next
        self._record("user_layers", u_next)
        self._record("conv_layers", conv_next)
        out = Message(
            self._conv_part(item_phase(self._prefix(), "embedding", k), "item_embedding", conv_next)
        )
        if k < L:
            out.parts.update(
                self._user_part(user_phase(self._prefix(), "embedding", k), "user_embedding", u_next)
            )
        elif not ss.predict:
            out.parts.update(self._negative_requests())
        del st
        return out

    def stage_train_backward(self, step: int, request: Message) -> Message:
        """Algorithm 6, layer k: user and convolution-item gradients; Adam at layer 0."""
        ss = self.state.step
        k = self.known_field(BACKWARD, request.fields, "k", self.settings.n_layers - 1 - self.occurrence)
        ss.back += 1
        g_items = self._local_table(ss.cur_conv, request)
        first = k == self.settings.n_layers - 1  # G^(L) = D^(L): non-zero on the minibatch's rows only
        nonzero = self._nonzero_items(g_items) if first else None
        g_u = self.product("R", g_items, nonzero)  # Eqs. 18, 21, 22, 25, 26
        g_v = self._eq8(ss.g_u, request, "A", ss.users if first else None)  # Eqs. 19, 20, 24, 27
        self._plus_direct_gradients(g_u, g_v)  # + D^(k): non-zero on batch rows only
        if k == 0:
            return self._finish(*self._plus_direct(g_u, g_v, ss.r_u, ss.r_v))
        ss.g_u, ss.cur_conv = g_u, g_v
        out = Message(self._conv_part(item_phase("", "gradient", k), "item_gradient", g_v))
        out.parts.update(self._user_part(user_phase("", "gradient", k), "user_gradient", g_u))
        return out

    def _finish(self, g_u: torch.Tensor, g_v: torch.Tensor) -> Message:
        """Layer-0 gradients: Adam on every owned row; LightGCN+ sends what W's gradient needs."""
        s, st, ss = self.settings, self.state, self.state.step
        self._record("user_grad", g_u)
        self._record("conv_grad", g_v)
        st.steps += 1
        if not s.plus:
            adam_step(st.user_emb, g_u, st.user_m, st.user_v, st.steps, s.lr)
        if len(st.conv_items):
            adam_step(st.item_emb, g_v, st.item_m, st.item_v, st.steps, s.lr)
        if not s.plus:
            st.step = StepState()
            return Message()
        if s.paper_literal:
            st.step = StepState()
            return Message({"w-grads": self._literal_w_gradients(g_u)})
        ss.g_u = g_u
        return Message(self._user_part("update/user-gradients", "user_gradient", g_u))

    def stage_train_update(self, step: int, request: Message) -> Message:
        r"""Eq. 29 at the convolution-clients: :math:`\nabla W_{\tilde i}`; Adam on their W rows."""
        s, st = self.settings, self.state
        grad = self._eq8(st.step.g_u, request, "AW")
        self._record("conv_w_grad", grad)
        if len(st.conv_items):
            adam_step(st.item_w, grad, st.w_m, st.w_v, st.steps, s.lr)
        st.step = StepState()
        return Message(self._conv_part("update/w-gradients", "item_gradient", grad))

    def _literal_w_gradients(self, g_u: torch.Tensor) -> Part:
        r"""Alg. 7 line 11 as printed: :math:`\nabla w_i` of every held item, random for virtual ones."""
        st = self.state
        rows = np.repeat(np.arange(len(self.clients)), np.diff(st.held_ptr))
        deg = np.diff(st.real_ptr).astype(np.float64)
        scale = torch.from_numpy(1.0 / np.sqrt(np.maximum(deg[rows], 1.0))).to(self.dtype).unsqueeze(1)
        grad = g_u[torch.from_numpy(rows)] * scale
        virtual = torch.from_numpy(np.flatnonzero(st.held_virtual))
        if len(virtual):
            spread = g_u[torch.from_numpy(rows[st.held_virtual])].std(dim=1, keepdim=True)
            shape = (len(virtual), self.dim)
            if self.settings.secure_virtual_items:  # cover: the seed must not tell it from real rows
                z = torch.from_numpy(SecureNoise().standard_normal(shape)).to(self.dtype)
            else:
                gen = torch_generator(
                    self.settings.seed, "lpgcn", "paper-literal-virtual-grad", st.steps, int(self.clients[0])
                )
                z = torch.randn(shape, generator=gen, dtype=self.dtype)
            grad[virtual] = z * spread
        body = torch.cat([grad, self._token_columns(st.held_idx)], dim=1)
        return Part(
            "update/w-gradients", "item_gradient", CLIENT, SERVER, body, counts=np.diff(st.held_ptr),
            senders=self.clients,
        )  # fmt: skip

    # ------------------------------------------------------------------ §4.6 prediction
    def stage_predict_final(self, step: int, request: Message) -> Message:
        """Every final item embedding, in token order; each client keeps its own final row."""
        st = self.state
        table = torch.as_tensor(request["final"].value)
        n_items = int(table.shape[0])
        if n_items != st.n_columns:
            raise self.refuse(FINAL, f"predict/item-embeddings has {n_items} rows for {st.n_columns} items")
        st.final_v = torch.empty_like(table)
        st.final_v[torch.from_numpy(token_order(self.tokens_of(np.arange(n_items))))] = table
        st.final_u = st.step.acc_u
        st.step = StepState()
        return Message()

    def prediction(self) -> tuple[np.ndarray, torch.Tensor, torch.Tensor | None]:
        """The shard's final user rows and the final item table (after the prediction stages)."""
        return self.clients, self.state.final_u, self.state.final_v

    def owned_rows(self) -> dict[str, tuple[np.ndarray, torch.Tensor]]:
        """Users' rows (LightGCN), convolution-items' V rows and (lossless LightGCN+) W rows."""
        st = self.state
        out = {"item_emb": (st.conv_items, st.item_emb)}
        if not self.settings.plus:
            out["user_emb"] = (self.clients, st.user_emb)
        elif not self.settings.paper_literal:
            out["item_w"] = (st.conv_items, st.item_w)
        return out
