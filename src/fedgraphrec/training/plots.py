"""Learning-curve plots for a run folder (matplotlib, headless)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

if TYPE_CHECKING:
    from fedgraphrec.runtime.ledger import Ledger

__all__ = ["plot_curves", "plot_ledger"]


def plot_curves(history: Sequence[dict[str, Any]], path: str | Path, title: str = "") -> Path:
    """Training loss and every evaluated metric against the epoch, saved as a PNG.

    Args:
        history: records as written to ``metrics.jsonl`` (``epoch``, ``loss``, ``valid``/``test`` dicts).
        path: output file.
        title: figure title (e.g. ``"lightgcn on ml-100k"``).
    """
    path = Path(path)
    fig, (ax_loss, ax_metric) = plt.subplots(1, 2, figsize=(11, 4))
    trained = [r for r in history if r.get("loss") is not None]
    ax_loss.plot([r["epoch"] for r in trained], [r["loss"] for r in trained], color="tab:red")
    ax_loss.set_xlabel("epoch")
    ax_loss.set_ylabel("mean training loss")
    ax_loss.set_title("training loss")
    ax_loss.grid(alpha=0.3)
    for split, style in (("test", "-"), ("valid", "--")):
        rows = [r for r in history if r.get(split)]
        if not rows:
            continue
        for name in rows[0][split]:
            if name.startswith("hit@"):  # hit rate sits near 1 and crowds the other curves out
                continue
            ax_metric.plot(
                [r["epoch"] for r in rows], [r[split][name] for r in rows], style, label=f"{split} {name}"
            )
    ax_metric.set_xlabel("epoch")
    ax_metric.set_title("ranking metrics")
    ax_metric.grid(alpha=0.3)
    if ax_metric.lines:
        ax_metric.legend(fontsize=8)
    return _save(fig, path, title)


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
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _unit(n_bytes: int) -> tuple[float, str]:
    for power, unit in ((3, "GiB"), (2, "MiB"), (1, "KiB")):
        if n_bytes >= 2 ** (10 * power):
            return float(2 ** (10 * power)), unit
    return 1.0, "bytes"
