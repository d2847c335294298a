"""DGREC's table runner: one JSON per run in a folder, and the markdown table of a folder.

The training is :mod:`fedgraphrec.training.dgrec`; one run with a run folder is
``fedgraphrec train dgrec --variant VARIANT``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fedgraphrec.training.dgrec import SUBSETS, VARIANTS, data_sizes, load_side, run, settings_for

__all__ = [
    "SUBSETS",
    "VARIANTS",
    "data_sizes",
    "load_side",
    "run",
    "run_and_save",
    "settings_for",
    "summarize",
]


def run_and_save(
    dataset: str,
    variant: str,
    seed: int,
    epochs: int,
    out: str | Path,
    centres: int | None = None,
    public_ratio: float = 1.0,
    lr: float | None = None,
    delta: float | None = None,
    beta: float | None = None,
    hops: int | None = None,
    fanout: int | None = None,
    n_interests: int | None = None,
    d_interest: int | None = None,
    secure_noise: bool = False,
) -> dict[str, Any]:
    """Run one variant and write ``<out>/<dataset>_<variant>_r<ratio>_s<seed>.json``.

    ``lr``, ``delta`` (clip bound δ), ``beta`` (sharing budget β), ``hops`` (H), ``fanout`` (n_u),
    ``n_interests`` (n_i) and ``d_interest`` (d_i): the variant's values when None. ``secure_noise``
    draws the LDP randomness from the OS CSPRNG (the record's ``noise_source`` says which).
    """
    torch.set_num_threads(1)
    over: dict[str, Any] = {
        "centres_per_epoch": centres,
        "public_ratio": public_ratio,
        "secure_noise": secure_noise,
    }
    for key, value in (("lr", lr), ("delta", delta), ("beta", beta), ("hops", hops), ("fanout", fanout)):
        if value is not None:
            over[key] = value
    model = {k: v for k, v in (("n_interests", n_interests), ("d_interest", d_interest)) if v is not None}
    if model:
        over["model"] = model
    res = run(dataset, variant, seed, epochs, **over)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{dataset}_{variant}_r{public_ratio}_s{seed}.json").write_text(
        json.dumps(res, indent=1, default=str)
    )
    return res


def summarize(folder: str | Path) -> str:
    """Markdown table (mean ± std over seeds, ×100) of every run JSON in ``folder``."""
    groups: dict[tuple[str, str, float], list[dict[str, float]]] = {}
    for f in sorted(Path(folder).glob("*.json")):
        r = json.loads(f.read_text())
        key = (r["dataset"], r["variant"], float(r["settings"]["public_ratio"]))
        groups.setdefault(key, []).append(r["metrics"])
    lines = [
        "| dataset | variant | public ratio | seeds | recall@20 (%) | ndcg@20 (%) |",
        "|---|---|---|---|---|---|",
    ]
    for (ds, var, ratio), ms in sorted(groups.items()):
        cells = []
        for m in ("recall@20", "ndcg@20"):
            v = 100 * np.asarray([x[m] for x in ms])
            cells.append(f"{v.mean():.2f} ± {v.std(ddof=1) if len(v) > 1 else 0.0:.2f}")
        lines.append(f"| {ds} | {var} | {ratio} | {len(ms)} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"
