"""Per-user inner-item hypergraphs (spec §3.2), stored padded so that users batch together.

User ``u``'s node set is its own training items (public and private) followed by its 1-hop
neighbours' *public* items, capped at ``max_items`` (own items first; neighbours' public items drawn
at random when there are too many — spec gap 17). Hyperedges are item tags: the item×tag incidence
``A`` restricted to those nodes, with tags of zero degree dropped and a singleton hyperedge for
tagless nodes. The propagation matrix ``Ĥ_u = D_v^{-1/2} A_u D_t^{-1} A_uᵀ D_v^{-1/2}`` is stored
dense at ``max_items × max_items`` per user (padding rows and columns are zero), in one float32 tensor
``[n_users, max_items, max_items]`` — 3,000 users × 128² × 4 B ≈ 0.2 GB for Flixster.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

__all__ = ["UserHypergraphs", "build_hypergraphs", "public_split"]


@dataclass(frozen=True)
class UserHypergraphs:
    """Padded per-user hypergraphs.

    Attributes:
        items: ``[n_users, max_items]`` item id of each node (0 at padding).
        mask: ``[n_users, max_items]`` 1.0 at real nodes.
        prop: ``[n_users, max_items, max_items]`` normalised propagation matrix ``Ĥ_u``.
    """

    items: torch.Tensor
    mask: torch.Tensor
    prop: torch.Tensor


def public_split(train: sp.csr_matrix, ratio: float, rng: np.random.Generator) -> sp.csr_matrix:
    """Each user publicises ``round(ratio·|I_u|)`` of its training items, chosen at random."""
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"public ratio must be in [0, 1], got {ratio}")
    rows, cols = [], []
    for u in range(train.shape[0]):
        it = train.indices[train.indptr[u] : train.indptr[u + 1]]
        k = round(ratio * len(it))
        if k:
            rows.append(np.full(k, u))
            cols.append(rng.choice(it, size=k, replace=False))
    r = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    c = np.concatenate(cols) if cols else np.zeros(0, np.int64)
    return sp.csr_matrix((np.ones(len(r)), (r, c)), shape=train.shape)


def _prop(inc: sp.csr_matrix) -> np.ndarray:
    inc = inc[:, np.asarray(inc.sum(0)).ravel() > 0]
    tagless = np.asarray(inc.sum(1)).ravel() == 0
    if tagless.any():
        extra = sp.csr_matrix(
            (np.ones(tagless.sum()), (np.flatnonzero(tagless), np.arange(tagless.sum()))),
            shape=(inc.shape[0], int(tagless.sum())),
        )
        inc = sp.hstack([inc, extra]).tocsr()
    a = inc.toarray()
    dv = a.sum(1)
    dt = a.sum(0)
    a = a / np.sqrt(dv)[:, None]
    return (a / dt[None, :]) @ a.T


def _bipartite(
    item_nodes: np.ndarray, tags: sp.csr_matrix, max_nodes: int, n_items: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    inc = tags[item_nodes]
    used = np.flatnonzero(np.asarray(inc.sum(0)).ravel() > 0)
    room = max_nodes - len(item_nodes)
    if len(used) > room:
        used = np.sort(rng.choice(used, size=room, replace=False))
    a = inc[:, used].toarray()
    k_i, k_t = a.shape
    b = np.eye(k_i + k_t)
    b[:k_i, k_i:] = a
    b[k_i:, :k_i] = a.T
    dinv = 1.0 / np.sqrt(b.sum(1))
    return np.concatenate([item_nodes, n_items + used]), b * dinv[:, None] * dinv[None, :]


def build_hypergraphs(
    train: sp.csr_matrix,
    public: sp.csr_matrix,
    social: sp.csr_matrix,
    tags: sp.csr_matrix,
    max_items: int,
    rng: np.random.Generator,
    *,
    use_neighbours: bool = True,
    bipartite: bool = False,
) -> UserHypergraphs:
    """Build every user's padded hypergraph.

    Args:
        train: user×item training interactions (all of a user's own, public and private).
        public: user×item publicised subset of ``train``.
        social: symmetric user×user adjacency.
        tags: item×tag incidence (Flixster: ``I + W_movies``, one hyperedge per item and its relatives).
        max_items: node cap per user.
        rng: stream for choosing neighbours' public items beyond the cap.
        use_neighbours: ``False`` is the w/non-neighbor ablation (own items only).
        bipartite: the w/non-item-hypergraph ablation: nodes are up to ``max_items // 2`` items plus
            their tags (tag ``t`` gets node id ``n_items + t``, so the model needs ``n_tags`` extra
            embedding rows), joined by item–tag edges, propagation ``D^{-1/2}(B + I)D^{-1/2}``.
    """
    if max_items < 1:
        raise ValueError(f"max_items must be >= 1, got {max_items}")
    n_users = train.shape[0]
    items = np.zeros((n_users, max_items), np.int64)
    mask = np.zeros((n_users, max_items), np.float32)
    prop = np.zeros((n_users, max_items, max_items), np.float32)
    tags = tags.tocsr()
    cap = max_items // 2 if bipartite else max_items
    if cap < 1:
        raise ValueError(f"max_items must be >= 2 with bipartite=True, got {max_items}")
    for u in range(n_users):
        own = train.indices[train.indptr[u] : train.indptr[u + 1]]
        if len(own) > cap:
            own = rng.choice(own, size=cap, replace=False)
        nodes = list(own)
        if use_neighbours and len(nodes) < cap:
            nb = social.indices[social.indptr[u] : social.indptr[u + 1]]
            pub = np.unique(public[nb].indices) if len(nb) else np.zeros(0, np.int64)
            pub = np.setdiff1d(pub, own)
            room = cap - len(nodes)
            if len(pub) > room:
                pub = rng.choice(pub, size=room, replace=False)
            nodes.extend(pub.tolist())
        if not nodes:
            continue
        arr = np.asarray(nodes, np.int64)
        if bipartite:
            arr, block = _bipartite(arr, tags, max_items, n_items=train.shape[1], rng=rng)
        else:
            block = _prop(tags[arr])
        k = len(arr)
        items[u, :k] = arr
        mask[u, :k] = 1.0
        prop[u, :k, :k] = block
    return UserHypergraphs(torch.from_numpy(items), torch.from_numpy(mask), torch.from_numpy(prop))
