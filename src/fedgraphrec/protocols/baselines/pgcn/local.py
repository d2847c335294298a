r"""P-GCN's local computation on a node: every participant's backward through its own star, batched.

Pure functions over a shard's arrays (the client program calls them): :func:`star_backward` is the
recursion of the package docstring, :func:`star_gradients` turns a shard's local BPR terms into the
rows each participant uploads to the secure sum — its ``V`` rows (its star's edges, and its
negatives outside the star) and its ``W`` rows (Eq. 6), at their places in the dense ``2·N·d``
vector.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fedgraphrec.protocols.common import LocalBPR

__all__ = ["StarUpload", "participant_edges", "star_backward", "star_gradients"]


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


@dataclass
class StarUpload:
    """The participants' gradient rows, each of width ``d``, at start indices of the ``2·N·d`` vector.

    Attributes:
        participants: shard positions of the users with triples (sorted).
        pos: participant position (in ``participants``) of each row.
        start: start index of each row (``V`` rows at ``i·d``, ``W`` rows at ``N·d + i·d``).
        rows: ``(R, d)`` float64 values; a participant lists an index once.
    """

    participants: np.ndarray
    pos: np.ndarray
    start: np.ndarray
    rows: torch.Tensor


def star_gradients(
    local: LocalBPR,
    users: np.ndarray,
    indptr: np.ndarray,
    indices: np.ndarray,
    c_edges: torch.Tensor,
    inv_sqrt_deg: torch.Tensor,
    *,
    n_layers: int,
    n_items: int,
) -> StarUpload:
    r"""Every participant's ``V`` and ``W`` gradient rows from its star only (package docstring).

    Args:
        local: the shard's local BPR terms (:func:`~fedgraphrec.protocols.common.local_bpr` over
            the shard's users, positions ``users``).
        users: shard position of each triple's user.
        indptr: the shard's training CSR's row pointers (rows: shard positions).
        indices: its item ids.
        c_edges: :math:`c_{ui}` of every edge of the shard's CSR, in CSR order.
        inv_sqrt_deg: :math:`1/\sqrt{|\mathcal I_u|}` of every shard user (Eq. 6).
        n_layers: :math:`L`.
        n_items: ``N``.
    """
    N = n_items
    d = int(local.dU.shape[1])
    participants = np.unique(users)
    part_t = torch.from_numpy(participants)
    owner, edge_ids = participant_edges(indptr, participants)
    edge_items = indices[edge_ids].astype(np.int64)
    owner_t = torch.from_numpy(owner)
    # a triple item's direct gradient lands on its (user, item) edge when the item is in the
    # user's star (always for positives), else it reaches only that item's layer-0 row
    pos_pos = np.searchsorted(participants, users)
    seg2, items2 = np.concatenate([pos_pos, pos_pos]), local.items.numpy()
    edge_key = owner.astype(np.int64) * N + edge_items
    keys2 = seg2 * N + items2
    at = np.searchsorted(edge_key, keys2).clip(0, max(len(edge_key) - 1, 0))
    on_edge = edge_key[at] == keys2 if len(edge_key) else np.zeros(len(keys2), dtype=bool)
    on_t = torch.from_numpy(on_edge)
    dtype = local.dU.dtype
    edge_direct = torch.zeros((len(edge_ids), d), dtype=dtype).index_add_(
        0, torch.from_numpy(at[on_edge]), local.d_rows[on_t]
    )
    c = c_edges[torch.from_numpy(edge_ids)].to(dtype)
    g_user, g_edge = star_backward(c, owner_t, local.dU[part_t], edge_direct, n_layers)
    alpha0 = 1.0 / (n_layers + 1)
    user_grad = g_user + local.rU[part_t]  # gradient on U^(0)_u, then Eq. 6 into W
    w_rows = user_grad[owner_t] * inv_sqrt_deg.to(dtype)[part_t][owner_t][:, None]
    # V rows of each participant: its star's edges (with the L2 term of the items there) and, for
    # items outside its star (its negatives), the direct layer-0 part plus their L2 term
    off = ~on_edge
    g_edge.index_add_(0, torch.from_numpy(at[on_edge]), local.r_rows[on_t])
    off_rows = alpha0 * local.d_rows[~on_t] + local.r_rows[~on_t]
    keys, inverse = np.unique(seg2[off] * N + items2[off], return_inverse=True)
    summed = torch.zeros((len(keys), d), dtype=torch.float64)
    summed.index_add_(0, torch.from_numpy(inverse), off_rows.double())
    return StarUpload(
        participants=participants,
        pos=np.concatenate([owner, owner, keys // N]).astype(np.int64),
        start=np.concatenate([edge_items * d, N * d + edge_items * d, (keys % N) * d]).astype(np.int64),
        rows=torch.cat([g_edge.double(), w_rows.double(), summed]),
    )
