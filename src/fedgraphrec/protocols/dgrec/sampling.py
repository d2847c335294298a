"""Algorithm 1: loss-and-count-weighted multi-hop neighbour sampling.

A centre user ``u`` expands a queue for ``H`` hops; each popped user ``v`` draws ``n_u`` of its
inter-user-graph neighbours (without replacement; all of them when it has fewer) with probability
∝ ``L_w / (ln(cnt_w + 1) + 1)`` (Eq. 4), so under-fit, rarely trained users are preferred. Sampled
links are recorded in both directions. There is no visited set (as in the paper), so a user can be
re-enqueued; the neighbour sets have set semantics. The group is ``U = {v : N^s_v ≠ ∅}`` ∪ {u}, and
``|U| ≤ Σ_{h=0..H} n_u^h`` (121 at ``H = 4, n_u = 3``).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["sample_group", "sampling_weights"]


def sampling_weights(losses: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Unnormalised Eq.-4 weights ``L_v / (ln(cnt_v + 1) + 1)`` (losses floored at a tiny positive)."""
    if losses.shape != counts.shape:
        raise ValueError(f"losses {losses.shape} and counts {counts.shape} must have the same shape")
    return np.maximum(losses, 1e-12) / (np.log(counts + 1.0) + 1.0)


def sample_group(
    adj: sp.csr_matrix, centre: int, hops: int, fanout: int, weights: np.ndarray, rng: np.random.Generator
) -> dict[int, set[int]]:
    """Sample the training group of ``centre`` (Algorithm 1).

    Args:
        adj: symmetric inter-user adjacency (CSR, no self-loops).
        centre: the initiating user.
        hops: H, number of expansion hops.
        fanout: n_u, neighbours drawn per expanded user.
        weights: Eq.-4 weight of every user (see :func:`sampling_weights`).
        rng: the random stream.

    Returns:
        ``N^s_v`` for every group member ``v`` (the centre is always a key, possibly with no links).
    """
    if hops < 1 or fanout < 1:
        raise ValueError(f"hops and fanout must be >= 1, got hops={hops}, fanout={fanout}")
    if not 0 <= centre < adj.shape[0]:
        raise ValueError(f"centre {centre} outside [0, {adj.shape[0]})")
    sampled: dict[int, set[int]] = {centre: set()}
    queue = [centre]
    for _ in range(hops):
        nxt: list[int] = []
        for v in queue:
            nb = adj.indices[adj.indptr[v] : adj.indptr[v + 1]]
            if len(nb) == 0:
                continue
            if len(nb) <= fanout:
                picks = nb
            else:
                w = weights[nb]
                picks = rng.choice(nb, size=fanout, replace=False, p=w / w.sum())
            for w_ in picks.tolist():
                nxt.append(w_)
                sampled.setdefault(v, set()).add(w_)
                sampled.setdefault(w_, set()).add(v)
        queue = nxt
    return sampled
