"""P-GCN's server program: the tables ``V`` and ``W`` and their Adam; each minibatch is one federated step.

The server holds the two item tables of LightGCN+ and nothing of a user's: the item degrees and every
layer :math:`V^{(k)}` reach it only as secure sums over all users, the gradients as a secure sum over
the minibatch's users.

* :meth:`PGCNServer.setup` — enrolment, then the item degrees (a secure sum of every user's item
  indicator), broadcast once.
* :meth:`PGCNServer.train_step` — the forward (:meth:`~PGCNServer.forward`: per layer the whole
  table down, the next one as a secure sum), :math:`V^{(L)}` down to the minibatch's users, their
  star backward, the secure sum of their gradient rows, Adam on ``V`` and ``W``.
* :meth:`PGCNServer.predict` — the same forward with every user; the server combines the layers of
  the items, every user those of its own row.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch

from fedgraphrec.protocols.base import ServerProgram, StepStats
from fedgraphrec.protocols.baselines.pgcn import roles as R
from fedgraphrec.protocols.baselines.pgcn.settings import PGCNSettings
from fedgraphrec.protocols.secagg.policy import threshold_for
from fedgraphrec.protocols.secagg.server import SumResult, secure_sum
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part

__all__ = ["PGCNServer"]


class PGCNServer(ServerProgram):
    """P-GCN's server (module docstring; built as any :class:`~.base.ServerProgram`)."""

    settings: PGCNSettings

    def init_state(self) -> None:
        """``V`` and ``W`` (LightGCN+'s initial ``item_emb``, ``item_w``), their Adam, degrees, counters."""
        self.item = self.own_table("item_emb")
        self.item_w = self.own_table("item_w")
        self.optimizer = torch.optim.Adam([self.item, self.item_w], lr=self.settings.lr)
        self.active = np.zeros(0, dtype=np.int64)
        self.deg_items = np.zeros(self.n_items, dtype=np.int64)
        self.final_items: torch.Tensor | None = None
        self.step = 0
        self.predictions = 0

    # ------------------------------------------------------------------ helpers
    def _sum(self, phase: str, label: str, users: np.ndarray, length: int) -> SumResult:
        """The secure sum of ``users``' inputs (``t`` over them)."""
        s = self.settings
        return secure_sum(
            self.transport, phase=phase, session=label, participants=self.by_node(users), length=length,
            threshold=threshold_for(len(users), s.secagg_threshold), frac_bits=s.frac_bits,
        )  # fmt: skip

    def _table(self, phase: str, kind: str, value: torch.Tensor, users: np.ndarray) -> dict[int, Part]:
        """The whole ``value`` for each of ``users`` (one part per node; each copy booked in full)."""
        size = value.numel() * value.element_size()
        return {
            node: Part(phase, kind, R.SERVER, R.CLIENT, value, shape="broadcast", receivers=ids).with_sizes(
                np.full(len(ids), size, dtype=np.int64)
            )
            for node, ids in self.by_node(users).items()
        }

    # ------------------------------------------------------------------ set-up
    def setup(self) -> None:
        """Enrolment; the item degrees as a secure sum of the users' item indicators, broadcast."""
        self.transport.begin_step(0)
        replies = self.transport.round(R.ST_ENROLL, {n: Message() for n in self.nodes})
        got = [np.asarray(r.fields[R.F_ACTIVE], dtype=np.int64) for r in replies.values()]
        self.active = np.sort(np.concatenate(got or [np.zeros(0, np.int64)]))
        result = self._sum(R.PH_DEGREES, R.session("setup", "degrees"), self.active, self.n_items)
        self.deg_items = result.total.round().to(torch.int64).numpy()
        value = torch.from_numpy(self.deg_items.astype(np.int32))
        parts = self._table(R.PH_DEGREES, R.K_DEGREES, value, self.active)
        self.transport.round(R.ST_DEGREES, {n: Message({R.P_DEGREES: p}) for n, p in parts.items()})

    # ------------------------------------------------------------------ the forward
    def forward(self, prefix: str, label: str, final: np.ndarray) -> list[torch.Tensor]:
        r"""LightGCN+'s forward through the users: :math:`[V^{(0)}, \dots, V^{(L)}]`.

        Per layer ``k < L``: the whole :math:`V^{(k)}` (and at ``k = 0`` the whole ``W``) down to
        the users that need the next layer — every enrolled user up to layer ``L-1``, only
        ``final`` (the users that need their last layer) for layer ``L`` — then the secure sum of
        every enrolled user's :math:`c_{ui} U^{(k)}_u`, which is :math:`V^{(k+1)}`.
        """
        L, N = self.settings.n_layers, self.n_items
        d = int(self.item.shape[1])
        stage = R.ST_FORWARD if prefix == "train" else R.ST_PREDICT_FORWARD
        download, propagate = R.forward_phases(prefix)
        tables = [self.item.detach().clone()]
        for k in range(L):
            receivers = self.active if k + 1 < L else final
            requests = {
                n: Message(fields={R.F_LAYER: k, R.F_SESSION: label}) for n in self.by_node(self.active)
            }
            for node, part in self._table(download, R.K_ITEM_TABLE, tables[k], receivers).items():
                requests[node].add(R.P_ITEMS, part)
            if k == 0:
                for node, part in self._table(
                    download, R.K_W_TABLE, self.item_w.detach(), self.active
                ).items():
                    requests[node].add(R.P_W, part)
            self.transport.round(stage, requests)
            result = self._sum(propagate, f"{label}/layer/{k}", self.active, N * d)
            tables.append(result.total.view(N, d).to(self.item.dtype))
        return tables

    # ------------------------------------------------------------------ one minibatch
    def next_step(self) -> int:
        """Open the next protocol step and return it: every minibatch and prediction has its own.

        A node runs each stage at most as often per step as its flow says (:mod:`.expect`: ``L``
        forward layers, ``L + 1`` secure sums), and the sums' session labels name the step.
        """
        self.transport.begin_step(self.transport.net.step + 1)
        return self.transport.net.step

    def train_step(self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> StepStats:
        """Forward, the last layer to the minibatch's users, their star backward, secure sum, Adam."""
        step, L = self.next_step(), self.settings.n_layers
        u = users.numpy()
        participants = np.unique(u)
        tables = self.forward("train", R.session("train", step), participants)
        requests = {}
        for node, ids in self.by_node(participants).items():
            mine = np.isin(u, ids)
            fields = {R.F_USERS: u[mine].tolist(), R.F_POS: pos.numpy()[mine].tolist(),
                      R.F_NEG: neg.numpy()[mine].tolist(), R.F_BATCH: len(u)}  # fmt: skip
            requests[node] = Message(fields=fields)
        for node, part in self._table(R.PH_LOCAL_DOWNLOAD, R.K_ITEM_TABLE, tables[L], participants).items():
            requests[node].add(R.P_ITEMS, part)
        if L == 0:
            for node, part in self._table(
                R.PH_LOCAL_DOWNLOAD, R.K_W_TABLE, self.item_w.detach(), participants
            ).items():
                requests[node].add(R.P_W, part)
        replies = self.transport.round(R.ST_LOCAL, requests)
        N, d = self.item.shape
        result = self._sum(R.PH_GRADIENTS, R.session("step", step), participants, 2 * N * d)
        self.step += 1
        self.item.grad = result.total[: N * d].view(N, d).to(self.item.dtype)
        self.item_w.grad = result.total[N * d :].view(N, d).to(self.item.dtype)
        self.optimizer.step()
        bpr = sum(float(r.fields[R.F_BPR]) for r in replies.values())
        reg = sum(float(r.fields[R.F_REG]) for r in replies.values())
        return StepStats(loss=bpr + self.settings.reg * reg, bpr=bpr, reg=reg, clients=len(participants))

    # ------------------------------------------------------------------ prediction and state
    def predict(self) -> None:
        """The forward with every user; the server combines the item layers, each user its own."""
        label = R.session("predict", self.next_step())
        self.predictions += 1
        tables = self.forward("predict", label, self.active)
        a = self.settings.alpha
        final = tables[0] * a
        for V in tables[1:]:
            final.add_(V, alpha=a)
        self.final_items = final
        requests = {n: Message() for n in self.by_node(self.active)}
        if self.settings.n_layers == 0:
            for node, part in self._table(
                R.PH_PREDICT, R.K_W_TABLE, self.item_w.detach(), self.active
            ).items():
                requests[node].add(R.P_W, part)
        self.transport.round(R.ST_PREDICT, requests)

    def items_for_evaluation(self) -> torch.Tensor:
        r""":math:`\\sum_l \alpha_l V^{(l)}` of the last prediction."""
        if self.final_items is None:
            raise RuntimeError("pgcn: no prediction yet (call predict first)")
        return self.final_items

    def owned_rows(self) -> dict[str, tuple[np.ndarray, torch.Tensor]]:
        """``V`` and ``W``, under LightGCN+'s names."""
        ids = np.arange(self.n_items)
        return {"item_emb": (ids, self.item.detach()), "item_w": (ids, self.item_w.detach())}

    def state_dict(self) -> dict[str, Any]:
        """The tables, their Adam state and the step counters."""
        return {
            "item": self.item.detach().clone(),
            "item_w": self.item_w.detach().clone(),
            "optimizer": copy.deepcopy(self.optimizer.state_dict()),  # not the live moments
            "step": self.step,
            "predictions": self.predictions,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        with torch.no_grad():
            self.item.copy_(state["item"])
            self.item_w.copy_(state["item_w"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.step, self.predictions = int(state["step"]), int(state["predictions"])
