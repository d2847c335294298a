"""Names and local pieces shared by the server-mediated protocols.

Role names (LP-GCN, GNN4FR), a shard's training rows (:class:`ShardRows`), the local BPR loss of a
user minibatch (:func:`local_bpr`, :class:`LocalBPR`) and the layer mean of LightGCN-style propagation
(:func:`layer_mean`); the one Adam step is :func:`~fedgraphrec.protocols.optim.adam_step`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

__all__ = [
    "CLIENT",
    "KEY_HOLDER",
    "SERVER",
    "LocalBPR",
    "ShardRows",
    "layer_mean",
    "local_bpr",
    "regulariser_by_use",
]

SERVER = "server"
CLIENT = "client"
KEY_HOLDER = "key-client"  # u_c of Algorithm 2, who draws the shared key S


@dataclass(frozen=True)
class ShardRows:
    """A node's clients' training rows, as the protocols that propagate over them read them.

    Attributes:
        full: the whole training matrix as float64 0/1 (duplicates merged, indices sorted).
        train: the shard's rows of it, in the order of its clients.
        deg_u: each of the shard's clients' number of training items.
    """

    full: sp.csr_matrix
    train: sp.csr_matrix
    deg_u: np.ndarray

    @classmethod
    def of(cls, train: sp.spmatrix, clients: np.ndarray) -> ShardRows:
        """Binarise ``train`` and keep ``clients``' rows (global ids, sorted)."""
        full = sp.csr_matrix(train, dtype=np.float64, copy=True)
        full.sum_duplicates()
        full.sort_indices()
        full.data[:] = 1.0
        mine = sp.csr_matrix(full[clients])
        return cls(full, mine, np.diff(mine.indptr).astype(np.int64))

    @property
    def n_items(self) -> int:
        """The catalogue size."""
        return int(self.full.shape[1])


def layer_mean(layers: list[torch.Tensor]) -> torch.Tensor:
    r""":math:`\frac{1}{L+1}\sum_l E^{(l)}`, accumulated in place exactly as the oracle's routine does."""
    w = 1.0 / len(layers)
    out = layers[0] * w
    for layer in layers[1:]:
        out.add_(layer, alpha=w)
    return out


@dataclass(frozen=True)
class LocalBPR:
    r"""Every client's BPR loss of one minibatch and its direct gradients (``lpgcn.md`` §2.4).

    Attributes:
        bpr, reg: the batch's BPR term and regulariser (before λ), as the oracle reports them.
        dU: :math:`\partial\mathcal L/\partial U` of the combined user embeddings (users' own).
        rU: the layer-0 regulariser gradient of the users.
        items: the batch's items, positives then negatives (the row order below).
        item_senders: the client that computed each item row (``users`` twice).
        d_rows: each item row's :math:`\partial\mathcal L/\partial V` contribution.
        r_rows: each item row's layer-0 regulariser gradient (already times λ).
    """

    bpr: torch.Tensor
    reg: torch.Tensor
    dU: torch.Tensor
    rU: torch.Tensor
    items: torch.Tensor
    item_senders: np.ndarray
    d_rows: torch.Tensor
    r_rows: torch.Tensor


def local_bpr(
    U: torch.Tensor,
    V: torch.Tensor,
    U0: torch.Tensor,
    V0: torch.Tensor,
    users: torch.Tensor,
    pos: torch.Tensor,
    neg: torch.Tensor,
    reg_weight: float,
    batch_size: int | None = None,
) -> LocalBPR:
    """The clients' local losses (each triple is computed by its user) and direct gradients.

    ``batch_size`` is the whole minibatch's size when these triples are only a shard of it (a
    Flower SuperNode computes its own users' triples): every mean and every gradient is over the
    whole minibatch, so shard results simply add up. ``None``: the triples are the whole minibatch.
    """
    B = int(users.shape[0]) if batch_size is None else int(batch_size)
    n = int(pos.shape[0])
    items = torch.cat([pos, neg])
    # index_select: the same rows as U[users], several times faster than advanced indexing
    u_rows, v_rows = U.index_select(0, users), V.index_select(0, items)
    diff = v_rows[n:] - v_rows[:n]  # negative minus positive: x and dU both use it
    x = (u_rows * diff).sum(-1)
    loss = torch.nn.functional.softplus(x)
    bpr = loss.sum() / B
    u0_rows, v0_rows = U0.index_select(0, users), V0.index_select(0, items)
    u0_flat, v0_flat = u0_rows.reshape(-1), v0_rows.reshape(-1)
    reg = (torch.dot(u0_flat, u0_flat) + torch.dot(v0_flat, v0_flat)) / (2.0 * B)
    s = torch.sigmoid(x).div_(B).unsqueeze(1)
    d = int(U.shape[1])  # dU and rU summed by one scatter of [dU | rU] rows
    both = U.new_zeros((int(U.shape[0]), 2 * d))
    both.index_add_(0, users, torch.cat([diff.mul_(s), u0_rows.mul_(reg_weight / B)], 1))
    dU, rU = both[:, :d].contiguous(), both[:, d:].contiguous()  # later scatters read them fast
    un = users.numpy()
    su = u_rows.mul_(s)  # u_rows is a fresh gather: no caller sees it
    return LocalBPR(
        bpr=bpr,
        reg=reg,
        dU=dU,
        rU=rU,
        items=items,
        item_senders=np.concatenate([un, un]),
        d_rows=torch.cat([-su, su]),
        r_rows=v0_rows.mul_(reg_weight / B),
    )


def regulariser_by_use(
    v0: torch.Tensor, uses: np.ndarray, reg_weight: float, batch_size: int
) -> torch.Tensor:
    r""":math:`\lambda/|B|\,V^{(0)}_i` once for every use of row :math:`i` in the minibatch's triples.

    The regulariser's gradient of rows each used ``uses[i]`` times (as positive or negative): what
    :func:`local_bpr`'s ``r_rows`` sum to per row, computed by a row's owner from the count alone.
    """
    scale = torch.from_numpy(uses.astype(np.float64)).to(v0.dtype).unsqueeze(1)
    return v0.mul(reg_weight / batch_size).mul_(scale)
