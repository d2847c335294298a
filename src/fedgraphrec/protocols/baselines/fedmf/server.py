"""FedMF's server program: the item table and its Adam; each minibatch is one federated step.

1. every user with a triple in the minibatch downloads the **whole** item table (so the server does
   not learn which items it needs);
2. each node's users compute their part of the BPR loss, update their own rows, and upload their
   item gradients as **dense** ``N × d`` vectors under secure aggregation
   (:func:`~fedgraphrec.protocols.secagg.server.secure_sum`);
3. the server receives only the sum and applies Adam to the item table.

Training is then exactly centralized BPR-MF (up to the fixed-point resolution of the secure sum):
Adam is elementwise, so the users' Adams on their own rows and the server's on the items are one
Adam over the stacked tables.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from fedgraphrec.protocols.base import ServerProgram, StepStats
from fedgraphrec.protocols.baselines.fedmf.roles import DOWNLOAD, GRADIENTS, LOCAL, session
from fedgraphrec.protocols.baselines.fedmf.settings import FedMFSettings
from fedgraphrec.protocols.optim import LocalOptimizer
from fedgraphrec.protocols.secagg.policy import threshold_for
from fedgraphrec.protocols.secagg.server import secure_sum
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part

__all__ = ["FedMFServer"]


class FedMFServer(ServerProgram):
    """FedMF's server (module docstring; built as any :class:`~.base.ServerProgram`)."""

    settings: FedMFSettings

    def init_state(self) -> None:
        """The item table (from ``item_emb``, public: the run's ``init`` stream) and its Adam state."""
        self.item = self.own_table("item_emb")
        self.m, self.v, self.t = torch.zeros_like(self.item), torch.zeros_like(self.item), 0
        self.step = 0

    def setup(self) -> None:
        """Nothing to agree: secure aggregation draws fresh keys per minibatch."""

    def train_step(self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> StepStats:
        """One minibatch: whole-table download, local BPR, secure sum of item gradients, Adam."""
        step, (N, d) = self.step, self.item.shape
        self.transport.begin_step(step)
        u = users.numpy()
        participants: dict[int, np.ndarray] = {}
        requests = {}
        for node, hosted in self.shards.items():
            mine = np.isin(u, hosted)
            ids = np.unique(u[mine])
            fields = {"users": u[mine].tolist(), "pos": pos.numpy()[mine].tolist(),
                      "neg": neg.numpy()[mine].tolist(), "batch": len(u)}  # fmt: skip
            request = Message(fields=fields)
            if len(ids):
                participants[node] = ids
                size = np.full(len(ids), N * d * self.item.element_size(), dtype=np.int64)
                table = Part(DOWNLOAD, "item-table", "server", "client", self.item, shape="broadcast",
                             receivers=ids).with_sizes(size)  # fmt: skip
                request.add("items", table)
            requests[node] = request  # every node: its users' Adam steps every minibatch
        replies = self.transport.round(LOCAL, requests)
        n_users = sum(len(ids) for ids in participants.values())
        result = secure_sum(
            self.transport, phase=GRADIENTS, session=session(step), participants=participants,
            length=N * d, threshold=threshold_for(n_users, self.settings.secagg_threshold),
            frac_bits=self.settings.frac_bits,
        )  # fmt: skip
        self.step += 1
        opt = LocalOptimizer(self.item, self.settings.lr, m=self.m, v=self.v, t=self.t)
        opt.step(result.total.view(N, d).to(self.item.dtype))
        self.t = opt.t
        bpr = sum(float(r.fields["bpr"]) for r in replies.values())
        reg = sum(float(r.fields["reg"]) for r in replies.values())
        return StepStats(loss=bpr + self.settings.reg * reg, bpr=bpr, reg=reg, clients=n_users)

    def items_for_evaluation(self) -> torch.Tensor:
        """The item table (a user scores what it downloads)."""
        return self.item.clone()

    def owned_rows(self) -> dict[str, tuple[np.ndarray, torch.Tensor]]:
        """The item table, under the centralized BPR-MF's name."""
        return {"item_emb": (np.arange(self.n_items), self.item)}

    def state_dict(self) -> dict[str, Any]:
        """Item table, its Adam state and the step counter."""
        return {
            "item": self.item.clone(),
            "m": self.m.clone(),
            "v": self.v.clone(),
            "t": self.t,
            "step": self.step,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.item.copy_(state["item"])
        self.m.copy_(state["m"])
        self.v.copy_(state["v"])
        self.t, self.step = int(state["t"]), int(state["step"])
