r"""P-GCN's client program: a shard of users, each with its own items, on one node.

A user holds its items :math:`\mathcal I_u` and nothing of the model: it builds its layers from the
tables it downloads. By stage (:mod:`.roles`):

* set-up — its item indicator ``Y_u`` for the degrees' secure sum, then the degrees
  :math:`|\mathcal U_i|` (its weights :math:`c_{ui} = 1/\sqrt{|\mathcal I_u||\mathcal U_i|}`);
* forward, layer ``k`` — from ``W`` (``k = 0``) its :math:`U^{(0)}_u = \sum_{i\in\mathcal I_u}
  W_i/\sqrt{|\mathcal I_u|}` (Eq. 6), from :math:`V^{(k)}` its :math:`U^{(k+1)}_u = \sum_i c_{ui}
  V^{(k)}_i`; its secure-sum input is :math:`c_{ui} U^{(k)}_u` at row ``i`` for each of its items,
  so the sum over users is :math:`V^{(k+1)} = \hat R^\top U^{(k)}`;
* local — the users with triples: their loss on the combined layers, their star backward
  (:func:`.local.star_gradients`), their ``V``/``W`` gradient rows for the last secure sum;
* prediction — every user's combined :math:`U_u = \sum_l \alpha_l U^{(l)}_u`.

Simulation note: the minibatch's triples come with the ``train/local`` request (the training loop's
public sampler stands for each user's own); a driver's instruction, not a protocol message.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.models.propagation import pair_weights, torch_csr
from fedgraphrec.protocols.base import ClientProgram
from fedgraphrec.protocols.baselines.pgcn import expect as E
from fedgraphrec.protocols.baselines.pgcn import roles as R
from fedgraphrec.protocols.baselines.pgcn.local import star_gradients
from fedgraphrec.protocols.baselines.pgcn.settings import PGCNSettings
from fedgraphrec.protocols.common import ShardRows, local_bpr
from fedgraphrec.protocols.secagg.client import SecAggState
from fedgraphrec.protocols.secagg.expect import CheckedSecureSumClient, SumSite
from fedgraphrec.protocols.secagg.upload import SparseUpload
from fedgraphrec.runtime.expect import Expectation, StageFlow
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.state import empty_ids

__all__ = ["PGCNClient", "PGCNState"]


def _no_rows() -> torch.Tensor:
    return torch.zeros(0, 0, dtype=torch.float64)


@dataclass
class PGCNState:
    r"""What the node keeps for its users between messages.

    Attributes:
        deg_items: every item's degree :math:`|\\mathcal U_i|` (the set-up broadcast).
        layers: ``(L+1, n, d)`` the users' layers of the current forward (zero rows: not built).
        item0 / item_sum: the downloaded :math:`V^{(0)}` and :math:`\\sum_l \alpha_l V^{(l)}` so
            far (the node's copy; its users score their triples on them).
        final: ``(n, d)`` the users' combined embeddings after the prediction stage.
        forward: the secure-sum session the layers belong to (``""``: none).
        step: the minibatch the pending upload belongs to.
        up_users / up_pos / up_start / up_rows: the pending gradient upload: participants (global
            ids) and per row its participant position, start index and values (float64).
        secagg: the open secure-aggregation session.
        pending: what the last stage leaves to do (the secure sum that may come next, :mod:`.expect`):
            ``degrees``, ``train`` / ``predict`` (a forward), ``gradients``, ``evaluate`` or ``""``.
        layers_done / received: forward stages run in the current forward, and how many of them
            brought the item table (a node whose users have no triples misses the last one).
    """

    deg_items: np.ndarray
    layers: torch.Tensor
    item0: torch.Tensor
    item_sum: torch.Tensor
    final: torch.Tensor
    forward: str = ""
    step: int = -1
    up_users: np.ndarray = field(default_factory=empty_ids)
    up_pos: np.ndarray = field(default_factory=empty_ids)
    up_start: np.ndarray = field(default_factory=empty_ids)
    up_rows: torch.Tensor = field(default_factory=_no_rows)
    secagg: SecAggState = field(default_factory=SecAggState)
    pending: str = ""
    layers_done: int = 0
    received: int = 0


class PGCNClient(CheckedSecureSumClient, ClientProgram[PGCNState]):
    """P-GCN's users hosted by one node (module docstring)."""

    settings: PGCNSettings

    def init_state(self) -> None:
        """The shard's binary rows, their degrees and FISM operator, and empty layer tables."""
        data = self.node_data("a P-GCN node needs its users' interactions")
        rows = ShardRows.of(data.train, self.clients)
        self.train, self.n_items, self.deg_u = rows.train, rows.n_items, rows.deg_u
        self.edge_user = np.repeat(np.arange(len(self.clients)), self.deg_u)  # each edge's user position
        self.inv_sqrt_deg = torch.from_numpy(1.0 / np.sqrt(np.maximum(self.deg_u, 1)))
        item0 = data.tables["item_emb"]
        self.dtype = item0.dtype
        n, d, L = len(self.clients), int(item0.shape[1]), self.settings.n_layers
        fism = sp.csr_matrix(
            (1.0 / np.sqrt(self.deg_u[self.edge_user]), self.train.indices, self.train.indptr),
            shape=self.train.shape,
        )
        self.fism = torch_csr(fism, self.dtype)  # Eq. 6 for the shard's users
        zeros = torch.zeros((self.n_items, d), dtype=self.dtype)
        self.state = PGCNState(
            deg_items=empty_ids(),
            layers=torch.zeros((L + 1, n, d), dtype=self.dtype),
            item0=zeros.clone(),
            item_sum=zeros.clone(),
            final=torch.zeros((n, d), dtype=self.dtype),
        )
        self._graph: tuple[bytes, torch.Tensor, torch.Tensor] | None = None

    # ------------------------------------------------------------------ what the node accepts
    def stage_flow(self) -> StageFlow:
        """The node's stage order (:func:`.expect.stage_flow`)."""
        return E.stage_flow(self.settings.n_layers)

    def expect(self, stage: str) -> Expectation:
        """The parts the node expects in ``stage`` (:func:`.expect.expectation`, secure sums' own)."""
        if stage.startswith("secagg/"):
            return self.secagg_expect(stage)
        has_users = bool(len(self._active()))
        E.check_stage(
            stage, None, self.occurrence, self.state, self.settings.n_layers, self.n_items, has_users
        )
        return E.expectation(stage, self.occurrence, self.settings.n_layers, self.state.item0)

    def secagg_site(self, stage: str, step: int | None = None) -> SumSite:
        """The secure sum this node expects now (:func:`.expect.sum_site`)."""
        return E.sum_site(stage, step, self.occurrence, self.state, self.settings.n_layers, self)

    def _check(self, stage: str, step: int) -> None:
        E.check_stage(stage, step, self.occurrence, self.state, self.settings.n_layers, self.n_items, True)

    # ------------------------------------------------------------------ local graph
    def _norm(self) -> tuple[torch.Tensor, torch.Tensor]:
        r"""The shard's rows of :math:`\hat R` and its edge weights :math:`c_{ui}` (float64, CSR order)."""
        key = self.state.deg_items.tobytes()
        if self._graph is None or self._graph[0] != key:
            values = pair_weights(self.deg_u[self.edge_user], self.state.deg_items[self.train.indices])
            csr = sp.csr_matrix((values, self.train.indices, self.train.indptr), shape=self.train.shape)
            self._graph = (key, torch_csr(csr, self.dtype), torch.from_numpy(values))
        return self._graph[1], self._graph[2]

    def _active(self) -> np.ndarray:
        return np.flatnonzero(self.deg_u > 0)

    def _receive(self, request: Message, k: int) -> None:
        """``W`` (Eq. 6) and :math:`V^{(k)}` (the next layer) for the users the server sent them to."""
        st, a = self.state, self.settings.alpha
        if R.P_W in request:
            part = request[R.P_W]
            rows = torch.from_numpy(self.positions(np.asarray(part.receivers)))
            st.layers[0, rows] = (self.fism @ torch.as_tensor(part.value).to(self.dtype))[rows]
        if R.P_ITEMS in request:
            part = request[R.P_ITEMS]
            V = torch.as_tensor(part.value).to(self.dtype)
            if k == 0:
                st.item0, st.item_sum = V.clone(), V * a
            else:
                st.item_sum.add_(V, alpha=a)
            if k < self.settings.n_layers:
                rows = torch.from_numpy(self.positions(np.asarray(part.receivers)))
                Rn, _ = self._norm()
                st.layers[k + 1, rows] = (Rn @ V)[rows]

    # ------------------------------------------------------------------ set-up
    def stage_setup_enroll(self, step: int, request: Message) -> Message:
        """The users with training items (every forward sums over them)."""
        self.state.pending = E.DEGREES if len(self._active()) else ""
        return Message(fields={R.F_ACTIVE: self.clients[self._active()].tolist()})

    def stage_setup_degrees(self, step: int, request: Message) -> Message:
        r"""Keep :math:`|\mathcal U_i|` (the broadcast result of the degrees' secure sum)."""
        self._check(R.ST_DEGREES, step)
        self.state.deg_items = E.check_degrees(request[R.P_DEGREES].value, self.n_items)
        self.state.pending = ""
        return Message()

    # ------------------------------------------------------------------ forward
    def stage_train_forward(self, step: int, request: Message) -> Message:
        """Layer ``k`` (the node's own count): the users' next layer from the downloaded tables."""
        return self._forward(R.ST_FORWARD, step, request)

    def stage_predict_forward(self, step: int, request: Message) -> Message:
        """Layer ``k`` of a prediction's forward (every user)."""
        return self._forward(R.ST_PREDICT_FORWARD, step, request)

    def _forward(self, stage: str, step: int, request: Message) -> Message:
        k, st = self.occurrence, self.state
        self._check(stage, step)
        label = E.check_layer_fields(stage, step, k, request.fields)
        if k == 0:
            st.layers.zero_()
            st.received = 0
        st.forward, st.pending, st.layers_done = label, label.split("/")[1], k + 1
        st.received += int(R.P_ITEMS in request)
        self._receive(request, k)
        return Message()

    # ------------------------------------------------------------------ local step
    def stage_train_local(self, step: int, request: Message) -> Message:
        """The participants' loss on the combined layers and their star backward."""
        f, st, s = request.fields, self.state, self.settings
        L = s.n_layers
        self._check(R.ST_LOCAL, step)
        if L == 0:
            st.layers.zero_()
        self._receive(request, L)
        users = np.asarray(f[R.F_USERS], dtype=np.int64)
        pos = torch.as_tensor(np.asarray(f[R.F_POS], dtype=np.int64))
        neg = torch.as_tensor(np.asarray(f[R.F_NEG], dtype=np.int64))
        batch = int(f[R.F_BATCH])
        mine = self.positions(users)
        U = self._combined()
        whole = None if len(users) == batch else batch
        local = local_bpr(
            U, st.item_sum, st.layers[0], st.item0, torch.from_numpy(mine), pos, neg, s.reg, whole
        )
        _, c = self._norm()
        up = star_gradients(
            local, mine, self.train.indptr, self.train.indices, c, self.inv_sqrt_deg,
            n_layers=L, n_items=self.n_items,
        )  # fmt: skip
        st.step, st.up_users = step, self.clients[up.participants]
        st.up_pos, st.up_start, st.up_rows = up.pos, up.start, up.rows
        st.pending = E.GRADIENTS
        return Message(fields={R.F_BPR: local.bpr.item(), R.F_REG: local.reg.item()})

    def _combined(self) -> torch.Tensor:
        r""":math:`\\sum_l \alpha_l U^{(l)}` of every shard user (as LightGCN's propagation adds them)."""
        layers, a = self.state.layers, self.settings.alpha
        out = layers[0] * a
        for k in range(1, len(layers)):
            out.add_(layers[k], alpha=a)
        return out

    # ------------------------------------------------------------------ secure sums
    def secagg_input(self, session: str) -> SparseUpload:
        """``Y_u`` (degrees), :math:`c_{ui} U^{(k)}_u` (forward layer ``k``) or the gradient rows."""
        st = self.state
        active = self._active()
        items = torch.from_numpy(self.train.indices.astype(np.int64))
        seg = torch.from_numpy(np.searchsorted(active, self.edge_user))
        if session == R.session("setup", "degrees"):
            up = SparseUpload(self.clients[active], self.n_items)
            up.add(seg, items, torch.ones(len(items), 1, dtype=torch.float64))
            return up
        head, _, k = session.rpartition("/layer/")
        if head and head == st.forward:
            d = int(st.layers.shape[2])
            _, c = self._norm()
            up = SparseUpload(self.clients[active], self.n_items * d)
            values = c[:, None] * st.layers[int(k)][torch.from_numpy(self.edge_user)].double()
            up.add(seg, items * d, values)
            return up
        if session != R.session("step", st.step):
            raise ValueError(f"no secure-aggregation input for session {session!r} on this node")
        up = SparseUpload(st.up_users, 2 * self.n_items * int(st.layers.shape[2]))
        up.add(torch.from_numpy(st.up_pos), torch.from_numpy(st.up_start), st.up_rows)
        return up

    # ------------------------------------------------------------------ prediction
    def stage_predict(self, step: int, request: Message) -> Message:
        """Every user's combined embedding (with ``L = 0`` from the downloaded ``W``)."""
        self._check(R.ST_PREDICT, step)
        if self.settings.n_layers == 0:
            self.state.layers.zero_()
            self._receive(request, 0)
        self.state.final = self._combined()
        self.state.pending = E.EVALUATE
        return Message()

    def prediction(self) -> tuple[np.ndarray, torch.Tensor, torch.Tensor | None]:
        """The users' combined embeddings (the server holds the combined item table)."""
        return self.clients, self.state.final.clone(), None
