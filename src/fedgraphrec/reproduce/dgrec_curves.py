"""Per-epoch curves of DGREC runner runs beside the reference rankings and the paper's numbers.

The question "does one-bit DGREC learn at this budget?" is read from these: each variant's test
recall@20 and ndcg@20 at every evaluated epoch (mean over seeds, the band ± one sample std where
there are several), the validation-selected epoch of each run marked, and three horizontal lines
per panel: random ranking and train popularity on the same split (the runner's reference rows) and
the paper's DGREC number. :func:`curves_table` is the same data as a markdown table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

from fedgraphrec.reproduce.dgrec_runs import run_groups
from fedgraphrec.reproduce.report import reported

__all__ = ["METRICS", "REFERENCE_VARIANTS", "curves_table", "plot_curves"]

METRICS = ("recall@20", "ndcg@20")
REFERENCE_VARIANTS = ("random", "popularity")
REFERENCE_LINES = (("--", "random", "random ranking"), ("-.", "popularity", "train popularity"))


def _series(runs: Sequence[Mapping[str, Any]], metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(epochs, mean, sample std) of ``metric`` over the runs' common evaluated epochs."""
    per_run = [{c["epoch"]: c["test"][metric] for c in r["curve"] if "test" in c} for r in runs]
    epochs = np.array(sorted(set.intersection(*(set(p) for p in per_run))))
    values = np.array([[p[e] for e in epochs] for p in per_run])
    std = values.std(0, ddof=1) if len(values) > 1 else np.zeros(len(epochs))
    return epochs, values.mean(0), std


def _load(folder: str | Path, dataset: str) -> tuple[dict[str, list[dict[str, Any]]], dict[str, float]]:
    """Trained variants' runs (with curves) and the reference rankings' mean metrics."""
    groups = run_groups(folder, lambda r: (r["dataset"], r["variant"]))
    trained = {v: rs for (d, v), rs in groups.items() if d == dataset and v not in REFERENCE_VARIANTS}
    trained = {v: [r for r in rs if r.get("curve")] for v, rs in trained.items()}
    refs = {
        f"{v} {m}": float(np.mean([reported(r)[m] for r in rs]))
        for (d, v), rs in groups.items()
        if d == dataset and v in REFERENCE_VARIANTS
        for m in METRICS
    }
    return {v: rs for v, rs in trained.items() if rs}, refs


def plot_curves(
    folder: str | Path, dataset: str, out: str | Path, paper: Mapping[str, float], title: str = ""
) -> Path:
    """Write the figure of every run of ``dataset`` in ``folder`` (module doc); its path.

    ``paper``: the paper's DGREC numbers as fractions, by metric (drawn as dotted lines).

    Raises:
        ValueError: the folder holds no run of ``dataset`` with a per-epoch curve.
    """
    trained, refs = _load(folder, dataset)
    if not trained:
        raise ValueError(f"{folder}: no run of {dataset!r} with a per-epoch curve")
    fig, axes = plt.subplots(1, len(METRICS), figsize=(6.2 * len(METRICS), 4.4), squeeze=False)
    colours = plt.get_cmap("tab10")
    for ax, metric in zip(axes[0], METRICS, strict=True):
        for k, (variant, runs) in enumerate(sorted(trained.items())):
            epochs, mean, std = _series(runs, metric)
            label = f"{variant} ({len(runs)} seed{'s' if len(runs) > 1 else ''})"
            ax.plot(epochs, 100 * mean, color=colours(k), label=label)
            if len(runs) > 1:
                ax.fill_between(epochs, 100 * (mean - std), 100 * (mean + std), color=colours(k), alpha=0.2)
            for r in runs:
                if "selected_epoch" in r:
                    ax.plot(r["selected_epoch"], 100 * r["selected_metrics"][metric], "o", color=colours(k))
        for style, key, name in (
            ("--", "random", "random ranking"),
            ("-.", "popularity", "train popularity"),
        ):
            if f"{key} {metric}" in refs:
                ax.axhline(100 * refs[f"{key} {metric}"], color="grey", linestyle=style, label=name)
        if metric in paper:
            ax.axhline(100 * paper[metric], color="black", linestyle=":", label="paper's DGREC")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("epoch (every user a group centre once)")
        ax.set_ylabel(f"test {metric} (%)")
        ax.set_title(f"{metric}; dots: epoch selected on validation")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8, loc="best")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(out)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def curves_table(folder: str | Path, dataset: str, every: int = 5) -> str:
    """Markdown: each variant's mean test recall@20 / ndcg@20 (%) at every ``every``-th epoch."""
    trained, refs = _load(folder, dataset)
    lines = ["| variant | seeds | epoch | recall@20 | ndcg@20 |", "|---|---|---|---|---|"]
    for variant, runs in sorted(trained.items()):
        e, rec, rec_sd = _series(runs, "recall@20")
        _, ndcg, _ = _series(runs, "ndcg@20")
        for j in range(len(e)):
            if e[j] == 1 or e[j] % every == 0 or j == len(e) - 1:
                cell = f"{100 * rec[j]:.2f}" + (f" ± {100 * rec_sd[j]:.2f}" if len(runs) > 1 else "")
                lines.append(f"| {variant} | {len(runs)} | {e[j]} | {cell} | {100 * ndcg[j]:.2f} |")
    for key in REFERENCE_VARIANTS:
        if f"{key} recall@20" in refs:
            r20, n20 = (100 * refs[f"{key} {m}"] for m in METRICS)
            lines.append(f"| {key} | – | – | {r20:.2f} | {n20:.2f} |")
    return "\n".join(lines) + "\n"
