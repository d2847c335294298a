r"""P-GCN (Hu et al., 2023): lossless forward, incomplete backward, secure aggregation.

The baseline LP-GCN improves on (``specs/lpgcn.md`` §9.5, Table 1 row "P-GCN": lossless forward,
lossy backward). The backbone is LightGCN+ (users built from the item table ``W``, Eq. 6); the
server holds ``V`` and ``W``.

**Forward.** Exactly LightGCN+'s (the shared propagation routine over the whole graph), as P-GCN's
embedding exchange achieves; its traffic is not modelled here ([D]: only the gradient uploads are
counted, so the ledger under-states P-GCN's cost, never over-states it).

**Backward.** What P-GCN cannot do is route gradients through other clients' nodes. Client ``u``
backpropagates its own loss :math:`\mathcal L_u` only through its local star — its user node and
the edges to its own items — so every gradient path that passes through another user's node is
dropped ([G] the paper gives no formula; this is the reading "gradient paths through other clients'
nodes dropped" of the issue). With :math:`c_{ui}` the LightGCN weights, direct gradients
:math:`D^{(l)} = \alpha_l\,\partial\mathcal L_u/\partial e` and edge-level item adjoints
:math:`g_{ui}`, client ``u`` runs

.. math::
    g^{(L)}_u = D^{(L)}_u,\quad g^{(L)}_{ui} = D^{(L)}_{i(u)},\qquad
    g^{(l)}_u = D^{(l)}_u + \sum_{i\in\mathcal I_u} c_{ui}\, g^{(l+1)}_{ui},\quad
    g^{(l)}_{ui} = D^{(l)}_{i(u)} + c_{ui}\, g^{(l+1)}_u,

where :math:`D_{i(u)}` is the part of :math:`\mathcal L_u`'s direct gradient on item ``i``. Its
layer-0 results give its gradient rows: :math:`\nabla V_i \mathrel{+}= g^{(0)}_{ui}` (plus the direct
layer-0 gradient of its negatives, which are not in its star) and, through Eq. 6,
:math:`\nabla W_i \mathrel{+}= (g^{(0)}_u + \lambda\text{-term})/\sqrt{|\mathcal I_u|}` for
``i`` in :math:`\mathcal I_u`. Summed over clients, the centralized recursion (§2.4) differs only by
the terms :math:`\sum_{v\ne u} c_{vi}\,G_v` that cross another user.

**Aggregation.** Each client uploads its ``V`` and ``W`` gradient rows as one dense ``2·N·d`` vector
through secure aggregation (lossless up to fixed point); the server applies Adam to ``V`` and ``W``.
With ``n_layers = 0`` there is nothing to drop and P-GCN is exactly centralized BPR on LightGCN+'s
layer-0 tables.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto.sharing import FixedPoint
from fedgraphrec.models.lightgcn import fism_operator
from fedgraphrec.models.propagation import NormalizedBipartite, propagate, spmm, torch_csr
from fedgraphrec.protocols.common import StepRecord, local_bpr
from fedgraphrec.protocols.secure_aggregation import (
    SecureSum,
    SparseUpload,
    check_threshold,
    secure_aggregate,
    threshold_for,
)
from fedgraphrec.runtime import CryptoMode, Network

__all__ = ["PGCN", "participant_edges", "star_backward"]


def participant_edges(indptr: np.ndarray, participants: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(owner, edge_ids)``: the participants' training edges in CSR order.

    ``owner`` is the position in ``participants`` of each edge's user.
    """
    counts = np.diff(indptr)[participants]
    owner = np.repeat(np.arange(len(participants)), counts)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    edge_ids = np.repeat(indptr[participants] - first, counts) + np.arange(int(counts.sum()))
    return owner, edge_ids.astype(np.int64)


def star_backward(
    c: torch.Tensor, owner: torch.Tensor, dU: torch.Tensor, edge_direct: torch.Tensor, n_layers: int
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Every participant's backward through its own star, batched over all their edges.

    Args:
        c: ``(E,)`` weights :math:`c_{ui}` of the participants' edges.
        owner: ``(E,)`` participant position of each edge's user.
        dU: ``(P, d)`` gradient of the loss with respect to the participants' final embeddings.
        edge_direct: ``(E, d)`` direct gradient of each participant's loss on the final embedding of
            each of its items (zero for items it did not score).
        n_layers: :math:`L`.

    Returns:
        The layer-0 adjoints :math:`g^{(0)}_u` ``(P, d)`` and :math:`g^{(0)}_{ui}` ``(E, d)``.
    """
    alpha = 1.0 / (n_layers + 1)
    cw = c[:, None]
    g_user, g_edge = alpha * dU, alpha * edge_direct
    for _ in range(n_layers):
        by_user = torch.zeros_like(dU).index_add_(0, owner, cw * g_edge)
        g_user, g_edge = alpha * dU + by_user, alpha * edge_direct + cw * g_user[owner]
    return g_user, g_edge


class PGCN:
    """P-GCN's server and clients, simulated in one process (see the module docstring).

    Args:
        train: binary user × item training matrix.
        item0: initial item-node table ``V`` (server).
        item_w0: initial user-building table ``W`` (server).
        n_layers: :math:`L`.
        seed: run seed (kept for symmetry; secure aggregation is exact).
        lr: the server's Adam learning rate.
        reg: ``λ`` of the layer-0 L2 term (on :math:`U^{(0)}_u`, ``V_i``, ``V_j`` as LightGCN+).
        crypto, transcripts, frac_bits, secagg_threshold: secure aggregation, as :class:`FedMF`.
    """

    def __init__(
        self,
        train: sp.csr_matrix,
        item0: torch.Tensor,
        item_w0: torch.Tensor,
        *,
        n_layers: int,
        seed: int,
        lr: float,
        reg: float,
        crypto: CryptoMode = "accounted",
        transcripts: bool = False,
        frac_bits: int = 32,
        secagg_threshold: float = 0.6,
        secagg_semi_honest: bool = False,
    ) -> None:
        if n_layers < 0:
            raise ValueError(f"n_layers must be >= 0, got {n_layers}")
        self.train = sp.csr_matrix(train)
        self.n_users, self.n_items = self.train.shape
        dtype = item0.dtype
        self.graph = NormalizedBipartite.from_train(self.train, dtype=dtype)
        F_op = fism_operator(self.train)
        self._F, self._FT = torch_csr(F_op, dtype), torch_csr(F_op.T.tocsr(), dtype)
        self._inv_sqrt_deg = torch.from_numpy(1.0 / np.sqrt(np.maximum(np.diff(self.train.indptr), 1))).to(
            dtype
        )
        self.n_layers, self.seed, self.reg = n_layers, seed, reg
        self.item = item0.detach().clone()
        self.item_w = item_w0.detach().clone()
        self.optimizer = torch.optim.Adam([self.item, self.item_w], lr=lr)
        self.net = Network(self.n_users, crypto, transcripts)
        self.fp = FixedPoint(frac_bits)
        check_threshold(secagg_threshold, secagg_semi_honest)
        self.secagg_threshold = secagg_threshold
        self.secure_sum: SecureSum | None = None  # who runs real secure aggregation (default in-process)
        self.step_index = 0

    def parameters_by_name(self) -> dict[str, torch.Tensor]:
        """The server's tables under LightGCN+'s parameter names."""
        return {"item_emb": self.item, "item_w": self.item_w}

    def user0(self) -> torch.Tensor:
        """Eq. 6 users, :math:`U^{(0)} = F W` (each client builds its own row)."""
        return spmm(self._F, self._FT, self.item_w)

    def final_embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The lossless forward's final embeddings (equal to LightGCN+'s for the same tables)."""
        with torch.no_grad():
            return propagate(self.graph, self.user0(), self.item, self.n_layers)

    def train_step(self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> StepRecord:
        """One minibatch: lossless forward, star backward per client, secure sum, server Adam."""
        N, d = self.item.shape
        with torch.no_grad():
            U0 = self.user0()
            U, V = propagate(self.graph, U0, self.item, self.n_layers)
        local = local_bpr(U, V, U0, self.item, users, pos, neg, self.reg)
        participants = np.unique(users.numpy())
        part_t = torch.from_numpy(participants)
        owner, edge_ids = participant_edges(self.train.indptr, participants)
        edge_items = self.train.indices[edge_ids].astype(np.int64)
        owner_t = torch.from_numpy(owner)
        # a triple item's direct gradient lands on its (user, item) edge when the item is in the
        # user's star (always for positives), else it reaches only that item's layer-0 row
        pos_pos = np.searchsorted(participants, users.numpy())
        seg2, items2 = np.concatenate([pos_pos, pos_pos]), local.items.numpy()
        edge_key = owner.astype(np.int64) * N + edge_items
        keys2 = seg2 * N + items2
        at = np.searchsorted(edge_key, keys2).clip(0, max(len(edge_key) - 1, 0))
        on_edge = edge_key[at] == keys2 if len(edge_key) else np.zeros(len(keys2), dtype=bool)
        on_t = torch.from_numpy(on_edge)
        edge_direct = torch.zeros((len(edge_ids), d), dtype=U.dtype).index_add_(
            0, torch.from_numpy(at[on_edge]), local.d_rows[on_t]
        )
        c = torch.from_numpy(self.graph.values[edge_ids]).to(U.dtype)
        g_user, g_edge = star_backward(c, owner_t, local.dU[part_t], edge_direct, self.n_layers)
        alpha0 = 1.0 / (self.n_layers + 1)
        user_grad = g_user + local.rU[part_t]  # gradient on U^(0)_u, then Eq. 6 into W
        w_rows = user_grad[owner_t] * self._inv_sqrt_deg[part_t][owner_t][:, None]
        # V rows of each client: its star's edges (with the L2 term of the items there) and, for
        # items outside its star (its negatives), the direct layer-0 part plus their L2 term
        off = ~on_edge
        g_edge.index_add_(0, torch.from_numpy(at[on_edge]), local.r_rows[on_t])
        off_rows = alpha0 * local.d_rows[~on_t] + local.r_rows[~on_t]
        upload = SparseUpload(participants, 2 * N * d)
        upload.add(owner_t, torch.from_numpy(edge_items * d), g_edge.double())
        upload.add(owner_t, torch.from_numpy(N * d + edge_items * d), w_rows.double())
        keys, inverse = np.unique(seg2[off] * N + items2[off], return_inverse=True)
        summed = torch.zeros((len(keys), d), dtype=torch.float64)
        summed.index_add_(0, torch.from_numpy(inverse), off_rows.double())
        upload.add(torch.from_numpy(keys // N), torch.from_numpy((keys % N) * d), summed)
        result = secure_aggregate(
            self.net,
            "train/item-gradients",
            upload,
            threshold=threshold_for(len(participants), self.secagg_threshold),
            fp=self.fp,
            label=f"pgcn/step/{self.step_index}".encode(),
            summer=self.secure_sum,
        )
        self.step_index += 1
        self.item.grad = result.total[: N * d].view(N, d).to(self.item.dtype)
        self.item_w.grad = result.total[N * d :].view(N, d).to(self.item.dtype)
        self.optimizer.step()
        bpr, reg = local.bpr.item(), local.reg.item()
        return StepRecord(
            loss=bpr + self.reg * reg,
            bpr=bpr,
            reg=reg,
            item_grad=self.item.grad,
            w_grad=self.item_w.grad,
        )
