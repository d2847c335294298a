"""FedGRec's round written the slow, obvious way: one user at a time, autograd, ``torch.optim.Adam``.

The oracle of the batched :func:`~fedgraphrec.protocols.fedgrec.local.local_round` (the tests import
it as ``benchmarks.fedgrec_reference``) and the baseline of ``python -m benchmarks.fedgrec_round``;
research code, so outside the library. No secure aggregation and no dropout: it sums the users'
deltas in floating point.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F

from fedgraphrec.protocols.fedgrec.sampling import RoundSample
from fedgraphrec.protocols.fedgrec.settings import FedGRecSettings

__all__ = ["reference_round"]


def _rep(
    s: FedGRecSettings,
    user_orders: list[torch.Tensor],
    itq: torch.Tensor,
    E: torch.Tensor,
    Q: torch.Tensor,
    rows: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """ē_u and ē_t (spec Eq. 2, or the concatenation) for the rows ``rows`` of the query ``Q``."""
    K, a = s.K, s.layer_weights()
    item_orders = [itq[rows]] + [E[k][Q[rows]] for k in range(1, K + 1)]
    if s.aggregation == "concat":
        return torch.cat(user_orders).expand(len(rows), -1), torch.cat(item_orders, dim=1)
    ub = sum(a[k] * user_orders[k] for k in range(K + 1))
    tb = sum(a[k] * item_orders[k] for k in range(K + 1))
    return ub.expand(len(rows), -1), tb  # type: ignore[union-attr,return-value]


def reference_round(
    s: FedGRecSettings, E: torch.Tensor, U: torch.Tensor, train: sp.csr_matrix, rs: RoundSample
) -> tuple[torch.Tensor, torch.Tensor]:
    """Round ``rs`` computed user by user from spec §3.4's pseudocode; returns the new ``(E, U)``.

    ``E`` (``(K+1, N, d)``) and ``U`` (``(K+1, M, d)``) are the tables before the round (not
    modified); ``train`` gives the degrees. Each user has its own autograd graph and its own Adam
    over a local copy of *every* queried row, so the batched round's shortcuts (stacked users, closed-form
    gradients, only touched rows) are all checked against it.
    """
    K = s.K
    E, U = E.clone(), U.clone()
    deg_u = np.diff(train.indptr).astype(np.float64)
    deg_t = np.bincount(train.indices, minlength=train.shape[1]).astype(np.float64)
    dE = torch.zeros_like(E)
    touched_by = torch.zeros(E.shape[1], dtype=torch.float64)
    for i, u in enumerate(rs.clients):
        pos = rs.pos_items[rs.pos_ptr[i] : rs.pos_ptr[i + 1]]
        neg = rs.neg_items[rs.neg_ptr[i] : rs.neg_ptr[i + 1]]
        Q = torch.from_numpy(np.concatenate([pos, neg]))
        pos_t = torch.from_numpy(pos)
        w = torch.from_numpy(1.0 / np.sqrt(deg_t[pos] * deg_u[u]))
        lat = [(w[:, None] * E[k - 1][pos_t]).sum(0) for k in range(1, K + 1)]
        eu0 = U[0][u].clone().requires_grad_(True)
        itq = E[0][Q].clone().requires_grad_(True)  # a local copy of every queried row
        opt: torch.optim.Optimizer = (
            torch.optim.Adam([eu0, itq], lr=s.lr)
            if s.optimizer == "adam"
            else torch.optim.SGD([eu0, itq], lr=s.lr)
        )
        n_pos = len(pos)
        pairs = slice(rs.pair_ptr[i], rs.pair_ptr[i + 1])
        i_rows = torch.from_numpy(rs.pair_pos[pairs] - rs.pos_ptr[i])
        for step in range(s.local_steps):
            opt.zero_grad()
            j = torch.from_numpy(rs.pair_neg[step, pairs] - rs.neg_ptr[i] + n_pos)

            ui, ti = _rep(s, [eu0, *lat], itq, E, Q, i_rows)
            uj, tj = _rep(s, [eu0, *lat], itq, E, Q, j)
            diff = (uj * tj).sum(1) - (ui * ti).sum(1)
            sq = eu0.square().sum() + itq[i_rows].square().sum(1) + itq[j].square().sum(1)
            if s.loss == "bpr":
                fit = F.softplus(diff)
            else:
                fit = (1 + s.confidence) * (1 - (ui * ti).sum(1)).square() + (uj * tj).sum(1).square()
            loss = fit.mean() + s.reg / 2 * sq.mean()
            loss.backward()
            opt.step()
        with torch.no_grad():
            dE[0][Q] += itq - E[0][Q]
            touched_by[Q] += 1
            new = [eu0.detach(), *lat]
            for k in range(K):
                dE[k + 1][pos_t] += w[:, None] * (new[k] - U[k][u])
            for k in range(K + 1):
                U[k][u] = new[k]
    if s.item_agg == "mean_touched":
        dE[0] /= touched_by.clamp_min(1)[:, None]
    elif s.item_agg == "mean_S":
        dE[0] /= len(rs.clients)
    dE[0] *= s.server_lr
    dE[1:] *= s.latent_lr
    return E + dE, U
