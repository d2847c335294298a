"""FedNCF's local computation on a node: the sampled users' Adam steps (batched) and the NeuMF scorer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from fedgraphrec.protocols.baselines.shard_sampling import ShardRound

__all__ = ["LocalDeltas", "local_train", "ncf_pair_logits", "neumf_scores", "weights_of"]


def weights_of(tables: Mapping[str, torch.Tensor]) -> list[torch.Tensor]:
    """The shared weights in a fixed order: first-layer halves and bias, deeper layers, ``h``.

    ``tables`` names them as :class:`~fedgraphrec.models.NCF`'s parameters (``Ws.0``, ``bs.0``, ...).
    """
    n_deep = sum(1 for k in tables if k.startswith("Ws."))
    deep = [tables[f"{n}.{i}"] for i in range(n_deep) for n in ("Ws", "bs")]
    return [tables["W_user"], tables["W_item"], tables["b0"], *deep, tables["h"]]


def ncf_pair_logits(
    pg: torch.Tensor, pm: torch.Tensor, qg: torch.Tensor, qm: torch.Tensor, weights: list[torch.Tensor]
) -> torch.Tensor:
    """NeuMF logits of aligned rows, each pair with its own copy of the weights (leading dimension).

    ``pg, pm, qg, qm``: ``(P, d)``; ``weights``: as :func:`weights_of`, each with a leading ``P``.
    """
    W_user, W_item, b0, *deep, h = weights
    d = pg.shape[1]
    x = F.relu(
        torch.einsum("pd,pdw->pw", pm, W_user) + torch.einsum("pd,pdw->pw", qm, W_item) + b0
    )  # fmt: skip
    for W, b in zip(deep[0::2], deep[1::2], strict=True):
        x = F.relu(torch.einsum("pi,pio->po", x, W) + b)
    return torch.einsum("pd,pd->p", pg * qg, h[:, :d, 0]) + torch.einsum("pk,pk->p", x, h[:, d:, 0])


def neumf_scores(
    pg: torch.Tensor,
    pm: torch.Tensor,
    item_gmf: torch.Tensor,
    item_mlp: torch.Tensor,
    weights: list[torch.Tensor],
) -> torch.Tensor:
    """Scores of users ``(pg, pm)`` against every item, as :meth:`fedgraphrec.models.NCF.score_users`."""
    W_user, W_item, b0, *deep, h = weights
    d = pg.shape[1]
    gmf = (pg * h[:d, 0]) @ item_gmf.T
    x = F.relu((pm @ W_user)[:, None, :] + (item_mlp @ W_item)[None, :, :] + b0)
    for W, bias in zip(deep[0::2], deep[1::2], strict=True):
        x = F.relu(x @ W + bias)
    return gmf + (x @ h[d:]).squeeze(-1)


@dataclass
class LocalDeltas:
    """What a shard's sampled users upload (securely summed), and what they keep.

    Attributes:
        t_seg / t_item: user position and item of every item row a user trained (pairs' items).
        d_gmf / d_mlp: those rows' deltas ``(T, d)`` (float64).
        d_weights: every user's flattened weight delta ``(S, n_weights)`` (float64).
        user_gmf / user_mlp: the users' new embeddings (they keep them).
        loss_sum: the users' summed mean losses over the steps.
    """

    t_seg: np.ndarray
    t_item: np.ndarray
    d_gmf: torch.Tensor
    d_mlp: torch.Tensor
    d_weights: torch.Tensor
    user_gmf: torch.Tensor
    user_mlp: torch.Tensor
    loss_sum: float


def local_train(
    sr: ShardRound,
    users: tuple[torch.Tensor, torch.Tensor],
    rows: torch.Tensor,
    weights: list[torch.Tensor],
    *,
    n_items: int,
    lr: float,
    reg: float,
    local_steps: int,
) -> LocalDeltas:
    r"""``τ`` Adam steps of every sampled user's private copy of its rows and of the weights, at once.

    Each user's loss is the mean over its pairs of :math:`-\log\sigma(\hat y_{ui}) -
    \log(1-\sigma(\hat y_{uj}))` plus ``reg/2`` times the pair's squared embedding rows. Every user's
    copy of the weights is a slice of one stacked tensor and Adam is elementwise, so one optimizer
    is exactly ``S`` independent ones.

    Args:
        sr: the shard's round (pairs: one per positive per step).
        users: the users' GMF and MLP rows ``(S, d)`` each.
        rows: the queried items' ``[gmf | mlp]`` rows ``(Q, 2d)`` in :meth:`ShardRound.queries` order.
        weights: the server's weights (:func:`weights_of` order).
        n_items: catalogue size.
        lr: local Adam learning rate.
        reg: L2 weight of the embedding rows.
        local_steps: ``τ``.
    """
    S, d = len(sr.clients), users[0].shape[1]
    q_seg, q_items = sr.queries()
    queried = q_seg.astype(np.int64) * n_items + q_items
    seg = sr.pos_seg
    pos_keys = seg * n_items + sr.pos_items
    neg_keys = seg[None] * n_items + sr.neg_items[sr.pair_neg]
    uniq, inverse = np.unique(np.concatenate([pos_keys, neg_keys.ravel()]), return_inverse=True)
    t_seg, t_item = uniq // n_items, uniq % n_items
    at = torch.from_numpy(np.searchsorted(queried, uniq))
    pos_rows = torch.from_numpy(inverse[: len(seg)])
    neg_rows = torch.from_numpy(inverse[len(seg) :].reshape(sr.pair_neg.shape))
    seg_t = torch.from_numpy(seg)
    start = [users[0].clone(), users[1].clone(), rows[at, :d].clone(), rows[at, d:].clone()]
    start += [w.expand(S, *w.shape).clone() for w in weights]
    params = [t.clone().requires_grad_(True) for t in start]
    optimizer = torch.optim.Adam(params, lr=lr)
    pair_w = (1.0 / torch.from_numpy(np.diff(sr.pos_ptr)).to(rows.dtype))[seg_t]
    total = 0.0
    for step in range(local_steps):
        optimizer.zero_grad(set_to_none=True)
        pg, pm, qg, qm, *ws = params
        per_pair = [w[seg_t] for w in ws]
        logit_i = ncf_pair_logits(pg[seg_t], pm[seg_t], qg[pos_rows], qm[pos_rows], per_pair)
        nr = neg_rows[step]
        logit_j = ncf_pair_logits(pg[seg_t], pm[seg_t], qg[nr], qm[nr], per_pair)
        bce = F.softplus(-logit_i) + F.softplus(logit_j)  # −log σ(ŷ_i) − log(1 − σ(ŷ_j))
        sq = sum(
            t[r].square().sum(1)
            for t, r in ((pg, seg_t), (pm, seg_t), (qg, pos_rows), (qm, pos_rows), (qg, nr), (qm, nr))
        )
        loss = (pair_w * (bce + reg / 2 * sq)).sum()
        loss.backward()
        optimizer.step()
        total += loss.item()
    with torch.no_grad():
        deltas = [p.detach() - s for p, s in zip(params, start, strict=True)]
        flat = torch.cat([dw.reshape(S, -1) for dw in deltas[4:]], dim=1).double()
    return LocalDeltas(
        t_seg,
        t_item,
        deltas[2].double(),
        deltas[3].double(),
        flat,
        params[0].detach(),
        params[1].detach(),
        total,
    )
