"""FedMF's client program: a node's users keep their rows, train on their triples, upload item gradients.

Per minibatch (stage ``train/local``), for the node's users that have triples in it: compute their
part of the BPR loss on the downloaded item table (:func:`~fedgraphrec.protocols.common.local_bpr`,
means over the whole minibatch so shards add up), update their own rows with Adam (every row of the
shard steps, as the centralized Adam does), and keep each user's item gradients — summed per item,
so a user lists an item once — for its side of the secure sum
(:class:`~fedgraphrec.protocols.secagg.client.SecureSumClient`).

Simulation note: the minibatch's triples come with the request (the training loop's public sampler
stands for each user's own sampler); they are a driver's instruction, not a protocol message, and
are not booked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from fedgraphrec.protocols.base import ClientProgram
from fedgraphrec.protocols.baselines.fedmf.roles import session
from fedgraphrec.protocols.baselines.fedmf.settings import FedMFSettings
from fedgraphrec.protocols.common import local_bpr
from fedgraphrec.protocols.optim import LocalOptimizer
from fedgraphrec.protocols.secagg import SecAggState, SecureSumClient, SparseUpload
from fedgraphrec.runtime.message import Message

__all__ = ["FedMFClient", "FedMFState"]


def _empty() -> np.ndarray:
    return np.zeros(0, dtype=np.int64)


@dataclass
class FedMFState:
    """The node's users' rows and Adam moments, and the pending upload of the current minibatch.

    Attributes:
        user: ``(n, d)`` the users' embeddings.
        m / v / t: Adam's moments and step count over those rows.
        step: the minibatch the pending upload belongs to.
        up_users / up_pos / up_items / up_rows: the pending item gradients: participants (global
            ids), and per row its participant position, item and gradient (float64).
        secagg: the open secure-aggregation session.
    """

    user: torch.Tensor
    m: torch.Tensor
    v: torch.Tensor
    t: int = 0
    step: int = -1
    up_users: np.ndarray = field(default_factory=_empty)
    up_pos: np.ndarray = field(default_factory=_empty)
    up_items: np.ndarray = field(default_factory=_empty)
    up_rows: torch.Tensor = field(default_factory=lambda: torch.zeros(0, 0, dtype=torch.float64))
    secagg: SecAggState = field(default_factory=SecAggState)


class FedMFClient(SecureSumClient, ClientProgram[FedMFState]):
    """FedMF's users hosted by one node (module docstring)."""

    settings: FedMFSettings

    def init_state(self) -> None:
        """The shard's users' initial rows and their Adam state."""
        self.n_items = int(self.node_data("a FedMF node needs its users' initial rows").train.shape[1])
        user = self.initial_rows("user_emb")
        self.state = FedMFState(user=user, m=torch.zeros_like(user), v=torch.zeros_like(user))

    def stage_train_local(self, step: int, request: Message) -> Message:
        """Local BPR of this node's triples; Adam on the users' rows; keep the item gradients."""
        f, st = request.fields, self.state
        users = torch.as_tensor(np.asarray(f["users"], dtype=np.int64))
        pos = torch.as_tensor(np.asarray(f["pos"], dtype=np.int64))
        neg = torch.as_tensor(np.asarray(f["neg"], dtype=np.int64))
        batch = int(f["batch"])
        mine = torch.from_numpy(np.searchsorted(self.clients, users.numpy()))
        N = self.n_items
        if "items" in request:
            items = torch.as_tensor(request["items"].value)
        else:  # no user of this node is in the minibatch: nothing downloaded, nothing computed
            items = torch.zeros((N, st.user.shape[1]), dtype=st.user.dtype)
        whole = None if len(users) == batch else batch
        local = local_bpr(st.user, items, st.user, items, mine, pos, neg, self.settings.reg, whole)
        opt = LocalOptimizer(st.user, self.settings.lr, m=st.m, v=st.v, t=st.t)
        opt.step(local.dU + local.rU)  # every row steps, as the centralized Adam does
        st.t = opt.t
        participants = np.unique(users.numpy())
        keys = np.searchsorted(participants, self.clients[local.item_senders]) * N + local.items.numpy()
        uniq, inverse = np.unique(keys, return_inverse=True)
        rows = torch.zeros((len(uniq), st.user.shape[1]), dtype=torch.float64)
        rows.index_add_(0, torch.from_numpy(inverse), (local.d_rows + local.r_rows).double())
        st.step, st.up_users, st.up_pos, st.up_items, st.up_rows = (
            step,
            participants,
            uniq // N,
            uniq % N,
            rows,
        )
        bpr = local.bpr.item() if len(users) else 0.0
        reg = local.reg.item() if len(users) else 0.0
        return Message(fields={"bpr": bpr, "reg": reg})

    def secagg_input(self, label: str) -> SparseUpload:
        """The participants' dense item-gradient vectors (``N × d``, sparse rows)."""
        st = self.state
        if label != session(st.step):
            raise ValueError(f"no secure-aggregation input for session {label!r} on this node")
        d = int(st.user.shape[1])
        up = SparseUpload(st.up_users, self.n_items * d)
        up.add(torch.from_numpy(st.up_pos), torch.from_numpy(st.up_items) * d, st.up_rows)
        return up

    def prediction(self) -> tuple[np.ndarray, torch.Tensor, torch.Tensor | None]:
        """The users' rows (a user scores the item table it downloads)."""
        return self.clients, self.state.user.clone(), None

    def owned_rows(self) -> dict[str, tuple[np.ndarray, torch.Tensor]]:
        """The users' rows, under the centralized BPR-MF's name."""
        return {"user_emb": (self.clients, self.state.user)}
