"""Differences between two rows of a reproduced table, with their sign and standard error.

A table's verdict column compares each row with the paper; a reader also needs to know whether one
of *our* rows is above another (DGREC against DMF, an ablation against full DGREC, a method against
the popularity ranking). :func:`pairwise` gives, per pair ``(a, b)`` and metric, the difference of
the means over seeds, its standard error ``σ = sqrt(s_a²/n_a + s_b²/n_b)`` (sample std over seeds;
a row with one seed contributes no spread, so one-seed pairs are flagged) and a reading: ``above``
or ``below`` when the difference exceeds 2σ, else ``within noise``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["pairwise", "pairwise_markdown"]


def pairwise(
    values: Mapping[str, Sequence[Mapping[str, float]]],
    pairs: Sequence[tuple[str, str]],
    metrics: Sequence[str] = ("recall@20",),
) -> list[dict[str, Any]]:
    """One record per pair and metric: ``a − b`` over seeds, its σ, ``diff/σ`` and the reading.

    Args:
        values: row label → one metric dict per seed.
        pairs: ``(a, b)`` label pairs; a pair with a label missing from ``values`` is skipped.
        metrics: the metrics compared.
    """
    out = []
    for a, b in pairs:
        if a not in values or b not in values:
            continue
        for m in metrics:
            va = np.array([v.get(m, math.nan) for v in values[a]], dtype=float)
            vb = np.array([v.get(m, math.nan) for v in values[b]], dtype=float)
            diff = float(va.mean() - vb.mean())
            var = sum(float(v.var(ddof=1)) / len(v) for v in (va, vb) if len(v) > 1)
            sigma = math.sqrt(var)
            if sigma > 0:
                reading = "above" if diff > 2 * sigma else "below" if diff < -2 * sigma else "within noise"
            else:
                reading = "above" if diff > 0 else "below" if diff < 0 else "equal"
            out.append(
                {
                    "a": a,
                    "b": b,
                    "metric": m,
                    "diff": diff,
                    "sigma": sigma,
                    "z": diff / sigma if sigma > 0 else math.nan,
                    "seeds": [len(va), len(vb)],
                    "reading": reading + ("" if min(len(va), len(vb)) > 1 or sigma > 0 else " (no spread)"),
                }
            )
    return out


def pairwise_markdown(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Markdown lines of a :func:`pairwise` result (×100 for the recall/ndcg fractions)."""
    if not rows:
        return []
    lines = [
        "",
        "Differences between our rows (mean over seeds; σ = standard error of the difference; "
        "above / below = beyond 2σ), ×100:",
        "",
        "| a | b | metric | a − b | σ | (a − b)/σ | seeds | reading |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        z = "–" if math.isnan(r["z"]) else f"{r['z']:+.1f}"
        diff, sigma = f"{100 * r['diff']:+.2f}", f"{100 * r['sigma']:.2f}"
        lines.append(
            f"| {r['a']} | {r['b']} | {r['metric']} | {diff} | {sigma} | {z} | "
            f"{r['seeds'][0]} / {r['seeds'][1]} | {r['reading']} |"
        )
    return lines
