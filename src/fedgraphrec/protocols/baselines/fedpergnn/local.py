r"""A shard's local computation in one FedPerGNN round: sampling, the local GNN's Adam steps, the upload.

Everything here runs on one node for the shard's sampled clients at once (tensors indexed by the
clients' positions in the round), and every random draw of client ``u`` in round ``r`` comes from
its own named stream (``("fedpergnn", <what>, r, u)``), so what a client draws does not depend on
which node hosts it or on who else was sampled: one node and three nodes give the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.privacy.noise_source import SecureNoise, SeededNoise
from fedgraphrec.protocols.fedgrec.sampling import negatives_of
from fedgraphrec.seeding import numpy_rng

__all__ = ["LocalResult", "ShardRound", "local_train", "protected_rows", "sample_shard"]


@dataclass
class ShardRound:
    """The shard's part of the current round, kept between the query and the local stage.

    Attributes:
        clients: global ids of the shard's sampled clients (sorted).
        pos_ptr / pos_items: CSR of each client's positives (all its training items, sorted).
        neg_ptr / neg_items: CSR of each client's negatives.
        pair_neg: ``(τ, P)`` position in ``neg_items`` of each positive's negative in each step.
        neighbours: ``(P, d)`` mean embedding of each positive's other holders (third party's).
        round_index: the round.
    """

    clients: np.ndarray
    pos_ptr: np.ndarray
    pos_items: np.ndarray
    neg_ptr: np.ndarray
    neg_items: np.ndarray
    pair_neg: np.ndarray
    neighbours: torch.Tensor
    round_index: int = 0

    @property
    def pos_seg(self) -> np.ndarray:
        """Client position of every positive."""
        return np.repeat(np.arange(len(self.clients)), np.diff(self.pos_ptr))

    def queries(self) -> tuple[np.ndarray, np.ndarray]:
        """``(client position, item)`` of every queried item, sorted by client then item."""
        seg = np.concatenate([self.pos_seg, np.repeat(np.arange(len(self.clients)), np.diff(self.neg_ptr))])
        items = np.concatenate([self.pos_items, self.neg_items]).astype(np.int64)
        order = np.lexsort((items, seg))
        return seg[order], items[order]


def _ptr(counts: list[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int64)


def sample_shard(
    rows: sp.csr_matrix,
    positions: np.ndarray,
    clients: np.ndarray,
    round_index: int,
    *,
    seed: int,
    n_negatives: int,
    local_steps: int,
) -> ShardRound:
    """The sampled clients' negatives and local pairs (one positive, one negative, each step).

    Args:
        rows: the shard's training rows (sorted indices).
        positions: row of each sampled client in ``rows``.
        clients: their global ids (name their streams).
        round_index: the round.
        seed: the run seed.
        n_negatives: negatives each client draws (fewer if it lacks non-items).
        local_steps: local steps ``τ`` (one negative per positive and step).

    Raises:
        ValueError: a sampled client holds every item (BPR needs a negative).
    """
    n_items = rows.shape[1]
    pos_lists, neg_lists, draws = [], [], []
    for row, u in zip(positions.tolist(), clients.tolist(), strict=True):
        rng = numpy_rng(seed, "fedpergnn", "sample", round_index, u)
        pos = rows.indices[rows.indptr[row] : rows.indptr[row + 1]].astype(np.int64)
        neg = negatives_of(pos, n_items, n_negatives, rng).astype(np.int64)
        if not len(neg):
            raise ValueError(f"user {u} has interacted with every item; BPR needs at least one negative")
        pos_lists.append(pos)
        neg_lists.append(neg)
        draws.append(
            np.minimum((rng.random((local_steps, len(pos))) * len(neg)).astype(np.int64), len(neg) - 1)
        )
    neg_ptr = _ptr([len(n) for n in neg_lists])
    seg_neg = [neg_ptr[k] + d for k, d in enumerate(draws)]
    empty = np.zeros(0, dtype=np.int64)
    return ShardRound(
        clients=np.asarray(clients, dtype=np.int64),
        pos_ptr=_ptr([len(p) for p in pos_lists]),
        pos_items=np.concatenate(pos_lists) if pos_lists else empty,
        neg_ptr=neg_ptr,
        neg_items=np.concatenate(neg_lists) if neg_lists else empty,
        pair_neg=np.concatenate(seg_neg, axis=1) if seg_neg else np.zeros((local_steps, 0), dtype=np.int64),
        neighbours=torch.zeros(0),
        round_index=round_index,
    )


@dataclass(frozen=True)
class LocalResult:
    """What the local steps produced.

    Attributes:
        user: the clients' new embeddings ``(S, d)``.
        seg / items / deltas: the item rows Adam moved (client position, item id, float64 update).
        loss_sum: the clients' summed mean losses over the steps (the round's loss before dividing
            by ``S · τ``).
    """

    user: torch.Tensor
    seg: np.ndarray
    items: np.ndarray
    deltas: torch.Tensor
    loss_sum: float


def local_train(
    sr: ShardRound,
    e_u0: torch.Tensor,
    start_items: torch.Tensor,
    *,
    n_items: int,
    expand: bool,
    loss_name: str,
    lr: float,
    reg: float,
    local_steps: int,
) -> LocalResult:
    r"""``τ`` Adam steps of every sampled client's local model, all clients at once.

    Client ``u``'s model is :math:`h_u = e_u + \operatorname{mean}_{i\in\mathcal I_u}(e_i +
    \bar n_{ui})` (``expand``; else :math:`h_u = e_u`), scored :math:`\hat y_{uj} = h_u\cdot e_j`,
    with BPR or squared error per pair plus ``reg/2`` times the pair's squared rows; each client's
    loss is its pairs' mean. Parameters are the client's own row and the rows of the items it
    queried (``start_items``, in :meth:`ShardRound.queries` order); clients share no parameter.
    """
    q_seg, q_items = sr.queries()
    S = len(sr.clients)
    keys = q_seg.astype(np.int64) * n_items + q_items  # sorted: by client, then item

    def row_of(seg: np.ndarray, items: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.searchsorted(keys, seg.astype(np.int64) * n_items + items))

    pos_seg = sr.pos_seg
    pos_rows = row_of(pos_seg, sr.pos_items)
    neg_rows = row_of(np.repeat(np.arange(S), np.diff(sr.neg_ptr)), sr.neg_items)
    e_u = e_u0.clone().requires_grad_(True)
    q = start_items.clone().requires_grad_(True)
    optimizer = torch.optim.Adam([e_u, q], lr=lr)
    pos_seg_t = torch.from_numpy(pos_seg)
    n_pos = torch.from_numpy(np.diff(sr.pos_ptr)).to(q.dtype)
    pair_w = (1.0 / n_pos)[pos_seg_t]
    total = 0.0
    for step in range(local_steps):
        optimizer.zero_grad(set_to_none=True)
        if expand:
            item_hat = (
                torch.zeros_like(e_u).index_add_(0, pos_seg_t, q[pos_rows] + sr.neighbours) / n_pos[:, None]
            )
            h = (e_u + item_hat)[pos_seg_t]
        else:  # federated MF
            h = e_u[pos_seg_t]
        qi = q[pos_rows]
        qj = q[neg_rows[torch.from_numpy(sr.pair_neg[step])]]
        yi, yj = (h * qi).sum(1), (h * qj).sum(1)
        if loss_name == "bpr":
            per_pair = torch.nn.functional.softplus(yj - yi)
        else:
            per_pair = (yi - 1.0).square() + yj.square()
        sq = e_u[pos_seg_t].square().sum(1) + qi.square().sum(1) + qj.square().sum(1)
        loss = (pair_w * (per_pair + reg / 2 * sq)).sum()
        loss.backward()
        optimizer.step()
        total += loss.item()
    deltas = (q.detach() - start_items).double()
    touched = (deltas != 0).any(1).numpy()  # rows Adam moved: the items the user trained on
    return LocalResult(e_u.detach(), q_seg[touched], q_items[touched], deltas[touched], total)


def protected_rows(
    res: LocalResult,
    clients: np.ndarray,
    n_items: int,
    round_index: int,
    *,
    seed: int,
    n_pseudo: int,
    ldp_clip: float,
    ldp_scale: float,
    secure_noise: bool,
) -> tuple[np.ndarray, np.ndarray, torch.Tensor]:
    r"""Each client's upload: real rows plus pseudo items, clipped and noised, grouped by client.

    A client adds ``n_pseudo`` items it did not query, with rows drawn from a Gaussian of the same
    per-coordinate mean and std as its real rows; every coordinate is clipped to
    :math:`[-\delta, \delta]` and gets Laplace noise of scale :math:`\lambda` — from the client's
    named stream, or from the OS CSPRNG with ``secure_noise``.

    Returns:
        ``(client position, item, row)`` of every uploaded row, each client's real rows then its
        pseudo rows.
    """
    S, d = len(clients), res.deltas.shape[1]
    seg, items, rows = res.seg, res.items, res.deltas
    if n_pseudo:
        seg_t = torch.from_numpy(seg)
        count = torch.from_numpy(np.bincount(seg, minlength=S)).double()[:, None]
        mean = torch.zeros(S, d, dtype=torch.float64).index_add_(0, seg_t, rows) / count
        var = torch.zeros_like(mean).index_add_(0, seg_t, (rows - mean[seg_t]).square()) / count
        bounds = np.searchsorted(seg, np.arange(S + 1))  # seg is sorted
        p_items, z = [], []
        for k, u in enumerate(clients.tolist()):
            rng = numpy_rng(seed, "fedpergnn", "pseudo", round_index, u)
            p_items.append(negatives_of(items[bounds[k] : bounds[k + 1]], n_items, n_pseudo, rng))
            z.append(rng.standard_normal((len(p_items[-1]), d)))
        p_seg = np.repeat(np.arange(S), [len(p) for p in p_items])
        p_rows = mean[p_seg] + var[p_seg].sqrt() * torch.from_numpy(np.concatenate(z))
        order = np.argsort(np.concatenate([seg, p_seg]), kind="stable")
        seg = np.concatenate([seg, p_seg])[order]
        items = np.concatenate([items, *p_items]).astype(np.int64)[order]
        rows = torch.cat([rows, p_rows])[torch.from_numpy(order)]
    if ldp_clip:
        rows = rows.clamp(-ldp_clip, ldp_clip)
    if ldp_scale:
        if secure_noise:
            noise = SecureNoise().laplace(ldp_scale, tuple(rows.shape))
        else:
            cuts = np.searchsorted(seg, np.arange(S + 1))
            noise = np.concatenate(
                [
                    SeededNoise(numpy_rng(seed, "fedpergnn", "ldp", round_index, u)).laplace(
                        ldp_scale, (int(cuts[k + 1] - cuts[k]), d)
                    )
                    for k, u in enumerate(clients.tolist())
                ]
                or [np.zeros((0, d))]
            )
        rows = rows + torch.from_numpy(noise)
    return seg, items, rows
