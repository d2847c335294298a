"""The run folder's plots say what they show: curves.png and the frontier scatters.

``curves.png``: one panel per metric family, distinct colours, axis labels, a legend and the selected
epoch marked; the Trainer marks the epoch its summary reports. The frontier plots: every text lies
inside the figure, and no two labels (nor two tick labels) overlap — checked on the committed
frontiers and on a crowded stress case with long names at the edges.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import matplotlib.image
import matplotlib.pyplot as plt
import pytest
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.text import Text

import fedgraphrec.training.trainer as trainer_module
from fedgraphrec.reproduce.frontier import frontier_figure
from fedgraphrec.reproduce.frontier_social import social_figure
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.plots import SELECTED_GID, curves_figure, metric_families, plot_curves
from fedgraphrec.training.trainer import Trainer

ROOT = Path(__file__).resolve().parents[2]


def _ranking_history(epochs: int = 6) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    for e in range(1, epochs + 1):
        metrics = {f"{m}@{k}": e / (10 * k) for m in ("precision", "recall", "ndcg", "hit") for k in (10, 20)}
        history.append({"epoch": e, "loss": 1 / e, "test": dict(metrics), "valid": dict(metrics)})
    return history


def _panels(fig: Figure) -> dict[str, Any]:
    return {ax.get_title(): ax for ax in fig.axes}


def _series(ax: Any) -> list[Any]:
    return [line for line in ax.lines if line.get_gid() != SELECTED_GID]


def test_one_panel_per_metric_family_with_labels_legend_and_distinct_colours() -> None:
    fig = curves_figure(_ranking_history(), title="lpgcn on synthetic", selected_epoch=4)
    panels = _panels(fig)
    assert list(panels) == ["training loss", "Recall@K", "NDCG@K", "Precision@K", "hit rate@K"]
    for title, ax in panels.items():
        assert ax.get_xlabel() == "epoch" and ax.get_ylabel(), title
        assert ax.get_legend() is not None, title
        colours = [to_rgba(line.get_color()) for line in _series(ax)]
        assert len(set(colours)) == len(colours), f"{title}: two series share a colour"
    labels = [line.get_label() for line in _series(panels["Recall@K"])]
    assert labels == ["test recall@10", "valid recall@10", "test recall@20", "valid recall@20"]
    assert fig.get_suptitle() == "lpgcn on synthetic"
    plt.close(fig)


def test_the_selected_epoch_is_marked_in_every_panel() -> None:
    fig = curves_figure(_ranking_history(), selected_epoch=4)
    for title, ax in _panels(fig).items():
        marks = [line for line in ax.lines if line.get_gid() == SELECTED_GID]
        assert len(marks) == 1, title
        assert list(marks[0].get_xdata()) == [4, 4] and marks[0].get_label() == "selected epoch 4"
        assert "selected epoch 4" in [t.get_text() for t in ax.get_legend().get_texts()]
    plt.close(fig)
    fig = curves_figure(_ranking_history())
    assert not any(line.get_gid() == SELECTED_GID for ax in fig.axes for line in ax.lines)
    plt.close(fig)


def test_a_rating_run_plots_rmse_and_mae() -> None:
    history = [
        {"epoch": e, "loss": 2.0 / e, "valid": {"rmse": 1.2 / e, "mae": 0.9 / e}, "test": {"rmse": 1.1 / e}}
        for e in (1, 2, 3)
    ]
    assert metric_families(history) == {"rmse": ["rmse"], "mae": ["mae"]}
    fig = curves_figure(history, selected_epoch=2)
    panels = _panels(fig)
    assert list(panels) == ["training loss", "RMSE", "MAE"]
    assert [line.get_label() for line in _series(panels["RMSE"])] == ["test rmse", "valid rmse"]
    assert [line.get_label() for line in _series(panels["MAE"])] == ["valid mae"]
    plt.close(fig)


def test_plot_curves_writes_a_png(tmp_path: Path) -> None:
    path = plot_curves(_ranking_history(), tmp_path / "curves.png", "t", selected_epoch=3)
    image = matplotlib.image.imread(path)
    assert image.ndim == 3 and image.shape[0] > 300 and image.shape[1] > 900


def test_the_trainer_marks_the_epoch_its_summary_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}
    real = trainer_module.plot_curves

    def spy(history: Any, path: Any, *args: Any, **kwargs: Any) -> Path:
        seen.update(kwargs)
        return real(history, path, *args, **kwargs)

    monkeypatch.setattr(trainer_module, "plot_curves", spy)
    cfg = load_config(
        None,
        [
            "dataset=synthetic",
            "dataset_options.n_users=40",
            "dataset_options.n_items=50",
            "dim=8",
            "n_layers=1",
            "eval.valid_fraction=0.2",
        ],
        protocol="central",
        epochs=3,
    )
    result = Trainer(cfg, tmp_path / "run", progress=False).fit()
    assert seen["selected_epoch"] == result.summary["selected_epoch"] is not None
    assert (tmp_path / "run" / "curves.png").exists()


# ------------------------------------------------------------------------------------------ frontier
def _tick_labels(axis: Any) -> list[Text]:
    """The labels of the ticks ``axis`` draws (matplotlib also keeps ticks outside the view)."""
    low, high = sorted(axis.get_view_interval())
    index = 0 if axis.axis_name == "x" else 1
    labels = axis.get_ticklabels(which="both")
    return [t for t in labels if low - 1e-9 * abs(low) <= t.get_position()[index] <= high + 1e-9 * abs(high)]


def _texts(fig: Figure) -> list[Text]:
    """Every visible, non-empty text the figure draws (tick labels of visible ticks only)."""
    texts: list[Text] = [*fig.texts]
    if fig._suptitle is not None:
        texts.append(fig._suptitle)
    for ax in fig.axes:
        texts += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
        texts += _tick_labels(ax.xaxis) + _tick_labels(ax.yaxis)
        if ax.get_legend() is not None:
            texts += ax.get_legend().get_texts()
    return [t for t in texts if t.get_visible() and t.get_text().strip()]


def assert_labels_fit(fig: Figure) -> None:
    """Every text inside the figure; point labels, and tick labels of one axis, pairwise apart."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    frame = fig.bbox
    for text in _texts(fig):
        box = text.get_window_extent(renderer)
        inside = box.x0 >= frame.x0 - 0.5 and box.x1 <= frame.x1 + 0.5
        inside &= box.y0 >= frame.y0 - 0.5 and box.y1 <= frame.y1 + 0.5
        assert inside, f"{text.get_text()!r} at {box.bounds} leaves the figure {frame.bounds}"
    for ax in fig.axes:
        groups = [list(ax.texts), _tick_labels(ax.xaxis), _tick_labels(ax.yaxis)]
        for group in groups:
            boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in group if t.get_text().strip()]
            for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2):
                assert not box_a.overlaps(box_b), f"{a!r} overlaps {b!r}"
        title = ax.title.get_window_extent(renderer)
        for note in ax.texts:
            assert not note.get_window_extent(renderer).overlaps(title), f"{note.get_text()!r} hits the title"


@pytest.mark.parametrize("name", ["ml100k", "flixster"])
def test_the_committed_frontiers_labels_fit(name: str) -> None:
    data = json.loads((ROOT / "results" / "frontier" / name / "frontier.json").read_text())
    fig = frontier_figure(data["dataset"], data["rows"]) if name == "ml100k" else social_figure(data["rows"])
    assert len(fig.axes[0].texts) > 3
    assert_labels_fit(fig)
    plt.close(fig)


def test_crowded_long_labels_at_the_edges_fit() -> None:
    names = [
        "LightGCN (centralized, every interaction in one place)",
        "A method with a rather long descriptive name",
        "P-GCN",
        "GNN4FR (lossless, paper-literal aggregation)",
        "FedPerGNN",
        "FedNCF",
        "Yet another long-named baseline at the top",
    ]
    rows = [
        {"method": n, "bytes_per_client_per_epoch": b, "recall@20": r, "server_inference_auc": a}
        for n, b, r, a in zip(
            names,
            [0, 1e3, 2.4e8, 2.5e8, 3e6, 3.1e6, 2.5e8],
            [0.40, 0.10, 0.40, 0.399, 0.168, 0.166, 0.401],
            [None, 0.5, 0.5, None, 0.99, 0.49, None],
            strict=True,
        )
    ]
    fig = frontier_figure("a-dataset-with-a-long-name", rows)
    assert len(fig.axes[0].texts) == len(names)
    assert_labels_fit(fig)
    plt.close(fig)


def test_bytes_within_one_decade_get_readable_ticks() -> None:
    rows = [
        {
            "setting": "decentralized (top-K)",
            "method": m,
            "recall@20": r,
            "bytes_per_epoch": b,
            "leakage_auc": a,
        }
        for m, r, b, a in (
            ("DMF", 0.021, 1.59e10, 0.99),
            ("DLGNN", 0.030, 1.59e10, 0.99),
            ("DGREC", 0.009, 1.34e10, 0.5),
        )
    ]
    rows.append(
        {
            "setting": "vertical (ratings)",
            "method": "PMF",
            "rmse": 1.3,
            "bytes_per_epoch": 0.0,
            "leakage_auc": None,
        }
    )
    fig = social_figure(rows)
    right = fig.axes[1]
    assert right.get_xscale() == "linear"
    fig.canvas.draw()
    assert all(t.get_text().endswith("GB") for t in right.get_xticklabels() if t.get_text())
    assert_labels_fit(fig)
    plt.close(fig)
