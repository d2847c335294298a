r"""LP-GCN's Fig. 13 sweep: per-client cost and utilisation as the convolution candidates grow.

``specs/lpgcn.md`` §9.7; the cost and utilisation of one plan are
:func:`~fedgraphrec.reproduce.lpgcn_communication.communication_report` (Eqs. 30–32).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from fedgraphrec.protocols.lpgcn.cover import greedy_set_cover, plan_convolution
from fedgraphrec.reproduce.lpgcn_communication import BYTES_PER_FLOAT32, communication_report

__all__ = ["fig13_sweep"]

_AVERAGED = (
    "k_fraction",
    "convolution_fraction",
    "total_neighbours",
    "mean_neighbours",
    "items_per_candidate",
    "cost_bytes",
    "cost_kib",
    "cost_kb",
    "R",
    "R_pooled",
)


def fig13_sweep(
    real: sp.spmatrix | sp.sparray,
    holdings: sp.spmatrix | sp.sparray,
    fractions: Sequence[float],
    seeds: Sequence[int],
    d: int,
    L: int,
    *,
    B: int = BYTES_PER_FLOAT32,
) -> list[dict[str, float]]:
    r"""Reproduce the Fig. 13 procedure (§9.7): cost and utilisation as the candidate set grows.

    1. :math:`\overline{\mathcal U}_0` = :func:`greedy_set_cover` of ``holdings`` (once);
    2. for every :math:`\rho` in ``fractions`` and every seed: add :math:`\mathrm{round}(\rho n)`
       random non-cover users to the candidates, draw the convolution-clients
       (:func:`~fedgraphrec.protocols.lpgcn.cover.plan_convolution`), evaluate Eqs. 30–32 on
       ``real`` (:func:`communication_report`);
    3. average over seeds. The x value of the figure is
       :math:`k\% = |\tilde{\mathcal U}| / n` — candidates that actually received a
       convolution-item — as in the authors' code.

    Args:
        real: binary real training interactions :math:`(n, m)`.
        holdings: binary real + virtual holdings :math:`(n, m)` (``real`` itself when
            :math:`\alpha = 0`).
        fractions: the :math:`\rho` values, each in :math:`[0, 1]`.
        seeds: run seeds to average over.
        d: embedding dimension.
        L: number of layers.
        B: bytes per entry (default: 4).

    Returns:
        One dict per :math:`\rho` (in the given order) with ``fraction``, ``n_seeds``, ``k``
        (mean candidates), the seed means of :class:`CommunicationReport`'s fields
        ``k_fraction``, ``convolution_fraction``, ``total_neighbours``, ``mean_neighbours``,
        ``items_per_candidate``, ``cost_bytes``, ``cost_kib``, ``cost_kb``, ``R``, ``R_pooled``, and
        the across-seed standard deviations ``cost_kib_std``, ``R_std``.

    Raises:
        ValueError: no seeds, a fraction outside :math:`[0, 1]`, or mismatched shapes.
    """
    if len(seeds) == 0:
        raise ValueError("fig13_sweep needs at least one seed")
    if real.shape != holdings.shape:
        raise ValueError(f"real {real.shape} and holdings {holdings.shape} must have the same shape")
    cover = greedy_set_cover(holdings)
    rows: list[dict[str, float]] = []
    for fraction in fractions:
        reports = [
            communication_report(
                real, plan_convolution(holdings, seed, float(fraction), cover=cover), d=d, L=L, B=B
            ).as_dict()
            for seed in seeds
        ]
        row: dict[str, float] = {
            "fraction": float(fraction),
            "n_seeds": float(len(seeds)),
            "k": float(np.mean([r["k"] for r in reports])),
        }
        for key in _AVERAGED:
            row[key] = float(np.mean([r[key] for r in reports]))
        row["cost_kib_std"] = float(np.std([r["cost_kib"] for r in reports]))
        row["R_std"] = float(np.std([r["R"] for r in reports]))
        rows.append(row)
    return rows
