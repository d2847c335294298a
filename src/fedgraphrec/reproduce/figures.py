"""Paper figures (and grid tables) reproduced: ``fedgraphrec reproduce lpgcn-f10`` and friends.

A :class:`Figure` is a set of *series*, each a method of one runner (``train``: the ordinary
:class:`~fedgraphrec.training.trainer.Trainer`, ``p4gcn``: :mod:`~.p4gcn_table`, ``dgrec``:
:mod:`~.dgrec`) that is either swept over an x axis (one run per x and seed, ``arg=x``), a curve over
epochs (``xs=()`` on a ``train`` series: its ``metrics.jsonl``) or a constant reference (``xs=()`` on
a runner series: one run, drawn as a dashed line). Most of these figures print no numbers, so the
report's cells are the paper's *claims* ("error falls as ε grows": the share of sweep steps that move
that way, 1.0 in the paper), judged by :func:`~.reproduce.verdict` beside any printed numbers
(FedGRec Tables 3–4, DGREC Table 3). :func:`reproduce_figure` writes ``figure.png`` (the curves,
ours) beside the usual ``reproduce.md`` / ``.json`` / ``.png``.

Runs go to ``OUT/runs/<series>/<arg><x>[-s<seed>]`` and are not run again when present (resume);
``reuse=`` names folders to read them from instead (or, for a ``flat`` DGREC figure, the committed
run files of ``results/dgrec/runs``; for a curve, ``metrics.jsonl`` files or FedGRec comparison JSONs,
one per series in order).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from fedgraphrec.reproduce.claims import Figure, Results, Series, series_points
from fedgraphrec.reproduce.pairwise import pairwise
from fedgraphrec.reproduce.paper_figures import FIGURES
from fedgraphrec.reproduce.report import PaperRow, paper_cells, reported, write_report
from fedgraphrec.reproduce.tables import Budget

__all__ = ["reproduce_figure", "train_overrides"]

# ---------------------------------------------------------------------------------------------
# Running and reporting.


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.=+-]+", "_", text).strip("_") or "series"


def _values_train(folder: Path, metrics: Sequence[str], curve: bool) -> dict[float, dict[str, float]]:
    """Test metrics of one trainer run: the summary's (a sweep point) or every epoch's (a curve)."""
    if not curve:
        test = json.loads((folder / "summary.json").read_text())["test"]
        return {math.nan: {m: float(test[m]) for m in metrics if m in test}}
    return _read_curve(folder / "metrics.jsonl", metrics)


def _read_curve(path: Path, metrics: Sequence[str]) -> dict[float, dict[str, float]]:
    points: dict[float, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        test = rec.get("test") or {}
        vals = {m: float(test.get(m, rec.get(m))) for m in metrics if test.get(m, rec.get(m)) is not None}
        if test and vals:
            points[float(rec["epoch"])] = vals
    return points


def _reused_curves(fig: Figure, files: Sequence[Path]) -> Results:
    """Curves from files: ``metrics.jsonl`` per series in order, or FedGRec comparison JSONs."""
    res: Results = {}
    for s, path in zip(fig.series, files, strict=False):
        if path.suffix == ".jsonl":
            res[s.label] = _read_curve(path, fig.metrics)
    for path in (p for p in files if p.suffix == ".json"):
        ours = json.loads(path.read_text()).get("ours", {})
        for s in fig.series:
            if s.label in ours:
                res[s.label] = {
                    float(r[0]): dict(zip(("recall@20", "ndcg@20"), map(float, r[1:3]), strict=True))
                    for r in ours[s.label]["curve"]
                }
    missing = [s.label for s in fig.series if s.label not in res]
    if missing:
        raise FileNotFoundError(f"{fig.name}: no curve of {missing} in {', '.join(map(str, files))}")
    return res


def _point(
    fig: Figure, s: Series, x: float | None, seed: int, plan: Budget, roots: list[Path], reuse: bool
) -> dict[float, dict[str, float]]:
    """Run (or find) one point of ``s`` and return its values (x → metric → value)."""
    from fedgraphrec.reproduce.runs import run_file, train_runner

    arg = s.arg or fig.arg
    sub = Path(_slug(s.label)) / (f"{_slug(arg)}{_fmt(x)}" if x is not None else "ref")
    if fig.kind == "train":
        sub = sub.with_name(f"{sub.name}-s{seed}")
        found = next((r / sub for r in roots if (r / sub / "summary.json").exists()), None)
        if found is None:
            if reuse:
                raise FileNotFoundError(f"no run of {s.label} in {', '.join(map(str, roots))} ({sub})")
            found = roots[0] / sub
            _train_config(fig, s, x, seed, plan, found)
        values = _values_train(found, fig.metrics, curve=x is None)
        return values if x is None else {x: values[math.nan]}
    ratio = x if x is not None and arg == "--public-ratio" else 1.0
    name = run_file(fig.kind, fig.dataset, s.method, seed, ratio)
    candidates = [r / sub / name for r in roots] + ([r / name for r in roots] if fig.flat else [])
    path = next((p for p in candidates if p.exists()), None)
    if path is None:
        if reuse:
            raise FileNotFoundError(f"no run of {s.label} (seed {seed}) in {', '.join(map(str, roots))}")
        extra = (arg, _fmt(x)) if x is not None else ()
        train_runner(
            fig.kind, fig.dataset, s.method, seed, (*plan.overrides, *s.args, *extra), roots[0] / sub
        )
        path = roots[0] / sub / name
    run = json.loads(path.read_text())
    if fig.kind == "p4gcn":
        vals = {"rmse": float(run["test_rmse"]), "mae": float(run["test_mae"])}
    else:
        vals = {k: float(v) for k, v in reported(run).items()}
    return {x if x is not None else math.nan: vals}


def train_overrides(
    fig: Figure, s: Series, x: float | None, seed: int, plan: Budget
) -> tuple[str, list[str]]:
    """(protocol, config overrides) of one trainer point: dataset, base, budget, series, x, seed."""
    from fedgraphrec.reproduce.compare import parse_method

    spec = parse_method(s.method)
    point = [f"{s.arg or fig.arg}={_fmt(x)}"] if x is not None else []
    over = [f"dataset={fig.dataset}", *fig.base, *plan.overrides, *spec.overrides, *s.args, *point]
    return spec.protocol, [*over, f"seed={seed}"]


def _train_config(fig: Figure, s: Series, x: float | None, seed: int, plan: Budget, folder: Path) -> None:
    from fedgraphrec.training.loading import load_config
    from fedgraphrec.training.trainer import Trainer

    protocol, over = train_overrides(fig, s, x, seed, plan)
    Trainer(load_config(None, over, protocol=protocol), folder).fit()


def reproduce_figure(
    name: str, out_dir: str | Path, *, budget: str = "cpu", reuse: Sequence[str | Path] = ()
) -> dict[str, Any]:
    """Run (or, with ``reuse``, collect) figure ``name`` and write the report and ``figure.png``.

    Raises:
        KeyError: unknown figure or budget.
        FileNotFoundError: ``reuse`` lacks a run of a series.
    """
    if name not in FIGURES:
        raise KeyError(f"unknown table {name!r}; available: {', '.join(FIGURES)}")
    fig = FIGURES[name]
    if budget not in fig.budgets:
        raise KeyError(f"table {name} has budgets {', '.join(fig.budgets)}, not {budget!r}")
    plan, out = fig.budgets[budget], Path(out_dir)
    paths = [Path(p) for p in reuse]
    files = [p for p in paths if p.is_file()]
    roots = [p for p in paths if not p.is_file()] or [out / "runs"]
    per_seed: dict[str, dict[float, list[dict[str, float]]]] = {}
    if files:
        res = _reused_curves(fig, files)
        per_seed = {lab: {x: [v] for x, v in pts.items()} for lab, pts in res.items()}
    else:
        for s in fig.series:
            for seed in plan.seeds:
                for x in s.xs or (None,):
                    for px, vals in _point(fig, s, x, seed, plan, roots, bool(reuse)).items():
                        per_seed.setdefault(s.label, {}).setdefault(px, []).append(vals)
    res, std = _mean_std(per_seed)
    rows = []
    for (label, x), paper in fig.paper.items():
        mean_std = {m: (res[label][x].get(m, math.nan), std[label][x].get(m, 0.0)) for m in paper}
        row = PaperRow(f"{label} @ {fig.xlabel} = {_fmt(x)}", label, paper)
        rows.append({"row": row.label, "method": label, "cells": paper_cells(row, mean_std)})
    for claim in fig.claims:
        for metric in claim.metrics or fig.metrics:
            row = PaperRow(f"{claim.text} ({metric})", "claim", {"claim": claim.paper})
            value = claim.measure(res, metric)
            rows.append(
                {"row": row.label, "method": "claim", "cells": paper_cells(row, {"claim": (value, 0.0)})}
            )
    report = {
        "table": fig.name,
        "title": fig.title,
        "source": fig.source,
        "data": fig.data_note,
        "budget": budget,
        "budget_note": _note(fig, plan, paths, res if files else None),
        "seeds": list(plan.seeds),
        "overrides": [],
        "rows": rows,
        "points": {lab: {_fmt(x): v for x, v in pts.items()} for lab, pts in res.items()},
        "points_std": {lab: {_fmt(x): v for x, v in pts.items()} for lab, pts in std.items()},
        "pairwise": pairwise(
            {lab: next(iter(pts.values())) for lab, pts in per_seed.items() if pts}, fig.pairs, fig.metrics
        ),
    }
    write_report(report, out)
    _points_md(fig, res, std, out / "reproduce.md")
    _curves(fig, res, out / "figure.png")
    return report


def _note(fig: Figure, plan: Budget, paths: Sequence[Path], curves: Results | None) -> str:
    """The budget note; read curves were made elsewhere, so their note says how far they go."""
    where = ", ".join(map(str, paths))
    if curves is not None:
        last = max(x for pts in curves.values() for x in pts)
        return f"curves read from {where} (up to {fig.xlabel} {_fmt(last)}), not run at this budget"
    return plan.note + (f" (runs from {where})" if paths else "")


def _mean_std(per_seed: dict[str, dict[float, list[dict[str, float]]]]) -> tuple[Results, Results]:
    mean: Results = {}
    std: Results = {}
    for label, pts in per_seed.items():
        for x, runs in pts.items():
            metrics = sorted({m for r in runs for m in r})
            vals = {m: np.array([r.get(m, math.nan) for r in runs]) for m in metrics}
            mean.setdefault(label, {})[x] = {m: float(v.mean()) for m, v in vals.items()}
            std.setdefault(label, {})[x] = {
                m: float(v.std(ddof=1)) if len(v) > 1 else 0.0 for m, v in vals.items()
            }
    return mean, std


def _points_md(fig: Figure, res: Results, std: Results, path: Path) -> None:
    """Append our points (mean ± std over seeds; a reference has x = –) to the report's markdown."""
    lines = ["", f"Ours, per point (`figure.png`; x = {fig.xlabel}):", ""]
    lines += [f"| series | x | {' | '.join(fig.metrics)} |", "|---|---|" + "---|" * len(fig.metrics)]
    for label, pts in res.items():
        step = max(1, len(pts) // 12)  # long curves: about a dozen rows
        keys = sorted(pts)
        for x in keys[::step] + ([keys[-1]] if (len(keys) - 1) % step else []):
            cells = [
                f"{pts[x][m]:.4f} ± {std[label][x].get(m, 0.0):.4f}" if m in pts[x] else "–"
                for m in fig.metrics
            ]
            lines.append(f"| {label} | {'–' if math.isnan(x) else _fmt(x)} | {' | '.join(cells)} |")
    with path.open("a") as f:
        f.write("\n".join(lines) + "\n")


def _curves(fig: Figure, res: Results, path: Path) -> None:
    """One panel per metric: a line per swept series or curve, a dashed line per reference."""
    panels, axes = plt.subplots(1, len(fig.metrics), figsize=(4.5 * len(fig.metrics), 3.6))
    for ax, metric in zip(np.atleast_1d(axes), fig.metrics, strict=True):
        for i, s in enumerate(fig.series):
            points = [(x, v) for x, v in series_points(res, s.label, metric) if not math.isnan(x)]
            ref = [
                v
                for x, m in res.get(s.label, {}).items()
                if math.isnan(x)
                for k, v in m.items()
                if k == metric
            ]
            if points:
                xs, ys = zip(*points, strict=True)
                style = ("-", "--", ":", "-.")[i % 4]  # curves that coincide stay visible
                ax.plot(xs, ys, style, marker="o" if len(xs) < 30 else None, label=s.label, color=f"C{i}")
            for v in ref:
                ax.axhline(v, linestyle="--", label=s.label, color=f"C{i}")
        if fig.xlog:
            ax.set_xscale("log")
        ax.set_xlabel(fig.xlabel)
        ax.set_ylabel(metric)
        ax.legend(fontsize=7)
    panels.suptitle(f"{fig.title} (ours)", fontsize=9)
    panels.tight_layout()
    panels.savefig(path, dpi=120)
    plt.close(panels)
