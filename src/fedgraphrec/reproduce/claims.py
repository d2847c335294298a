"""The vocabulary of reproduced figures: series, claims, figures, and the claim measures.

A paper figure mostly prints no numbers, so what we check are its *claims* ("error falls as ε
grows"), each measured on our results as a share in [0, 1] (1.0: holds everywhere, as in the paper).
See :mod:`~fedgraphrec.reproduce.figures` for how figures are run and reported and
:mod:`~fedgraphrec.reproduce.paper_figures` for the registered figures.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")
import numpy as np

from fedgraphrec.reproduce.tables import Budget

__all__ = [
    "Claim",
    "Figure",
    "Results",
    "Series",
    "beats",
    "best_x_among",
    "finals",
    "last_value",
    "overlap",
    "series_points",
    "trend",
]

# series label → x → metric → mean over seeds
Results = dict[str, dict[float, dict[str, float]]]


@dataclass(frozen=True)
class Series:
    """One line of a figure: ``method`` (runner method or ``protocol[:k=v,…]``) swept over ``xs``."""

    label: str
    method: str
    xs: tuple[float, ...] = ()
    args: tuple[str, ...] = ()  # fixed runner arguments / config overrides of this series
    arg: str = ""  # the runner argument / config key of x, when not the figure's


@dataclass(frozen=True)
class Claim:
    """A qualitative statement of the paper, measured on the results (1.0 = holds everywhere)."""

    text: str
    measure: Callable[[Results, str], float]
    paper: float = 1.0
    metrics: tuple[str, ...] = ()  # judged on these metrics only (default: every metric of the figure)


@dataclass(frozen=True)
class Figure:
    """A paper figure (or grid table) we can run; ``arg`` is the runner argument / config key of x."""

    name: str
    title: str
    source: str
    dataset: str
    data_note: str
    kind: str  # train | p4gcn | dgrec
    xlabel: str
    arg: str
    metrics: tuple[str, ...]
    series: tuple[Series, ...]
    budgets: dict[str, Budget]
    claims: tuple[Claim, ...] = ()
    paper: dict[tuple[str, float], dict[str, float]] = field(default_factory=dict)
    base: tuple[str, ...] = ()  # train: config overrides shared by every series
    flat: bool = False  # dgrec: run files may also sit directly in a reuse folder
    xlog: bool = False
    pairs: tuple[tuple[str, str], ...] = ()  # series compared at their first point (:mod:`~.pairwise`)


# ---------------------------------------------------------------------------------------------
# Claim helpers: every one returns a share in [0, 1] (or nan when a series is missing).


def series_points(res: Results, label: str, metric: str) -> list[tuple[float, float]]:
    """The ``(x, value)`` points of one series and metric, by x."""
    return sorted((x, m[metric]) for x, m in res.get(label, {}).items() if metric in m)


def last_value(res: Results, label: str, metric: str) -> float:
    """The value at the series' largest x (its last epoch or sweep point); nan if absent."""
    points = series_points(res, label, metric)
    return points[-1][1] if points else math.nan


def _const(res: Results, label: str, metric: str) -> float:
    points = series_points(res, label, metric)
    return float(np.mean([v for _, v in points])) if points else math.nan


def trend(label: str, rising: bool) -> Callable[[Results, str], float]:
    """Share of consecutive sweep steps of ``label`` that move up (``rising``) or down."""

    def measure(res: Results, metric: str) -> float:
        values = np.array([v for _, v in series_points(res, label, metric)])
        steps = np.diff(values)
        return float(np.mean(steps > 0 if rising else steps < 0)) if len(steps) else math.nan

    return measure


def beats(a: str, b: str, lower: bool, xs: Sequence[float] | None = None) -> Callable[[Results, str], float]:
    """Share of x (``xs``, or every x of either) where ``a`` is better than ``b``.

    A series with one point is a reference (constant); ``lower``: smaller is better (errors).
    """

    def measure(res: Results, metric: str) -> float:
        pa, pb = dict(series_points(res, a, metric)), dict(series_points(res, b, metric))
        ref_a = _const(res, a, metric) if len(pa) == 1 else math.nan
        ref_b = _const(res, b, metric) if len(pb) == 1 else math.nan
        wins = []
        for x in sorted(x for x in {*pa, *pb} if not math.isnan(x) and (xs is None or x in xs)):
            u, w = pa.get(x, ref_a), pb.get(x, ref_b)
            if not (math.isnan(u) or math.isnan(w)):
                wins.append(u < w if lower else u > w)
        return float(np.mean(wins)) if wins else math.nan

    return measure


def best_x_among(label: str, lower: bool, allowed: Sequence[float]) -> Callable[[Results, str], float]:
    """1.0 when the best x of ``label`` (at its last point) is one of ``allowed``."""

    def measure(res: Results, metric: str) -> float:
        points = series_points(res, label, metric)
        if not points:
            return math.nan
        best = (min if lower else max)(points, key=lambda p: p[1])[0]
        return float(best in allowed)

    return measure


def finals(labels: Sequence[str], lower: bool) -> Callable[[Results, str], float]:
    """1.0 when the first label's last value is the best of ``labels``' last values."""

    def measure(res: Results, metric: str) -> float:
        values = [last_value(res, lab, metric) for lab in labels]
        if any(math.isnan(v) for v in values):
            return math.nan
        best = min(values) if lower else max(values)
        return float(values[0] == best)

    return measure


def overlap(a: str, b: str, tol: float = 5e-5) -> Callable[[Results, str], float]:
    """Share of common x where ``a`` and ``b`` agree within ``tol`` (the curves overlap)."""

    def measure(res: Results, metric: str) -> float:
        pa, pb = dict(series_points(res, a, metric)), dict(series_points(res, b, metric))
        common = sorted(set(pa) & set(pb))
        return float(np.mean([abs(pa[x] - pb[x]) <= tol for x in common])) if common else math.nan

    return measure
