"""Plots of a run folder (matplotlib, headless): learning curves, the ledger, labelled scatters.

``curves.png`` has one panel per metric family (the training loss, then Recall@K, NDCG@K,
Precision@K, hit rate@K, RMSE, MAE, ... as the run evaluated them), one colour per series (split ×
K) and the selected epoch marked in every panel, so the epoch the summary reports is the one the
reader sees. :func:`label_points` and :func:`bytes_axis` keep the labels of the frontier scatters
inside the figure and apart.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.text import Annotation
from matplotlib.ticker import EngFormatter, LogLocator, MaxNLocator, NullFormatter

if TYPE_CHECKING:
    from fedgraphrec.runtime.ledger import Ledger

__all__ = ["FAMILY_TITLES", "bytes_axis", "curves_figure", "label_points", "plot_curves", "plot_ledger"]

#: Panel title of each known metric family, in panel order; other families follow, sorted.
FAMILY_TITLES = {
    "loss": "training loss",
    "recall": "Recall@K",
    "ndcg": "NDCG@K",
    "precision": "Precision@K",
    "hit": "hit rate@K",
    "rmse": "RMSE",
    "mae": "MAE",
}
SPLITS = (("test", "-"), ("valid", "--"))  # one line style per split
SELECTED_GID = "selected-epoch"


def metric_families(history: Sequence[dict[str, Any]]) -> dict[str, list[str]]:
    """``family -> metric names`` evaluated in ``history`` (``recall -> [recall@10, recall@20]``).

    A family is the part of a metric's name before ``@``; families come in :data:`FAMILY_TITLES`'s
    order, then alphabetically; names within one by their K.
    """
    names: dict[str, None] = {}
    for record in history:
        for split, _ in SPLITS:
            for name, value in (record.get(split) or {}).items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    names[name] = None
    families: dict[str, list[str]] = {}
    for name in names:
        families.setdefault(name.split("@")[0], []).append(name)
    order = list(FAMILY_TITLES)
    ranked = sorted(families, key=lambda f: (order.index(f) if f in order else len(order), f))

    def k_of(name: str) -> float:
        tail = name.partition("@")[2]
        return float(tail) if tail.isdigit() else math.inf

    return {f: sorted(families[f], key=k_of) for f in ranked}


def curves_figure(
    history: Sequence[dict[str, Any]], title: str = "", selected_epoch: int | None = None
) -> Figure:
    """The learning curves of ``history`` as a figure: one panel per metric family.

    Args:
        history: records as written to ``metrics.jsonl`` (``epoch``, ``loss``, ``valid``/``test`` dicts).
        title: figure title (e.g. ``"lightgcn on ml-100k"``).
        selected_epoch: the epoch the summary reports (best validation, or the last); a dotted
            vertical line labelled with it in every panel.
    """
    families = metric_families(history)
    panels = ["loss", *families]
    ncols = min(len(panels), 3)
    nrows = math.ceil(len(panels) / ncols)
    fig, grid = plt.subplots(
        nrows, ncols, figsize=(4.6 * ncols, 3.4 * nrows), squeeze=False, layout="constrained"
    )
    axes = list(grid.flat)
    for spare in axes[len(panels) :]:
        fig.delaxes(spare)
    for ax, family in zip(axes, panels, strict=False):
        if family == "loss":
            trained = [r for r in history if r.get("loss") is not None]
            ax.plot([r["epoch"] for r in trained], [r["loss"] for r in trained], color="C0", label="train")
            ax.set_ylabel("mean training loss")
        else:
            series = [
                (split, style, name)
                for name in families[family]
                for split, style in SPLITS
                if any(isinstance((r.get(split) or {}).get(name), (int, float)) for r in history)
            ]
            colours = _colours(len(series))
            for (split, style, name), colour in zip(series, colours, strict=True):
                rows = [r for r in history if isinstance((r.get(split) or {}).get(name), (int, float))]
                ax.plot(
                    [r["epoch"] for r in rows],
                    [r[split][name] for r in rows],
                    style,
                    color=colour,
                    label=f"{split} {name}",
                )
            ax.set_ylabel(FAMILY_TITLES.get(family, family))
        ax.set_title(FAMILY_TITLES.get(family, family))
        ax.set_xlabel("epoch")
        ax.grid(alpha=0.3)
        if selected_epoch is not None:
            ax.axvline(
                selected_epoch, color="k", linestyle=":", label=f"selected epoch {selected_epoch}"
            ).set_gid(SELECTED_GID)
        if ax.lines:
            ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    return fig


def plot_curves(
    history: Sequence[dict[str, Any]],
    path: str | Path,
    title: str = "",
    selected_epoch: int | None = None,
) -> Path:
    """Write :func:`curves_figure` of ``history`` to ``path`` (a PNG); returns ``path``."""
    return _save(curves_figure(history, title, selected_epoch), Path(path), "")


def bytes_axis(ax: Axes, values: Sequence[float], label: str) -> None:
    """Put byte counts on ``ax``'s x axis without crowded tick labels.

    Over a decade or more: a log scale with labelled decades only (never the minor ticks, whose
    labels collide); within one decade: a linear scale with at most five SI-prefixed labels.
    """
    positive = [v for v in values if v > 0]
    low, high = min(positive, default=1.0), max(positive, default=1.0)
    if high / low >= 10:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=10, numticks=7))
        ax.xaxis.set_minor_formatter(NullFormatter())
    else:
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
        ax.xaxis.set_major_formatter(EngFormatter(unit="B", places=1, sep=" "))
    ax.set_xlabel(label)


def label_points(
    ax: Axes, points: Sequence[tuple[float, float, str]], fontsize: float = 7, width: int = 24
) -> list[Annotation]:
    """Label the data points ``(x, y, text)`` of ``ax`` so every label is readable.

    Call once the figure is otherwise complete (scales, limits, titles). Long labels wrap at
    ``width`` characters instead of being cut; a label sits right of its point in the left part of
    the axes and left of it in the right part, below it near the top; labels that overlap are pushed
    apart vertically and every label is kept inside the figure. The labels do not take part in the
    figure's layout, so placing them does not move the axes they were placed on.
    """
    fig = ax.get_figure(root=True)
    assert isinstance(fig, Figure)
    ax.margins(x=0.08, y=0.14)
    ax.get_xlim(), ax.get_ylim()  # settle the autoscaled limits before reading positions
    fig.canvas.draw()  # runs the layout engine: the axes are where they will be drawn
    to_axes = ax.transScale + ax.transLimits
    notes = []
    for x, y, text in points:
        fx, fy = to_axes.transform((x, y))
        right, top = fx > 0.6, fy > 0.8
        note = ax.annotate(
            textwrap.fill(text, width),
            (x, y),
            xytext=(-5 if right else 5, -5 if top else 4),
            textcoords="offset points",
            ha="right" if right else "left",
            va="top" if top else "bottom",
            fontsize=fontsize,
        )
        note.set_in_layout(False)
        notes.append(note)
    _separate(fig, notes)
    return notes


def _separate(fig: Figure, notes: Sequence[Annotation], passes: int = 60) -> None:
    """Shift overlapping labels apart vertically and back inside ``fig`` (offsets in points)."""
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    frame = fig.bbox
    to_points = 72.0 / fig.dpi
    for _ in range(passes):
        moved = False
        boxes = [n.get_window_extent(renderer) for n in notes]
        for i, note in enumerate(notes):
            box = boxes[i]
            dy = 0.0
            for j in range(i):
                other = boxes[j]
                if box.overlaps(other):
                    above = box.y0 + box.y1 >= other.y0 + other.y1
                    dy = (other.y1 - box.y0 + 2) if above else -(box.y1 - other.y0 + 2)
                    break
            dx = max(frame.x0 + 2 - box.x0, 0.0) - max(box.x1 - (frame.x1 - 2), 0.0)
            if box.y1 + dy > frame.y1 - 2 or box.y0 + dy < frame.y0 + 2:  # no room there: other way
                dy = -dy if dy else max(frame.y0 + 2 - box.y0, 0.0) - max(box.y1 - (frame.y1 - 2), 0.0)
            if dx or dy:
                ox, oy = note.xyann
                note.xyann = (ox + dx * to_points, oy + dy * to_points)
                boxes[i] = note.get_window_extent(renderer)
                moved = True
        if not moved:
            return


def _colours(n: int) -> list[Any]:
    """``n`` distinct colours: the default cycle while it lasts, else evenly spaced on a colour map."""
    if n <= 10:
        return [f"C{i}" for i in range(n)]
    return [plt.cm.turbo(x) for x in np.linspace(0.05, 0.95, n)]


def plot_ledger(ledger: Ledger, path: str | Path, title: str = "") -> Path:
    """Bytes per (sender → receiver) role pair, and the distribution of bytes per client."""
    path = Path(path)
    pairs: dict[str, int] = {}
    for r in ledger.rows():
        key = f"{r.sender}→{r.receiver}"
        pairs[key] = pairs.get(key, 0) + r.payload_bytes
    fig, (ax_pairs, ax_clients) = plt.subplots(1, 2, figsize=(11, 4))
    names = sorted(pairs, key=pairs.__getitem__)
    scale, unit = _unit(max(pairs.values(), default=0))
    ax_pairs.barh(names, [pairs[k] / scale for k in names], color="tab:blue")
    ax_pairs.set_xlabel(unit)
    ax_pairs.set_title("bytes by role pair")
    raw = ledger.client_sent + ledger.client_received
    scale, unit = _unit(int(raw.max()) if len(raw) else 0)
    per_client = raw / scale
    if len(per_client):
        ax_clients.hist(per_client, bins=min(50, max(5, len(per_client) // 20)), color="tab:green")
        ax_clients.axvline(float(np.mean(per_client)), color="k", linestyle="--", label="mean")
        ax_clients.legend(fontsize=8)
    ax_clients.set_xlabel(f"{unit} sent + received")
    ax_clients.set_ylabel("clients")
    ax_clients.set_title("bytes per client")
    return _save(fig, path, title)


def _save(fig: Figure, path: Path, title: str) -> Path:
    """Title (if any), lay out, write and close ``fig``; returns ``path``."""
    if title:
        fig.suptitle(title)
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _unit(n_bytes: int) -> tuple[float, str]:
    for power, unit in ((3, "GiB"), (2, "MiB"), (1, "KiB")):
        if n_bytes >= 2 ** (10 * power):
            return float(2 ** (10 * power)), unit
    return 1.0, "bytes"
