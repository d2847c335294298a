"""Compare methods on one dataset: same split, seeds and budget; a table of mean ± std over seeds.

A *method* is a protocol name with optional config overrides, ``"central:model=mf"`` or
``"fedgrec:K=2,local_steps=5"``; every method runs once per seed through the ordinary
:class:`~fedgraphrec.training.trainer.Trainer` (so each run leaves its usual folder), on top of one
shared base configuration. The table reports the summary's selected-epoch test metrics and the mean
bytes per client per epoch. Two reference rows close the table with ``references=True`` (the CLI's default):
``popularity`` (train counts) and ``random`` (seeded uniform scores), evaluated on the same split with
the same masking (:mod:`fedgraphrec.evaluation.reference`); a method that does not beat popularity
has learned nothing user-specific. ``popularity`` / ``random`` may also be named as methods.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedgraphrec.evaluation.reference import REFERENCES, reference_metrics
from fedgraphrec.training.config import ConfigError, TrainConfig
from fedgraphrec.training.data import prepare_interactions
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.trainer import Trainer

__all__ = ["MethodSpec", "compare", "parse_method"]


@dataclass(frozen=True)
class MethodSpec:
    """A label, its protocol and its config overrides."""

    label: str
    protocol: str
    overrides: tuple[str, ...]


def parse_method(text: str) -> MethodSpec:
    """``"protocol[:key=value,key=value]"`` → :class:`MethodSpec` (the label is the text itself)."""
    protocol, _, rest = text.partition(":")
    overrides = tuple(item.strip() for item in rest.split(",") if item.strip())
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"method {text!r}: override {item!r} is not key=value")
    return MethodSpec(label=text, protocol=protocol.strip(), overrides=overrides)


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def compare(
    methods: Sequence[MethodSpec],
    seeds: Sequence[int],
    out_dir: str | Path,
    *,
    config: str | Path | None = None,
    overrides: Sequence[str] = (),
    progress: bool = False,
    references: bool = False,
) -> list[dict[str, Any]]:
    """Run every method for every seed and write ``compare.csv``, ``compare.md`` and ``compare.json``.

    Returns one row per method: ``{"method", "runs", "<metric>_mean", "<metric>_std", ...}``;
    ``references`` appends the ``popularity`` and ``random`` rows (unless named as methods).

    Raises:
        ConfigError: a method's configuration is invalid (checked for all methods before any run).
    """
    out = Path(out_dir)
    named = {m.label for m in methods}
    if references:
        methods = [*methods, *(MethodSpec(r, r, ()) for r in REFERENCES if r not in named)]
    cfgs = {
        (m.label, seed): load_config(
            config,
            [*m.overrides, f"seed={seed}"],
            shared=overrides,
            protocol="central" if m.protocol in REFERENCES else m.protocol,
        )
        for m in methods
        for seed in seeds
    }
    results: dict[str, list[dict[str, Any]]] = {m.label: [] for m in methods}
    kinds = {m.label: m.protocol for m in methods}
    for (label, seed), cfg in cfgs.items():
        if kinds[label] in REFERENCES:
            results[label].append(_reference_summary(kinds[label], cfg))
            continue
        folder = out / f"{label.replace(':', '_').replace(',', '_').replace('=', '-')}-seed{seed}"
        results[label].append(Trainer(cfg, folder, progress=progress).fit().summary)
    rows = []
    for m in methods:
        summaries = results[m.label]
        metrics = sorted(summaries[0]["test"])
        row: dict[str, Any] = {"method": m.label, "runs": len(summaries)}
        for name in metrics:
            row[f"{name}_mean"], row[f"{name}_std"] = _mean_std([s["test"][name] for s in summaries])
        comm = [
            s["communication"]["mean_bytes_per_client_per_epoch"] for s in summaries if "communication" in s
        ]
        row["bytes_per_client_per_epoch"] = statistics.fmean(comm) if comm else 0.0
        row["epochs"] = statistics.fmean(s["epochs_run"] for s in summaries)
        rows.append(row)
    _write(out, rows, seeds)
    return rows


def _reference_summary(kind: str, cfg: TrainConfig) -> dict[str, Any]:
    """A reference ranking on the split a trainer would use (test masks train and validation)."""
    data = prepare_interactions(cfg)
    metrics = reference_metrics(kind, data.train, data.test, cfg.seed, cfg.eval.ks, [data.train, data.valid])
    return {"test": metrics, "epochs_run": 0}


def _write(out: Path, rows: list[dict[str, Any]], seeds: Sequence[int]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with (out / "compare.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
    (out / "compare.json").write_text(json.dumps({"seeds": list(seeds), "rows": rows}, indent=2) + "\n")
    metrics = [k[: -len("_mean")] for k in keys if k.endswith("_mean")]
    lines = [
        f"Mean ± std over seeds {', '.join(map(str, seeds))} (selected-epoch test metrics).",
        "",
        "| method | " + " | ".join(metrics) + " | bytes / client / epoch |",
        "|---|" + "---|" * (len(metrics) + 1),
    ]
    for r in rows:
        cells = [f"{r[f'{m}_mean']:.4f} ± {r[f'{m}_std']:.4f}" for m in metrics]
        lines.append(
            f"| {r['method']} | " + " | ".join(cells) + f" | {r['bytes_per_client_per_epoch']:,.0f} |"
        )
    (out / "compare.md").write_text("\n".join(lines) + "\n")
