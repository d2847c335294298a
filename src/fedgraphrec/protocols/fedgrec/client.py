"""FedGRec's client program: a shard of users on one node (their rows, their training, their uploads).

Each user keeps its interactions ``N_u``, its base embedding ``e_u^0`` and its stored latents
``e_u^k``; the node computes for all of its users at once. What it does, by stage:

* warm-up — Eq. 9's input ``Y_u`` (its items), then per order ``k``: Eq. 6 (``e_u^k`` from the
  downloaded ``E^{k-1}``) and Eq. 7's input ``D_u Y_uᵀ (e_u^{k-1})ᵀ``;
* a round — Step 1: the round's draws for its sampled users (:func:`.sampling.draw_round`) and
  their queries; Steps 2–3: :func:`.local.local_round` on the downloaded rows; Step 4: its side of
  the secure sum (:class:`~fedgraphrec.protocols.secagg.client.SecureSumClient`), committing the
  users' new rows once their upload is in the sum (Algorithm 1 line 23);
* evaluation — every user's representation ``ē_u`` (latents refreshed by Eq. 6, or as stored).

Simulation note [D]: the round's negatives and local pairs come from one public stream over all
sampled users (as the one-process simulation always drew them), so a node replays it for every
sampled user, which needs their training degrees ``|N_u|``; the node reads them from the dataset
it was handed (the server learns them anyway from the queries' sizes). A deployment would draw
from per-user streams instead, with different numbers.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto.secagg.wire import ID_BYTES
from fedgraphrec.models.propagation import pair_weights, torch_csr
from fedgraphrec.protocols.base import ClientProgram
from fedgraphrec.protocols.common import ShardRows
from fedgraphrec.protocols.fedgrec import expect as accepts
from fedgraphrec.protocols.fedgrec.local import local_round
from fedgraphrec.protocols.fedgrec.roles import QUERY, session
from fedgraphrec.protocols.fedgrec.sampling import draw_round
from fedgraphrec.protocols.fedgrec.settings import FedGRecSettings
from fedgraphrec.protocols.fedgrec.state import FedGRecState
from fedgraphrec.protocols.secagg.expect import CheckedSecureSumClient, SumSite
from fedgraphrec.protocols.secagg.upload import SparseUpload
from fedgraphrec.runtime.expect import Expectation, StageFlow
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part

__all__ = ["FedGRecClient"]


class FedGRecClient(CheckedSecureSumClient, ClientProgram[FedGRecState]):
    """FedGRec's users hosted by one node (module docstring)."""

    settings: FedGRecSettings

    def init_state(self) -> None:
        """The shard's binary rows and degrees, and its users' rows ``e_u^0`` (latents still zero)."""
        data = self.node_data("a FedGRec node needs its users' interactions and initial rows")
        rows = ShardRows.of(data.train, self.clients)
        self.train, self.n_items, self.deg_u = rows.train, rows.n_items, rows.deg_u
        self.degrees = np.diff(rows.full.indptr).astype(np.int64)  # replaying the round streams (module note)
        self.device = torch.device(self.settings.device)
        user0 = self.initial_rows("user_emb")
        user = torch.zeros((self.settings.K + 1, *user0.shape), dtype=user0.dtype, device=self.device)
        user[0] = user0
        self.state = FedGRecState(user=user)
        self._graph: tuple[bytes, torch.Tensor, torch.Tensor] | None = None

    # ------------------------------------------------------------------ what the node accepts (.expect)
    def stage_flow(self) -> StageFlow:
        """The node's stage order (:func:`.expect.stage_flow`)."""
        return accepts.stage_flow(self)

    def expect(self, stage: str) -> Expectation:
        """The parts the node expects in ``stage`` (:func:`.expect.expectation`)."""
        return accepts.expectation(self, stage)

    def secagg_site(self, stage: str, step: int | None = None) -> SumSite:
        """The secure sum the node expects now (:func:`.expect.site`)."""
        return accepts.site(self, stage, step)

    def handle(self, stage: str, step: int, request: Message) -> Message:
        """Check the fields the node knows (:func:`.expect.check_request`), then answer."""
        accepts.check_request(self, stage, step, request)
        return super().handle(stage, step, request)

    # ------------------------------------------------------------------ local graph
    def _t(self, array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(array)).to(self.device)

    def _norm(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``R`` of this node's users (values ``1/sqrt(|N_t||N_u|)``) and those values per edge (float64)."""
        key = self.state.deg_t.tobytes()
        if self._graph is None or self._graph[0] != key:
            rows = np.repeat(np.arange(len(self.clients)), self.deg_u)
            values = pair_weights(self.deg_u[rows], self.state.deg_t[self.train.indices])
            csr = sp.csr_matrix((values, self.train.indices, self.train.indptr), shape=self.train.shape)
            R = torch_csr(csr, self.state.user.dtype).to(self.device)
            self._graph = (key, R, self._t(values))
        return self._graph[1], self._graph[2]

    def _active(self) -> np.ndarray:
        return np.flatnonzero(self.deg_u > 0)

    def _at(self, users: np.ndarray) -> np.ndarray:
        """Positions of ``users`` (global ids) in this node's shard."""
        return np.searchsorted(self.clients, users)

    # ------------------------------------------------------------------ set-up and warm-up
    def stage_setup_enroll(self, step: int, request: Message) -> Message:
        """The users with training items (the population the server samples from)."""
        return Message(fields={"active": self.clients[self._active()].tolist()})

    def stage_warmup_degrees(self, step: int, request: Message) -> Message:
        """Keep ``|N_t|`` (the broadcast result of Eq. 9)."""
        self.state.deg_t = np.asarray(request["degrees"].value, dtype=np.int64)
        return Message()

    def stage_warmup_download(self, step: int, request: Message) -> Message:
        """Eq. 6: ``e_u^k = Σ_{t∈N_u} e_t^{k-1} / sqrt(|N_t||N_u|)`` from the downloaded ``E^{k-1}``."""
        k = int(request.fields["k"])
        R, _ = self._norm()
        self.state.user[k] = R @ torch.as_tensor(request["items"].value).to(self.device)
        return Message()

    # ------------------------------------------------------------------ Algorithm 1, Steps 1–3
    def stage_train_query(self, step: int, request: Message) -> Message:
        """Step 1: the round's draws for this node's sampled users; their queries, each sorted by item id."""
        s = self.settings
        own = np.asarray(request.fields["clients"], dtype=np.int64)
        sampled = np.asarray(request.fields["sampled"], dtype=np.int64)
        train = self.train
        at = self._at

        def positives(u: int) -> np.ndarray:
            i = int(at(np.array([u]))[0])
            return train.indices[train.indptr[i] : train.indptr[i + 1]].astype(np.int64)

        rs = draw_round(
            sampled, self.degrees[sampled], positives, own, self.n_items, int(request.fields["round"]), s,
            secure=s.secure_negatives,
        )  # fmt: skip
        self.state.sample, self.state.pending = rs, None
        self.state.round = int(request.fields["round"])
        q_seg, q_items = rs.queries()
        # each user's items in increasing id order: the query says which items, never which are
        # positives (kept in the round's own order, positives first, it would hand the server N_u)
        items = q_items[np.lexsort((q_items, q_seg))]
        n_query = rs.n_queried
        part = Part(QUERY, "item-ids", "client", "server", items, senders=rs.clients, counts=n_query)
        return Message({"query": part.with_sizes(n_query * ID_BYTES)})

    def stage_train_download(self, step: int, request: Message) -> Message:
        """Steps 2–3 for this node's sampled users on the downloaded rows; reports the local losses."""
        rs = self.state.sample
        if rs is None:
            raise ValueError("train/download before train/query")
        rows = torch.as_tensor(request["rows"].value).to(self.device)
        row_of = None
        if not request.fields["full"]:
            union = np.unique(rs.queries()[1])
            row_of = np.full(self.n_items, -1, dtype=np.int64)
            row_of[union] = np.arange(len(union))
        at = self._at(rs.clients)
        user = self.state.user[:, self._t(at)]
        pending, bpr, reg = local_round(
            self.settings, rs, rows, row_of, user, self.state.deg_t, self.deg_u[at], self.n_items
        )
        self.state.pending = pending
        return Message(fields={"bpr": bpr, "reg": reg})

    # ------------------------------------------------------------------ secure sums (Eq. 9, Eq. 7, Step 4)
    def secagg_input(self, label: str) -> SparseUpload:
        """``Y_u`` (Eq. 9), Eq. 7's contribution, or Step 4's upload, by session."""
        active = self._active()
        rows = np.repeat(np.arange(len(self.clients)), self.deg_u)  # every edge's user position
        items = self._t(self.train.indices.astype(np.int64))
        if label == session("warmup/degrees"):
            up = SparseUpload(self.clients[active], self.n_items)
            ones = torch.ones(len(rows), 1, device=self.device)
            up.add(self._t(np.searchsorted(active, rows)), items, ones)
            return up
        what, _, index = label.rpartition("/")
        if what == session("warmup"):
            k, d = int(index), self.state.user.shape[2]
            _, norm = self._norm()
            up = SparseUpload(self.clients[active], self.n_items * d)
            values = norm[:, None] * self.state.user[k - 1][self._t(rows)].double()  # Eq. 7, row t of Ẽ_u
            up.add(self._t(np.searchsorted(active, rows)), items * d, values)
            return up
        rs, pending = self.state.sample, self.state.pending
        if what != session("round") or rs is None or pending is None or index != str(self.state.round):
            raise ValueError(f"no secure-aggregation input for session {label!r} on this node")
        return pending.upload(rs.clients, self.n_items, self.settings.item_agg == "mean_touched")

    def secagg_offline(self, label: str, when: Literal["before", "after"]) -> np.ndarray:
        """The round's simulated dropouts among this node's users (none in the warm-up)."""
        rs = self.state.sample
        if rs is None or not label.startswith(session("round", None) + "/"):
            return np.zeros(0, dtype=np.int64)
        return rs.drop_before if when == "before" else rs.drop_after

    def secagg_included(self, label: str, included: np.ndarray) -> None:
        """Line 23: users whose upload is in the sum commit their new ``e_u^0`` and latents."""
        rs, pending = self.state.sample, self.state.pending
        if rs is None or pending is None or not label.startswith(session("round", None) + "/"):
            return
        keep = np.isin(rs.clients, included)
        new = pending.user[:, self._t(np.flatnonzero(keep))]
        self.state.user[:, self._t(self._at(rs.clients[keep]))] = new
        self.state.pending = None  # summed once: a second sum of the same upload would give it away

    # ------------------------------------------------------------------ evaluation
    def stage_predict(self, step: int, request: Message) -> Message:
        """``ē_u`` of every user: stored base, latents refreshed by Eq. 6 (or as stored), combined."""
        s, U = self.settings, self.state.user
        if s.eval_latents == "stored" or not s.K:
            users = [U[k] for k in range(s.K + 1)]
        else:
            R, _ = self._norm()
            E = torch.as_tensor(request["items"].value).to(self.device)
            users = [U[0], *(R @ E[k - 1] for k in range(1, s.K + 1))]
        if s.aggregation == "concat":
            self.state.final = torch.cat(users, dim=1)
        else:
            a = s.layer_weights()
            self.state.final = sum(a[k] * users[k] for k in range(len(a)))
        return Message()

    def prediction(self) -> tuple[np.ndarray, torch.Tensor, torch.Tensor | None]:
        """This node's users and their representations (the server holds the item side)."""
        return self.clients, self.state.final, None

    def owned_rows(self) -> dict[str, tuple[np.ndarray, torch.Tensor]]:
        """The users' base embeddings ``e_u^0`` (the oracle's ``user_emb``)."""
        return {"user_emb": (self.clients, self.state.user[0])}
