"""The side-by-side report every reproduction writes: our numbers, the paper's, and a verdict per cell.

:func:`verdict` is the one rule (``matches`` within 5 %, ``within noise`` within 2σ, else
``deviates``); :func:`write_report` writes ``reproduce.json``, ``reproduce.md`` and ``reproduce.png``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from fedgraphrec.reproduce.pairwise import pairwise_markdown

__all__ = ["PaperRow", "paper_cells", "reported", "verdict", "write_report"]


def reported(run: Mapping[str, Any]) -> dict[str, float]:
    """The test metrics a table reports for a runner's run record.

    At the run's validation-selected epoch (``selected_metrics``, recorded by runs evaluated at
    several epochs) where it has one, else its last evaluation (``metrics``).
    """
    return dict(run.get("selected_metrics") or run["metrics"])


@dataclass(frozen=True)
class PaperRow:
    """One row of a paper table: our method spec and the paper's numbers (metric → value)."""

    label: str
    method: str
    paper: dict[str, float]
    paper_std: dict[str, float] = field(default_factory=dict)
    rounds: bool = False  # trained by rounds: takes the budget's ``round_overrides``


def verdict(ours: float, std: float, paper: float, paper_std: float = 0.0) -> str:
    """``matches`` / ``within noise`` / ``deviates`` (see the module docstring).

    A row the paper has no number for (``paper`` is NaN: a reference such as popularity) is
    ``reference``.
    """
    if math.isnan(ours):
        return "not run"
    if math.isnan(paper):
        return "reference"
    diff = abs(ours - paper)
    if diff <= 0.05 * abs(paper):
        return "matches"
    if diff <= 2 * max(std, paper_std):
        return "within noise"
    return "deviates"


def paper_cells(row: PaperRow, ours: Mapping[str, tuple[float, float]]) -> dict[str, dict[str, Any]]:
    """One report cell per metric of ``row``: ours (mean, std) beside the paper's, and the verdict."""
    cells = {}
    for metric, paper in row.paper.items():
        mean, std = ours[metric]
        paper_std = row.paper_std.get(metric, 0.0)
        cells[metric] = {
            "ours": mean,
            "ours_std": std,
            "paper": paper,
            "paper_std": paper_std,
            "diff": mean - paper,
            "verdict": verdict(mean, std, paper, paper_std),
        }
    return cells


def write_report(report: dict[str, Any], out: Path) -> None:
    """``reproduce.json``, ``reproduce.md`` and ``reproduce.png`` of ``report`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "reproduce.json").write_text(json.dumps(report, indent=2) + "\n")
    _markdown(report, out / "reproduce.md")
    _plot(report, out / "reproduce.png")


def _markdown(report: dict[str, Any], path: Path) -> None:
    metrics = list(dict.fromkeys(m for r in report["rows"] for m in r["cells"]))
    has_bytes = all("bytes_per_client_per_epoch" in r for r in report["rows"])
    lines = [
        f"# {report['title']}",
        "",
        f"Paper numbers: {report['source']}. Data: {report['data']}.",
        f"Budget `{report['budget']}`: {report['budget_note']}. Seeds: {report['seeds']}.",
        "",
        "| row | "
        + " | ".join(f"{m} ours | paper | verdict" for m in metrics)
        + (" | bytes/client/epoch |" if has_bytes else " |"),
        "|---|" + "---|---|---|" * len(metrics) + ("---|" if has_bytes else ""),
    ]
    for r in report["rows"]:
        cells = []
        for m in metrics:
            c = r["cells"].get(m)
            if c is None:
                cells.append("– | – | –")
                continue
            paper = "–" if math.isnan(c["paper"]) else f"{c['paper']:.4f}"
            paper += f" ± {c['paper_std']:.4f}" if c["paper_std"] else ""
            diff = "" if math.isnan(c["diff"]) else f" ({c['diff']:+.4f})"
            cells.append(f"{c['ours']:.4f} ± {c['ours_std']:.4f} | {paper} | {c['verdict']}{diff}")
        tail = f" | {r['bytes_per_client_per_epoch']:,.0f} |" if has_bytes else " |"
        lines.append(f"| {r['row']} | " + " | ".join(cells) + tail)
    lines += pairwise_markdown(report.get("pairwise", []))
    path.write_text("\n".join(lines) + "\n")


def _plot(report: dict[str, Any], path: Path) -> None:
    metrics = list(dict.fromkeys(m for r in report["rows"] for m in r["cells"]))
    labels = [r["row"] for r in report["rows"]]
    width = 5 * len(metrics) + 0.07 * max(len(label) for label in labels)  # room for long row labels
    fig, axes = plt.subplots(1, len(metrics), figsize=(width, 0.45 * len(report["rows"]) + 1.5))
    axes = [axes] if len(metrics) == 1 else list(axes)
    for ax, m in zip(axes, metrics, strict=True):
        ours = [r["cells"][m]["ours"] if m in r["cells"] else math.nan for r in report["rows"]]
        paper = [r["cells"][m]["paper"] if m in r["cells"] else math.nan for r in report["rows"]]
        y = range(len(labels))
        ax.barh([i + 0.2 for i in y], paper, height=0.4, label="paper", color="0.7")
        ax.barh([i - 0.2 for i in y], ours, height=0.4, label=f"ours ({report['budget']})", color="C0")
        ax.set_yticks(list(y), labels)
        ax.invert_yaxis()
        ax.set_xlabel(m)
        ax.legend(loc="lower right", fontsize=8)
    fig.suptitle(report["title"], fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
