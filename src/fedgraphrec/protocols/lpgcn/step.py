"""The minibatch (or prediction pass) an LP-GCN client shard has in flight (spec ``lpgcn.md``).

Reset at every layer-0 stage: what the forward, loss, aggregate and backward stages of one cycle
pass to each other on the node (:class:`~.client_state.LPGCNState` keeps it as ``step``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from fedgraphrec.runtime.state import empty_ids

__all__ = ["StepState", "empty_tensor"]

_EMPTY = torch.zeros(0)


def empty_tensor() -> torch.Tensor:
    """An empty placeholder (shared: fields are replaced, never grown in place)."""
    return _EMPTY


@dataclass
class StepState:
    """The minibatch (or prediction pass) in flight on this node; reset at every layer-0 stage.

    Attributes:
        cycle: ``""`` between cycles, ``"train"`` or ``"predict"`` from layer 0 until the cycle's
            last stage (the node's own position in a cycle: :mod:`.expect`).
        layer: forward layers done in this cycle; back: backward layers done.
        predict: a prediction pass (no triples; every user's final row is accumulated).
        batch_size: triples in the whole minibatch (all nodes).
        b_user: position in the shard of each of this node's triples' user.
        b_pos, b_neg: item ids of the triples.
        users: distinct batch users (shard positions); items: distinct batch items (ids).
        item_local: each distinct item's local position (``-1``: a negative from elsewhere).
        req_items: the negatives requested, per client in order (``req_ptr`` per shard client);
            req_of: the request of each triple's negative.
        extra: distinct requested items the node holds no row of (their rows come with the loss).
        acc_u, acc_i: running layer means of the batch users' and known items' rows (of every
            user or local item when the batch covers most of them: ``StageParts._whole_users``).
        u0, v0: their layer-0 rows (for the regulariser).
        cur_u: this layer's user rows (all shard clients); cur_conv: convolution-items' rows.
        d_u, d_v: direct gradients (spec §2.4) of users and convolution-items (whole tables, sent
            at layer L); d_u_rows, d_v_rows: their only non-zero rows, those of ``users`` and
            ``v_rows``, added in every backward layer (gathered only when not added as whole tables).
        r_u, r_v: the regulariser's gradient rows of ``users`` and of ``v_rows`` (the latter added
            by the owner from the count of rows received: ``StageParts._direct_rows``).
        v_at: the convolution-item position of every direct gradient row, in arrival order;
            v_rows: its distinct positions.
        known_t: local positions of the batch items the node holds a row of (``item_local >= 0``).
        g_u: the current layer's user gradients.
    """

    cycle: str = ""
    layer: int = 0
    back: int = 0
    predict: bool = False
    batch_size: int = 0
    b_user: np.ndarray = field(default_factory=empty_ids)
    b_pos: np.ndarray = field(default_factory=empty_ids)
    b_neg: np.ndarray = field(default_factory=empty_ids)
    users: np.ndarray = field(default_factory=empty_ids)
    items: np.ndarray = field(default_factory=empty_ids)
    item_local: np.ndarray = field(default_factory=empty_ids)
    req_ptr: np.ndarray = field(default_factory=empty_ids)
    req_items: np.ndarray = field(default_factory=empty_ids)
    req_of: np.ndarray = field(default_factory=empty_ids)
    extra: np.ndarray = field(default_factory=empty_ids)
    acc_u: torch.Tensor = field(default_factory=empty_tensor)
    acc_i: torch.Tensor = field(default_factory=empty_tensor)
    u0: torch.Tensor = field(default_factory=empty_tensor)
    v0: torch.Tensor = field(default_factory=empty_tensor)
    cur_u: torch.Tensor = field(default_factory=empty_tensor)
    cur_conv: torch.Tensor = field(default_factory=empty_tensor)
    d_u: torch.Tensor = field(default_factory=empty_tensor)
    r_u: torch.Tensor = field(default_factory=empty_tensor)
    d_v: torch.Tensor = field(default_factory=empty_tensor)
    r_v: torch.Tensor = field(default_factory=empty_tensor)
    d_u_rows: torch.Tensor = field(default_factory=empty_tensor)
    d_v_rows: torch.Tensor = field(default_factory=empty_tensor)
    v_at: np.ndarray = field(default_factory=empty_ids)
    v_rows: np.ndarray = field(default_factory=empty_ids)
    known_t: torch.Tensor = field(default_factory=empty_tensor)
    g_u: torch.Tensor = field(default_factory=empty_tensor)
