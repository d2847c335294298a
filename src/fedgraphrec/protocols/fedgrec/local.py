r"""Steps 2–3 of a FedGRec round for a shard's sampled users at once, and Step 4's upload values.

The round runs *batched over the sampled users* (spec §7's flat layout): the users' local copies of
item rows are separate rows of one tensor, each user's loss is its own mean, and Adam is
elementwise, so one optimizer over the stacked tensors is exactly ``S`` independent per-user Adams.
Only rows that receive a gradient in some local step can change (Adam moves nothing whose gradient
and moments are zero), so only those rows are materialised; the ledger still counts every queried
row and the dense secure-aggregation upload. :func:`local_round` is what a client program runs on
its node with the rows it downloaded; :mod:`.reference` is the same round user by user.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from fedgraphrec.protocols.fedgrec.sampling import RoundSample
from fedgraphrec.protocols.fedgrec.settings import FedGRecSettings
from fedgraphrec.protocols.optim import LocalOptimizer
from fedgraphrec.protocols.secagg.upload import SparseUpload

__all__ = ["LocalObjective", "PendingUpload", "local_round"]


@dataclass
class PendingUpload:
    """Step 4's input of the shard's sampled users, kept on the node until the secure sum.

    Attributes:
        t_seg / t_item: client position and item of every touched row (Eq. 10's support).
        delta0: ``(T, d)`` float64, each touched row's change of ``e_t^0`` (Eq. 10).
        seg / pos_items: client position and item of every positive (Eq. 11's support).
        latent: ``(K, P, d)`` float64: ``w_ut (e_u^k,new − e_u^k,stored)`` for ``k = 0..K-1`` (Eq. 11).
        q_seg / q_items: every query (``item_agg = mean_touched`` counts them).
        user: ``(K+1, S, d)``: the users' new ``e_u^0`` and latents, committed once included.
    """

    t_seg: torch.Tensor
    t_item: torch.Tensor
    delta0: torch.Tensor
    seg: torch.Tensor
    pos_items: torch.Tensor
    latent: torch.Tensor
    q_seg: torch.Tensor
    q_items: torch.Tensor
    user: torch.Tensor

    def upload(self, clients: np.ndarray, n_items: int, mean_touched: bool) -> SparseUpload:
        """The dense vector ``[Δ⁰ ; latent deltas of orders 1..K (; query counts)]`` of each user."""
        K, d = self.latent.shape[0], self.delta0.shape[1]
        N = n_items
        length = (K + 1) * N * d + (N if mean_touched else 0)
        up = SparseUpload(clients, length)
        up.add(self.t_seg, self.t_item * d, self.delta0)  # Eq. 10 rows
        for k in range(K):  # Eq. 11: order k+1 receives the change of e_u^k through Ŷ_u
            up.add(self.seg, (k + 1) * N * d + self.pos_items * d, self.latent[k])
        if mean_touched:
            ones = torch.ones(len(self.q_seg), 1, device=self.q_seg.device)
            up.add(self.q_seg, (K + 1) * N * d + self.q_items, ones)
        return up


def local_round(
    s: FedGRecSettings,
    rs: RoundSample,
    rows: torch.Tensor,
    row_of: np.ndarray | None,
    user: torch.Tensor,
    deg_t: np.ndarray,
    deg_u: np.ndarray,
    n_items: int,
) -> tuple[PendingUpload, float, float]:
    """Steps 2–3 for the sampled users ``rs.clients`` of a shard; Step 4's values.

    Args:
        s: the settings.
        rs: the shard's draws of the round (its sampled users only).
        rows: ``(K+1, R, d)``: the downloaded item rows of every order.
        row_of: item id → row of ``rows`` (``None``: ``rows`` is the whole table).
        user: ``(K+1, S, d)``: the sampled users' stored ``e_u^0`` and latents.
        deg_t: every item's degree ``|N_t|`` (broadcast after Eq. 9).
        deg_u: the sampled users' degrees ``|N_u|``.
        n_items: ``N``.

    Returns:
        ``(pending upload, BPR sum, L2 sum)`` over the users' local steps.
    """
    K, N = s.K, n_items
    device, dtype = user.device, user.dtype
    S, d = len(rs.clients), user.shape[2]

    def t(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a)).to(device)

    def at(items: np.ndarray) -> torch.Tensor:
        return t(items if row_of is None else row_of[items])

    seg_np = rs.pos_seg
    seg = t(seg_np)
    pos_items = t(rs.pos_items)
    pos_rows = at(rs.pos_items)
    w = (1.0 / np.sqrt(deg_t[rs.pos_items] * deg_u[seg_np])).astype(np.float64)
    w64 = t(w)
    w_t = w64.to(dtype)
    lat = []  # Step 2 (Eq. 6 for k = 1..K from the downloaded snapshot): ẽ_u^k, shape (S, d)
    for k in range(1, K + 1):
        contrib = w_t[:, None] * rows[k - 1][pos_rows]
        lat.append(torch.zeros((S, d), dtype=dtype, device=device).index_add_(0, seg, contrib))

    # Rows that get a gradient in some local step: positives and the negatives paired with them,
    # ordered by the step that first touches them, so step i only updates a prefix (Adam leaves a
    # row whose gradient and moments are still zero exactly where it is).
    pair_seg_np = rs.pair_seg
    neg_items = rs.neg_items[rs.pair_neg]  # (τ, Q)
    step_of = np.arange(s.local_steps)[:, None]
    keys = np.concatenate([seg_np * N + rs.pos_items, (pair_seg_np[None, :] * N + neg_items).ravel()])
    first = np.concatenate(
        [np.zeros(len(seg_np), dtype=np.int64), np.broadcast_to(step_of, neg_items.shape).ravel()]
    )
    uniq, inverse = np.unique(keys, return_inverse=True)
    first_touch = np.full(len(uniq), s.local_steps, dtype=np.int64)
    np.minimum.at(first_touch, inverse, first)
    order = np.lexsort((uniq, first_touch))
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    uniq, inverse = uniq[order], rank[inverse]
    n_active = np.searchsorted(first_touch[order], np.arange(s.local_steps), side="right")
    t_seg, t_item_np = t(uniq // N), uniq % N
    t_row = at(t_item_np)
    pos_local = t(inverse[: len(seg_np)][rs.pair_pos])
    neg_local = t(inverse[len(seg_np) :].reshape(neg_items.shape))
    pair_seg = t(pair_seg_np)

    eu0 = user[0].clone()
    it0_start = rows[0][t_row].clone()
    it0 = it0_start.clone()
    objective = LocalObjective(s, lat, [rows[k][t_row] for k in range(1, K + 1)], t_seg, pair_seg, S)
    pair_w = (1.0 / t(np.diff(rs.pair_ptr)).to(dtype))[pair_seg]
    opt_u, opt_t = LocalOptimizer(eu0, s.lr, s.optimizer), LocalOptimizer(it0, s.lr, s.optimizer)
    bpr_sum = reg_sum = 0.0
    for step in range(s.local_steps):  # Step 3: τ local steps with every latent frozen
        n = int(n_active[step])
        bpr, reg, grad_u, grad_t = objective.gradients(eu0, it0[:n], pos_local, neg_local[step], pair_w)
        opt_u.step(grad_u)
        opt_t.step(grad_t, n)
        bpr_sum += bpr
        reg_sum += reg

    with torch.no_grad():  # Step 4's values: [Δ⁰ ; latent deltas 1..K]
        new = [eu0, *lat]
        latent = torch.stack(
            [w64[:, None] * (new[k] - user[k]).double()[seg] for k in range(K)]
        ) if K else torch.zeros((0, len(seg_np), d), dtype=torch.float64, device=device)  # fmt: skip
        q_seg, q_items = rs.queries() if s.item_agg == "mean_touched" else (np.zeros(0, np.int64),) * 2
        pending = PendingUpload(
            t_seg=t_seg,
            t_item=t(t_item_np),
            delta0=(it0 - it0_start).double(),
            seg=seg,
            pos_items=pos_items,
            latent=latent,
            q_seg=t(q_seg),
            q_items=t(q_items),
            user=torch.stack(new),
        )
    return pending, bpr_sum, reg_sum


class LocalObjective:
    r"""Every sampled user's local loss (spec §2.3, or FCF's squared error) and its gradients, closed form.

    Scores with every latent frozen: ``mean``/``last``: ``ŷ_ut = ⟨α_0 e_u^0 + B_u, α_0 e_t^0 + c_t⟩``
    with ``B_u = Σ_{k≥1} α_k ẽ_u^k`` and ``c_t = Σ_{k≥1} α_k e_t^k``; ``concat``:
    ``ŷ_ut = ⟨e_u^0, e_t^0⟩ + Σ_{k≥1} ⟨ẽ_u^k, e_t^k⟩``. The loss of user ``u`` is the mean over its
    pairs ``(i, j)`` of ``softplus(ŷ_uj − ŷ_ui) + λ/2 (‖e_u^0‖² + ‖e_i^0‖² + ‖e_j^0‖²)``, and the round's
    objective is the sum over users, so each user's gradient is its own. With
    ``g = σ(ŷ_uj − ŷ_ui)/n_u``: ``∂/∂ū = g (t̄_j − t̄_i)``, ``∂/∂t̄_i = −g ū``, ``∂/∂t̄_j = g ū``, each
    times ``α_0`` for the base rows, plus ``λ/n_u`` times the base rows themselves. Written out
    because autograd's scatter of the gathered rows dominated a round; the tests check it against a
    per-user autograd reference.
    """

    def __init__(
        self,
        s: FedGRecSettings,
        lat: list[torch.Tensor],
        item_lat: list[torch.Tensor],
        t_seg: torch.Tensor,
        seg: torch.Tensor,
        n_clients: int,
    ) -> None:
        a = s.layer_weights()
        self.reg = s.reg
        self.loss = s.loss
        self.confidence = s.confidence
        self.seg = seg
        self.n_clients = n_clients
        self.concat = s.aggregation == "concat"
        self.a0 = 1.0 if self.concat else a[0]
        self.B: torch.Tensor | None = None
        self.c: torch.Tensor | None = None
        self.const: torch.Tensor | None = None
        if self.concat and lat:  # ⟨ẽ_u^k, e_t^k⟩ per touched row, summed over k ≥ 1
            self.const = sum((lat[k][t_seg] * item_lat[k]).sum(1) for k in range(len(lat)))  # type: ignore[assignment]
        elif lat:
            self.B = sum(a[k + 1] * lat[k] for k in range(len(lat)))  # type: ignore[assignment]
            self.c = sum(a[k + 1] * item_lat[k] for k in range(len(item_lat)))  # type: ignore[assignment]

    def _rep(self, it0: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        base = it0.index_select(0, rows)
        return base if self.c is None else self.a0 * base + self.c.index_select(0, rows)

    def gradients(
        self, eu0: torch.Tensor, it0: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, pair_w: torch.Tensor
    ) -> tuple[float, float, torch.Tensor, torch.Tensor]:
        """Ranking (or MSE) and L2 parts of the objective and its gradients for ``eu0`` and ``it0``."""
        seg, a0 = self.seg, self.a0
        u_base = eu0.index_select(0, seg)
        u = u_base if self.B is None else a0 * u_base + self.B.index_select(0, seg)
        ti, tj = self._rep(it0, pos), self._rep(it0, neg)
        s_i, s_j = (u * ti).sum(1), (u * tj).sum(1)
        if self.const is not None:
            s_i = s_i + self.const.index_select(0, pos)
            s_j = s_j + self.const.index_select(0, neg)
        if self.loss == "bpr":  # softplus(ŷ_uj − ŷ_ui)
            fit = F.softplus(s_j - s_i)
            g_j = torch.sigmoid(s_j - s_i)
            g_i = -g_j
        else:  # FCF's confidence-weighted squared error: c (1 − ŷ_ui)² + ŷ_uj², c = 1 + α
            c = 1.0 + self.confidence
            fit = c * (1 - s_i).square() + s_j.square()
            g_i, g_j = -2 * c * (1 - s_i), 2 * s_j
        i_base, j_base = it0.index_select(0, pos), it0.index_select(0, neg)
        sq = u_base.square().sum(1) + i_base.square().sum(1) + j_base.square().sum(1)
        bpr = (pair_w * fit).sum().item()
        reg = (self.reg / 2) * (pair_w * sq).sum().item()
        gi, gj = (pair_w * g_i)[:, None], (pair_w * g_j)[:, None]
        lw = (self.reg * pair_w)[:, None]
        grad_u = torch.zeros_like(eu0).index_add_(0, seg, a0 * (gi * ti + gj * tj) + lw * u_base)
        grad_t = torch.zeros_like(it0)
        grad_t.index_add_(0, pos, lw * i_base + a0 * gi * u)
        grad_t.index_add_(0, neg, lw * j_base + a0 * gj * u)
        return bpr, reg, grad_u, grad_t
