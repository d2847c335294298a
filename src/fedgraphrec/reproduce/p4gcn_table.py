"""P4GCN Tables 1/2: methods × seeds on one dataset, one JSON per run (the reproduce runner).

The training itself is :mod:`fedgraphrec.training.rating`; paper tables describe their runs as flag
tuples (``("--lr", "5e-3", "--no-fusion")``), turned into :class:`~fedgraphrec.protocols.p4gcn.settings.
P4GCNSettings` by :func:`settings_from_flags` (``ε`` defaults to the paper's for the dataset,
:func:`~fedgraphrec.reproduce.p4gcn_paper.paper_eps`). One run with a run folder is
``fedgraphrec train p4gcn``.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fedgraphrec.data.registry import load_dataset
from fedgraphrec.data.types import Ratings
from fedgraphrec.protocols.p4gcn.settings import P4GCNSettings
from fedgraphrec.reproduce.p4gcn_paper import paper_eps
from fedgraphrec.training.rating import run_method

__all__ = ["run_file_name", "run_table", "settings_from_flags"]

_SWITCHES = {"--no-fusion": ("fusion", False), "--secure-noise": ("secure_noise", True)}


def settings_from_flags(
    flags: Sequence[str], base: P4GCNSettings | None = None, dataset: str | None = None
) -> P4GCNSettings:
    """``("--lr", "5e-3", …)`` → :class:`P4GCNSettings` (``--x-y v`` sets field ``x_y``).

    Unset fields come from ``base``, else the defaults with the paper's ``ε`` for ``dataset``.

    Raises:
        ValueError: an unknown flag, a flag without its value, or a value of the wrong type.
    """
    hints = typing.get_type_hints(P4GCNSettings)
    values: dict[str, Any] = {}
    items = list(flags)
    while items:
        flag = items.pop(0)
        if flag in _SWITCHES:
            key, switch = _SWITCHES[flag]
            values[key] = switch
            continue
        key = flag.removeprefix("--").replace("-", "_")
        if not flag.startswith("--") or key not in hints or not items:
            raise ValueError(f"runner flag {flag!r}: unknown, or without a value")
        raw = items.pop(0)
        kind = hints[key]
        try:
            values[key] = int(raw) if kind is int else float(raw) if kind in (float, float | None) else raw
        except ValueError:
            raise ValueError(f"runner flag {flag} {raw!r}: expected {kind}") from None
    if base is None:
        base = P4GCNSettings() if dataset is None else P4GCNSettings(eps=paper_eps(dataset))
    return dataclasses.replace(base, **values)


def run_file_name(dataset: str, method: str, seed: int, social: str = "real") -> str:
    """``<dataset>_<method>_s<seed>.json`` (``*`` → ``_ideal``; ``_shuffled`` for the control)."""
    name = method.replace("*", "_ideal") + ("_shuffled" if social == "shuffled" else "")
    return f"{dataset}_{name}_s{seed}.json"


def run_table(
    dataset: str, methods: Sequence[str], seeds: Sequence[int], settings: P4GCNSettings, out: str | Path
) -> list[dict[str, Any]]:
    """Train every method with every seed; write one JSON per run into ``out`` and return the records.

    ``settings.social = "shuffled"`` runs the shuffled-graph control (the learner permutes the graph).
    """
    data = load_dataset(dataset)
    if not isinstance(data, Ratings):
        raise ValueError(f"dataset {dataset!r} has no explicit ratings")
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    records = []
    for method in methods:
        for seed in seeds:
            res = run_method(method, data, seed, dataclasses.replace(settings, method=method))
            res.update(method=method, seed=seed, dataset=dataset, batch=settings.batch, lr=settings.lr)
            res["social"] = settings.social
            name = run_file_name(dataset, method, seed, settings.social)
            (folder / name).write_text(json.dumps(res, indent=1))
            print(
                f"{dataset} {method} seed={seed} test RMSE={res['test_rmse']:.4f} "
                f"MAE={res['test_mae']:.4f} epoch={res['epoch']} ({res['seconds']:.0f}s)",
                flush=True,
            )
            records.append(res)
    return records
