r"""A shard's local computation in one FedPerGNN round: sampling, the local GNN's Adam steps, the upload.

Everything here runs on one node for the shard's sampled clients at once (tensors indexed by the
clients' positions in the round), and every random draw of client ``u`` in round ``r`` comes from
its own named stream (``("fedpergnn", <what>, r, u)``), so what a client draws does not depend on
which node hosts it or on who else was sampled: one node and three nodes give the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fedgraphrec.privacy.noise_source import SecureNoise, SeededNoise
from fedgraphrec.protocols.baselines.shard_sampling import ShardRound
from fedgraphrec.protocols.fedgrec.sampling import negatives_of
from fedgraphrec.seeding import hiding_rng, numpy_rng

__all__ = ["LocalResult", "local_train", "protected_rows"]


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
    secure_cover: bool = False,
) -> tuple[np.ndarray, np.ndarray, torch.Tensor]:
    r"""Each client's upload: real rows plus pseudo items, clipped and noised, grouped by client.

    A client adds ``n_pseudo`` items it did not query, with rows drawn from a Gaussian of the same
    per-coordinate mean and std as its real rows; every coordinate is clipped to
    :math:`[-\delta, \delta]` and gets Laplace noise of scale :math:`\lambda` — from the client's
    named stream, or from the OS CSPRNG with ``secure_noise``. The pseudo items and their rows come
    from the client's stream ``("fedpergnn", "pseudo", round, user)``, or from a fresh
    :func:`~fedgraphrec.seeding.secure_rng` with ``secure_cover`` (a server holding the seed could
    otherwise tell pseudo items from real ones).

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
            rng = hiding_rng(secure_cover, seed, "fedpergnn", "pseudo", round_index, u)
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
