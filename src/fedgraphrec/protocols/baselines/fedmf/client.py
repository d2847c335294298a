"""FedMF's client program: a node's users keep their rows, train on their triples, upload item gradients.

Per minibatch (stage ``train/local``), for the node's users that have triples in it: compute their
part of the BPR loss on the downloaded item table (:func:`~fedgraphrec.protocols.common.local_bpr`,
means over the whole minibatch so shards add up), update their own rows with Adam (every row of the
shard steps, as the centralized Adam does), and keep each user's item gradients — summed per item,
so a user lists an item once — for its side of the secure sum
(:class:`~fedgraphrec.protocols.secagg.client.SecureSumClient`).

Simulation note: the minibatch's triples come with the request (the training loop's public sampler
stands for each user's own sampler); they are a driver's instruction, not a protocol message, and
are not booked. The node still checks them against what it knows (its own users, the catalogue),
and every part against its own expectation (:data:`.roles.FLOW`, :meth:`FedMFClient.expect`): the
item table in the run's dtype and width, present exactly when some of its users train; the secure
sum under this minibatch's session, of exactly the users that trained.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.protocols.base import EVALUATE_ITEMS, ClientProgram
from fedgraphrec.protocols.baselines.fedmf.roles import DOWNLOAD, EVALUATE, FLOW, GRADIENTS, LOCAL, session
from fedgraphrec.protocols.baselines.fedmf.settings import FedMFSettings
from fedgraphrec.protocols.common import local_bpr
from fedgraphrec.protocols.optim import LocalOptimizer
from fedgraphrec.protocols.secagg.client import SecAggState
from fedgraphrec.protocols.secagg.expect import SECURE_STAGES, CheckedSecureSumClient, SumSite
from fedgraphrec.protocols.secagg.upload import SparseUpload
from fedgraphrec.runtime.expect import Expect, Expectation, StageFlow
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.state import empty_ids

__all__ = ["FedMFClient", "FedMFState"]


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
    up_users: np.ndarray = field(default_factory=empty_ids)
    up_pos: np.ndarray = field(default_factory=empty_ids)
    up_items: np.ndarray = field(default_factory=empty_ids)
    up_rows: torch.Tensor = field(default_factory=lambda: torch.zeros(0, 0, dtype=torch.float64))
    secagg: SecAggState = field(default_factory=SecAggState)


class FedMFClient(CheckedSecureSumClient, ClientProgram[FedMFState]):
    """FedMF's users hosted by one node (module docstring)."""

    settings: FedMFSettings

    def init_state(self) -> None:
        """The shard's users' initial rows and their Adam state."""
        self.n_items = int(self.node_data("a FedMF node needs its users' initial rows").train.shape[1])
        user = self.initial_rows("user_emb")
        self.state = FedMFState(user=user, m=torch.zeros_like(user), v=torch.zeros_like(user))

    # ------------------------------------------------------------------ what the node accepts
    def stage_flow(self) -> StageFlow:
        """The node's stage order (:data:`.roles.FLOW`)."""
        return FLOW

    def expect(self, stage: str) -> Expectation:
        """The item table (optional in a minibatch: only nodes with users in it get one), the sum's parts."""
        if stage in SECURE_STAGES:
            return self.secagg_expect(stage)
        dtype, d = self.state.user.dtype, int(self.state.user.shape[1])
        if stage == LOCAL:
            items = Expect(
                DOWNLOAD, kind="item-table", shape="broadcast", dtype=dtype, width=d, optional=True
            )
            return {"items": items}
        if stage == EVALUATE:
            return {"items": replace(EVALUATE_ITEMS, dtype=dtype, width=d, optional=False)}
        return {}

    def secagg_site(self, stage: str, step: int | None = None) -> SumSite:
        """This minibatch's sum: the item gradients of the node's users that trained in it.

        Raises:
            IntegrityError: none of the node's users trained in this step (nothing to sum).
        """
        st = self.state
        if not len(st.up_users) or (step is not None and step != st.step):
            raise IntegrityError(f"fedmf stage {stage!r}: no item gradients of this node's users to sum")
        label = None if step is None else session(step)
        d = int(st.user.shape[1])
        return SumSite(GRADIENTS, label, self.n_items * d, st.up_users, self.settings.frac_bits)

    def _triples(self, step: int, request: Message) -> tuple[torch.Tensor, ...]:
        """The minibatch's triples of this node's users, checked against what the node knows.

        Raises:
            IntegrityError: a user the node does not host, an item outside the catalogue, a batch
                smaller than its triples, or the item table missing although users train (or sent
                although none does), or of the wrong shape.
        """
        f = request.fields
        users, pos, neg = (np.asarray(f[k], dtype=np.int64) for k in ("users", "pos", "neg"))
        batch, N = int(f["batch"]), self.n_items
        where = f"fedmf stage {LOCAL!r} at step {step}"
        if not (len(users) == len(pos) == len(neg) <= batch):
            raise IntegrityError(f"{where}: {len(users)} users, {len(pos)} / {len(neg)} items, batch {batch}")
        if not np.isin(users, self.clients).all():
            raise IntegrityError(f"{where}: field 'users' names users this node does not host")
        if len(users) and (min(pos.min(), neg.min()) < 0 or max(pos.max(), neg.max()) >= N):
            raise IntegrityError(f"{where}: fields 'pos' / 'neg' name items outside the catalogue of {N}")
        if ("items" in request) != bool(len(users)):
            raise IntegrityError(f"{where}: the item table must come exactly when this node's users train")
        if "items" in request and tuple(request["items"].value.shape) != (N, self.state.user.shape[1]):
            raise IntegrityError(f"{where}: part 'items' has shape {tuple(request['items'].value.shape)}")
        return torch.from_numpy(users), torch.from_numpy(pos), torch.from_numpy(neg)

    # ------------------------------------------------------------------ a minibatch
    def stage_train_local(self, step: int, request: Message) -> Message:
        """Local BPR of this node's triples; Adam on the users' rows; keep the item gradients."""
        f, st = request.fields, self.state
        users, pos, neg = self._triples(step, request)
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
