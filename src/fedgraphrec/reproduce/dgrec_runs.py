"""DGREC's table runner: one JSON per run in a folder, and the markdown table of a folder.

Every run trains through the one :class:`~fedgraphrec.training.trainer.Trainer` loop
(:func:`train_epochs`: DGREC's learner, or a centralised reference's, in a scratch run folder,
:func:`~fedgraphrec.training.trainer.fit_in_scratch`) on the
data of :mod:`fedgraphrec.training.dgrec` (the variants:
:data:`~fedgraphrec.protocols.dgrec.settings.VARIANTS`); one run with a run folder of its own is
``fedgraphrec train dgrec --variant VARIANT``. Besides the variants, the runner knows the two
reference rankings of :mod:`fedgraphrec.evaluation.reference` (``popularity``, ``random``), written
in the same JSON form on the same split, so every DGREC table carries them.

Model selection never looks at the test split: a run carves a seeded per-user ``valid_fraction``
(default 0.1) of the training interactions into a validation split
(:func:`~fedgraphrec.data.splits.carve_validation`, as the other runners' ``valid_fraction``), the
model trains on the rest, and every evaluated epoch records validation metrics beside the test
metrics (``curve[i]["valid"]``, ``valid_metrics``): learning rates and budgets are chosen on those.
A run evaluated at several epochs also records the epoch whose validation recall@20 is highest
(``selected_epoch``) and the test metrics there (``selected_metrics``, :func:`select_on_valid`):
the number of epochs is chosen on validation as early stopping would, and the tables report
``selected_metrics`` where a run has them.
"""

from __future__ import annotations

import json
import resource
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

from fedgraphrec.data.splits import carve_validation
from fedgraphrec.data.types import Interactions
from fedgraphrec.evaluation.reference import REFERENCES, expected_random_recall, reference_metrics
from fedgraphrec.protocols.dgrec.settings import DGRECSettings
from fedgraphrec.protocols.settings import ProtocolSettings
from fedgraphrec.reproduce.report import reported
from fedgraphrec.training.config import EvalSettings, TrainConfig
from fedgraphrec.training.dgrec import load_data
from fedgraphrec.training.dgrec_learner import DGRECData, DGRECLearner
from fedgraphrec.training.learner_base import AnyLearner
from fedgraphrec.training.trainer import fit_in_scratch

__all__ = [
    "VALID_FRACTION",
    "metric_cells",
    "reference_run",
    "run",
    "run_and_save",
    "run_groups",
    "select_on_valid",
    "summarize",
    "train_epochs",
]

K = TypeVar("K")

VALID_FRACTION = 0.1
"""The share of each user's training interactions a DGREC run holds out for model selection."""


def train_epochs(
    learner: Callable[[TrainConfig, Interactions], AnyLearner],
    data: Interactions,
    settings: ProtocolSettings,
    *,
    protocol: str,
    seed: int,
    epochs: int,
    eval_every: int = 0,
) -> tuple[list[dict[str, Any]], dict[str, float], AnyLearner]:
    """Train ``epochs`` epochs through the Trainer; the per-epoch curve, the last metrics, the learner.

    Evaluation (recall@20 / ndcg@20 on the test split, full ranking with the training items masked)
    runs every ``eval_every`` epochs (0: only at the end); the curve holds each epoch's loss, the
    cumulative seconds and the test metrics where evaluated (and the validation metrics when
    ``data`` has a validation split). The run folder is scratch.
    """
    if eval_every < 0:
        raise ValueError(f"eval_every must be >= 0, got {eval_every}")
    evaluation = EvalSettings(ks=[20], metric="recall@20", select="last", eval_every=eval_every or epochs)
    cfg = TrainConfig(
        protocol=protocol, dataset=data.name, epochs=epochs, seed=seed, checkpoint_every=0,
        eval=evaluation, settings=settings,
    )  # fmt: skip
    result, trained = fit_in_scratch(cfg, data, learner)
    curve: list[dict[str, Any]] = []
    seconds = 0.0
    metrics: dict[str, float] = {}
    for record in result.history:
        seconds += record["train_seconds"] + record.get("eval_seconds", 0.0)
        point: dict[str, Any] = {"epoch": record["epoch"], "loss": record["loss"]}
        if "valid" in record:
            point["valid"] = {k: float(record["valid"][k]) for k in ("recall@20", "ndcg@20")}
        if "test" in record:
            metrics = {k: float(record["test"][k]) for k in ("recall@20", "ndcg@20")}
            point["test"] = metrics
        curve.append({**point, "seconds": seconds})
    return curve, metrics, trained


def select_on_valid(curve: Sequence[Mapping[str, Any]]) -> tuple[int, dict[str, float]] | None:
    """The evaluated epoch with the highest validation recall@20 (first on ties) and its test metrics.

    ``None`` when no evaluated epoch has validation metrics.
    """
    points = [c for c in curve if "valid" in c and "test" in c]
    if not points:
        return None
    best = max(points, key=lambda c: (c["valid"]["recall@20"], -c["epoch"]))
    return int(best["epoch"]), dict(best["test"])


def run(
    dataset: str,
    settings: DGRECSettings,
    seed: int,
    epochs: int,
    eval_every: int = 0,
    valid_fraction: float = VALID_FRACTION,
) -> dict[str, Any]:
    """Train one variant for ``epochs`` epochs (evaluated every ``eval_every``); its record.

    ``valid_fraction`` of each user's training interactions (seeded by ``seed``) is held out as the
    validation split the record's ``valid_metrics`` and curve report (0: none, train on all).
    """
    full = load_data(dataset)
    inter = carve_validation(full.interactions, valid_fraction, seed=seed)
    data = DGRECData(inter, full.social, full.tags)
    t0 = time.time()
    curve, metrics, learner = train_epochs(
        lambda cfg, _: DGRECLearner(cfg.program_settings(), data, transcripts=False),
        inter, settings, protocol="dgrec", seed=seed, epochs=epochs, eval_every=eval_every,
    )  # fmt: skip
    assert isinstance(learner, DGRECLearner)
    summary = learner.run_summary()
    selected = select_on_valid(curve)
    return {
        "dataset": dataset,
        "data": summary.pop("data"),
        "variant": settings.variant,
        "seed": seed,
        "epochs": epochs,
        **summary,
        "loss_curve": [c["loss"] for c in curve],
        "curve": curve,
        "metrics": metrics,
        "valid_fraction": valid_fraction,
        "valid_metrics": next((c["valid"] for c in reversed(curve) if "valid" in c), {}),
        **({} if selected is None else {"selected_epoch": selected[0], "selected_metrics": selected[1]}),
        "seconds": time.time() - t0,
        # the process's peak resident set so far (Linux reports KiB): what the per-user tables cost
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


def reference_run(dataset: str, kind: str, seed: int) -> dict[str, Any]:
    """A reference ranking's record, in the form of :func:`run`'s."""
    t0 = time.time()
    data = load_data(dataset)
    train, test = data.interactions.train, data.interactions.test
    full = reference_metrics(kind, train, test, seed)
    return {
        "dataset": dataset,
        "data": data.sizes(),
        "variant": kind,
        "seed": seed,
        "epochs": 0,
        "settings": {"public_ratio": 1.0},
        "metrics": {k: full[k] for k in ("recall@20", "ndcg@20")},
        "expected_random_recall@20": expected_random_recall(train, test, 20),
        "seconds": time.time() - t0,
    }


def run_and_save(
    dataset: str,
    variant: str,
    seed: int,
    epochs: int,
    out: str | Path,
    centres: int | None = None,
    public_ratio: float = 1.0,
    eval_every: int = 0,
    secure_noise: bool = False,
    valid_fraction: float = VALID_FRACTION,
    **settings: Any,
) -> dict[str, Any]:
    """Run one variant (or reference ranking) and write ``<out>/<dataset>_<variant>_r<ratio>_s<seed>.json``.

    ``settings``: :class:`~fedgraphrec.protocols.dgrec.settings.DGRECSettings` fields (``lr``,
    ``delta``, ``beta``, ``hops``, ``fanout``, ``n_interests``, ``d_interest``, ``loss_scale``, …); a
    missing one keeps the variant's value. ``secure_noise`` draws the LDP randomness from the OS
    CSPRNG (the record's ``noise_source`` says which). ``valid_fraction``: as :func:`run`.
    """
    torch.set_num_threads(1)
    if variant in REFERENCES:
        res = reference_run(dataset, variant, seed)
    else:
        s = DGRECSettings.for_variant(
            variant,
            centres_per_epoch=centres,
            public_ratio=public_ratio,
            secure_noise=secure_noise,
            **settings,
        )
        res = run(dataset, s, seed, epochs, eval_every, valid_fraction)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{dataset}_{variant}_r{public_ratio}_s{seed}.json").write_text(
        json.dumps(res, indent=1, default=str)
    )
    return res


def run_groups(folder: str | Path, key: Callable[[dict[str, Any]], K]) -> dict[K, list[dict[str, Any]]]:
    """Every run JSON in ``folder`` (read in name order), grouped by ``key`` of the run."""
    groups: dict[K, list[dict[str, Any]]] = {}
    for f in sorted(Path(folder).glob("*.json")):
        r = json.loads(f.read_text())
        groups.setdefault(key(r), []).append(r)
    return groups


def metric_cells(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The runs' reported Recall@20 and NDCG@20 as ``mean ± sample std`` (×100; std 0 for one run)."""
    cells = []
    for m in ("recall@20", "ndcg@20"):
        v = 100 * np.asarray([reported(r)[m] for r in runs])
        cells.append(f"{v.mean():.2f} ± {v.std(ddof=1) if len(v) > 1 else 0.0:.2f}")
    return cells


def summarize(folder: str | Path) -> str:
    """Markdown table (mean ± std over seeds, ×100) of every run JSON in ``folder``."""
    groups = run_groups(folder, lambda r: (r["dataset"], r["variant"], float(r["settings"]["public_ratio"])))
    lines = [
        "| dataset | variant | public ratio | seeds | recall@20 (%) | ndcg@20 (%) |",
        "|---|---|---|---|---|---|",
    ]
    for (ds, var, ratio), runs in sorted(groups.items()):
        recall, ndcg = metric_cells(runs)
        lines.append(f"| {ds} | {var} | {ratio} | {len(runs)} | {recall} | {ndcg} |")
    return "\n".join(lines) + "\n"
