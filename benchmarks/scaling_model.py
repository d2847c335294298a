"""The pure side of ``benchmarks/scaling.py``: power-law fits, extrapolation, rating samples, formulas.

Kept apart from the runner so the arithmetic the scaling table rests on is tested on its own
(``tests/benchmarks/test_scaling_model.py``): the exponent and prefactor of ``y = a·x^b`` fitted by
least squares on logarithms, the full-size figure that fit predicts, the per-epoch extrapolation of
per-step counts, the user sample of a rating dataset (P4GCN's population axis), the bytes each
organisation of a two-party protocol sends and receives, and the per-client byte formula of each
protocol as derived from its party programs (``FORMULAS``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "FORMULAS",
    "PowerFit",
    "epoch_total",
    "fit_power",
    "neighbour_counts",
    "organisation_bytes",
    "sample_rating_users",
]


@dataclasses.dataclass(frozen=True)
class PowerFit:
    """``y = prefactor · x^exponent``, fitted on ``points`` (x, y) pairs with ``x, y > 0``."""

    exponent: float
    prefactor: float
    points: int

    def at(self, x: float) -> float:
        """The fit's value at ``x`` (an extrapolation when ``x`` lies beyond the fitted points)."""
        return self.prefactor * x**self.exponent


def fit_power(xs: Sequence[float], ys: Sequence[float]) -> PowerFit | None:
    """Least squares of ``log y = log a + b log x`` over the points with ``x > 0`` and ``y > 0``.

    Returns ``None`` with fewer than two such points or when every ``x`` is the same (no slope).

    Raises:
        ValueError: ``xs`` and ``ys`` differ in length.
    """
    if len(xs) != len(ys):
        raise ValueError(f"xs has {len(xs)} values, ys {len(ys)}")
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if x > 0 and y > 0]
    if len(pts) < 2 or len({p[0] for p in pts}) < 2:
        return None
    lx, ly = np.array(pts).T
    b, log_a = np.polyfit(lx, ly, 1)
    return PowerFit(float(b), float(math.exp(log_a)), len(pts))


def epoch_total(per_step: Sequence[float], steps_per_epoch: int) -> float:
    """An epoch's total from the first steps' counts: their mean × steps per epoch.

    Exact when every step of the epoch costs the same (a per-step count that does not depend on
    which users or ratings the step draws); otherwise an estimate whose error the spread of
    ``per_step`` bounds.

    Raises:
        ValueError: no steps, or ``steps_per_epoch`` below one.
    """
    if not per_step or steps_per_epoch < 1:
        raise ValueError(
            f"need measured steps and steps_per_epoch >= 1; got {len(per_step)}, {steps_per_epoch}"
        )
    return float(np.mean(per_step)) * steps_per_epoch


def neighbour_counts(train: Any) -> np.ndarray:
    """``|N(u)|`` per user: the other users sharing at least one training item with ``u``.

    GNN4FR's per-client bytes follow this count (every layer relays each neighbour's row).
    """
    import scipy.sparse as sp

    r = (sp.csr_matrix(train) != 0).astype(np.float32)
    shared = (r @ r.T).tocsr()
    shared.setdiag(0)
    shared.eliminate_zeros()
    return np.diff(shared.indptr)


def organisation_bytes(rows: Iterable[Any], organisations: Sequence[str]) -> dict[str, int]:
    """Bytes each organisation sent plus received, from ledger rows (``sender``, ``receiver``, bytes).

    A row between two organisations counts for both; rows through a relay count for the
    organisation at their end (the relay is no organisation).
    """
    out = dict.fromkeys(organisations, 0)
    for r in rows:
        for org in organisations:
            if org in (r.sender, r.receiver):
                out[org] += int(r.payload_bytes)
    return out


def sample_rating_users(data: Any, fraction: float, seed: int = 0) -> Any:
    """A seeded ``fraction`` of a :class:`~fedgraphrec.data.types.Ratings`' users, ids compacted.

    Each kept user keeps every rating it has in every split and its social links to other kept
    users; items no kept user rates in training are dropped with their held-out ratings; kept
    users without a training rating are dropped (as ``data.splits.sample_users`` does for
    implicit data). ``fraction == 1`` returns ``data`` itself.

    Raises:
        ValueError: ``fraction`` outside ``(0, 1]``.
    """
    from fedgraphrec.data.types import RatingSplit, SocialGraph

    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    if fraction == 1.0:
        return data
    rng = np.random.default_rng([seed, 33])
    drawn = rng.choice(data.n_users, size=max(1, round(fraction * data.n_users)), replace=False)
    keep = np.zeros(data.n_users, dtype=bool)
    keep[drawn] = True
    keep &= np.bincount(data.train.users, minlength=data.n_users) > 0
    items = np.unique(data.train.items[keep[data.train.users]])
    user_map = np.full(data.n_users, -1, dtype=np.int64)
    user_map[keep] = np.arange(int(keep.sum()))
    item_map = np.full(data.n_items, -1, dtype=np.int64)
    item_map[items] = np.arange(len(items))

    def take(s: Any) -> Any:
        if s is None:
            return None
        m = keep[s.users] & (item_map[s.items] >= 0)
        return RatingSplit(user_map[s.users[m]], item_map[s.items[m]], s.ratings[m])

    social = data.social
    if social is not None:
        m = keep[social.src] & keep[social.dst]
        social = SocialGraph(
            int(keep.sum()), user_map[social.src[m]], user_map[social.dst[m]], social.directed
        )
    info = {**data.info, "user_sample": {"fraction": fraction, "seed": seed, "users": int(keep.sum())}}
    kept = np.flatnonzero(keep)
    return dataclasses.replace(
        data,
        n_users=int(keep.sum()),
        n_items=len(items),
        train=take(data.train),
        valid=take(data.valid),
        test=take(data.test),
        social=social,
        tags=None,
        info=info,
        user_ids=kept
        if data.user_ids is None
        else np.asarray(data.user_ids)[kept],  # back to the input's ids
        item_ids=items if data.item_ids is None else np.asarray(data.item_ids)[items],
    )


FORMULAS: dict[str, str] = {
    "central": "— (no clients)",
    "lpgcn": "M·β·d·[(2L+1)(|I_u|+α) + 2L·|N_ũ| on conv-clients] ⇒ mean ∝ M ∝ |R|",
    "gnn4fr": "M·β·d·2L·|N(u)|, N(u) = users sharing an item with u ⇒ ∝ |R|·U ∝ U²",
    "fedgrec": "(S/U)·[(K+1)·N·d·8 masked upload + (K+1)·|T_u|·d·β + secagg(S)] ⇒ ∝ N/U",
    "federank": "(S/U)·[N·d·8 masked upload + |T_u|·d·β + secagg(S)] ⇒ ∝ N/U",
    "fcf": "(S/U)·[N·d·8 masked upload + |T_u|·d·β + secagg(S)] ⇒ ∝ N/U",
    "fedmf": "m_u·N·d·(β + 8): whole table down, dense masked gradient up ⇒ ∝ m_u·N",
    "fedncf": "(S/U)·[2N·d·8 masked upload + |θ|·8 + 2|T_u|·d·β + secagg(S)] ⇒ ∝ N/U",
    "fedpergnn": "(S/U)·[(|T_u| + n_pseudo)·d·β + neighbour rows of I_u] (plain LDP uploads) ⇒ ∝ 1/U",
    "pgcn": "M·[2L·N·d·(β + 8) + secagg(U)]: L whole tables down, L masked tables up ⇒ ∝ |R|·N",
    "p4gcn": "per organisation: M·[4·|B_u|·d·c + 8|B_u|] (c = 512 B Paillier-2048) ⇒ ∝ |R|",
}
"""Per-client (P4GCN: per-organisation) bytes per epoch, read off each protocol's party programs.

``M = |R|/b`` minibatches per epoch (``|R|`` training interactions, ``b`` the batch size), ``U`` users,
``N`` items, ``L`` layers, ``d`` the dimension, ``β`` bytes per plaintext float (4, float32) and 8
per secure-aggregation ring element; ``I_u`` a user's items, ``α`` its virtual items, ``N_ũ`` the
users a convolution-client relays, ``T_u`` the items a round's user queries (positives and
negatives), ``S`` clients per round, ``m_u`` the minibatches holding one of ``u``'s triples, ``B_u``
a P4GCN batch's distinct users. Round protocols' means are over every client (a round's ``S``
take part), hence ``S/U``. The sweep books every phase (``bytes_by_phase_per_epoch`` in
``scaling.json``), which is where each dominant term was read."""
