"""Training DGREC, its ablations and the DMF/DLGNN baselines on Flixster, Ciao-10core or Epinions.

``fedgraphrec train dgrec --dataset ciao-10core --variant dgrec`` writes a standard run folder
(:func:`train_dgrec`, per-epoch loss and test metrics); every field of
:class:`~fedgraphrec.protocols.dgrec.settings.DGRECSettings` is a ``--set`` / TOML key
(:func:`dgrec_settings`). :func:`run` returns one run's record (settings, per-epoch curve, final
recall@20/ndcg@20, ledger bytes, accounting), which the table runner
:mod:`fedgraphrec.reproduce.dgrec_runs` stores as JSON. Flixster (Monti) uses its fixed split, the
user graph ``W_users`` as the inter-user graph and ``I + W_movies`` as item hyperedges (stand-in for
the paper's Flixster). Ciao/Epinions use trust links and the item categories as hyperedges; their
full item spaces do not fit one table per user, so DGREC runs on the registry's derived
``ciao-10core`` (:mod:`fedgraphrec.data.derived`; the paper's Weeplaces rule, which Ciao stands in
for).

:func:`fit` is the one epoch loop of DGREC and of the centralised references of
:mod:`fedgraphrec.reproduce.dgrec_central` (epoch-level learners with ``train_round`` and
``score_users``), kept here until ``train dgrec`` runs through the
:class:`~fedgraphrec.training.trainer.Trainer`.
"""

from __future__ import annotations

import time
import tomllib
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.data.derived import core_subset
from fedgraphrec.data.registry import REGISTRY, load_dataset
from fedgraphrec.data.types import Interactions, ItemGraph, Ratings
from fedgraphrec.evaluation.ranking import evaluate_scores
from fedgraphrec.protocols.dgrec.settings import DGRECSettings
from fedgraphrec.training.dgrec_learner import DGRECData, DGRECLearner
from fedgraphrec.training.learner_base import BatchStats
from fedgraphrec.training.loading import load_settings

__all__ = ["EpochLearner", "dgrec_settings", "fit", "load_data", "load_side", "run", "train_dgrec"]


class EpochLearner(Protocol):
    """What :func:`fit` drives: one epoch per call and full-catalogue scores."""

    def train_round(self, epoch: int) -> BatchStats:
        """Train one epoch."""
        ...

    def score_users(self, users: torch.Tensor) -> torch.Tensor:
        """Scores ``[len(users), n_items]``."""
        ...


def load_side(
    name: str,
    *,
    top_items: int | None = None,
    min_user: int | None = None,
    min_item: int | None = None,
) -> tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]:
    """(train, test, social adjacency, item×tag incidence) for a dataset with side information.

    ``name`` is any registry dataset with ratings, a social graph and item side information,
    derived ones included (``ciao-10core``, :mod:`fedgraphrec.data.derived`). The train/test split
    is the loader's (Flixster: its fixed split; Ciao/Epinions: the seeded per-user 80/10/10 split,
    whose validation part this runner does not use). ``top_items``/``min_user``/``min_item``
    restrict the dataset to its :func:`~fedgraphrec.data.derived.core_subset` (for a derived
    dataset they replace its own filter values).

    Raises:
        ValueError: the dataset lacks ratings with a social graph or side information for items,
            or a filter parameter is invalid or keeps no training interaction.
    """
    given = {"top_items": top_items, "min_user": min_user, "min_item": min_item}
    core: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    derived = name in REGISTRY and REGISTRY[name].format == "derived"
    data = load_dataset(name, **core) if derived else load_dataset(name)
    if core and not derived and isinstance(data, Ratings):
        data = core_subset(data, name, core)
    if not isinstance(data, Ratings) or data.social is None:
        raise ValueError(f"dataset {name!r} needs ratings with a social graph")
    inter = data.to_interactions()
    social = data.social.adjacency(symmetric=True)
    graph = data.info.get("item_graph")
    if isinstance(graph, ItemGraph):
        tags = (graph.adjacency(symmetric=True) + sp.identity(data.n_items)).tocsr()
    elif data.tags is not None:
        tags = data.tags.matrix()
    else:
        raise ValueError(f"dataset {name!r} has neither an item graph nor item tags")
    return inter.train, inter.test, social, (tags > 0).astype(np.float64).tocsr()


def load_data(
    name: str, *, top_items: int | None = None, min_user: int | None = None, min_item: int | None = None
) -> DGRECData:
    """:func:`load_side` as a :class:`~fedgraphrec.training.dgrec_learner.DGRECData`."""
    train, test, social, tags = load_side(name, top_items=top_items, min_user=min_user, min_item=min_item)
    inter = Interactions(name=name, n_users=train.shape[0], n_items=train.shape[1], train=train, test=test)
    return DGRECData(inter, social, tags)


def fit(
    learner: EpochLearner, data: Interactions, epochs: int, eval_every: int = 0
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Train ``epochs`` epochs; evaluate recall@20 / ndcg@20 every ``eval_every`` epochs and at the end.

    Returns the per-epoch curve (loss, seconds, and the test metrics where evaluated) and the last
    metrics. Evaluation is full ranking with the training items masked.

    Raises:
        FloatingPointError: an epoch's loss is not finite.
    """
    if eval_every < 0:
        raise ValueError(f"eval_every must be >= 0, got {eval_every}")
    t0 = time.time()
    curve: list[dict[str, Any]] = []
    metrics: dict[str, float] = {}
    for e in range(epochs):
        loss = learner.train_round(e).loss
        if not np.isfinite(loss):
            raise FloatingPointError(f"non-finite loss in epoch {e + 1}")
        point: dict[str, Any] = {"epoch": e + 1, "loss": loss}
        if e + 1 == epochs or (eval_every and (e + 1) % eval_every == 0):
            res = evaluate_scores(
                learner.score_users, data.n_users, data.n_items, data.test, [data.train], ks=(20,),
                chunk_size=64,
            )  # fmt: skip
            metrics = {k: float(res.metrics[k]) for k in ("recall@20", "ndcg@20")}
            point["test"] = metrics
        point["seconds"] = time.time() - t0
        curve.append(point)
    return curve, metrics


def run(dataset: str, settings: DGRECSettings, seed: int) -> dict[str, Any]:
    """Train one variant (``settings.epochs`` epochs, evaluated every ``settings.eval_every``); its record."""
    data = load_data(dataset)
    t0 = time.time()
    learner = DGRECLearner(
        settings, data, seed=seed, crypto="accounted", reproducible=True, transcripts=False
    )
    curve, metrics = fit(learner, data.interactions, settings.epochs, settings.eval_every)
    summary = learner.run_summary()
    return {
        "dataset": dataset,
        "data": summary.pop("data"),
        "variant": settings.variant,
        "seed": seed,
        "epochs": settings.epochs,
        **summary,
        "loss_curve": [c["loss"] for c in curve],
        "curve": curve,
        "metrics": metrics,
        "seconds": time.time() - t0,
    }


def dgrec_settings(
    config: str | Path | None = None,
    overrides: list[str] | None = None,
    variant: str | None = None,
    epochs: int | None = None,
) -> DGRECSettings:
    """:class:`DGRECSettings` of a TOML file and ``--set`` overrides, on top of ``variant``'s values.

    The keys given (file, ``epochs``, ``--set``) win over the variant's values, which win over the
    defaults; the variant is ``variant``, else the file's or ``--set``'s ``variant``, else ``dgrec``.

    Raises:
        ConfigError: an unknown key or a value of the wrong type or refused by the checks.
    """
    checked = load_settings(DGRECSettings, config, overrides, epochs=epochs)  # types, names, checks
    given: set[str] = set()
    if config is not None:
        given |= set(tomllib.loads(Path(config).read_text())) - {"protocol", "dataset", "seed"}
    given |= {item.split("=", 1)[0].strip() for item in overrides or []}  # load_settings checked them
    if epochs is not None:
        given.add("epochs")
    names = {f.name for f in fields(DGRECSettings)}
    values = {k: getattr(checked, k) for k in given & names if k != "variant"}
    return DGRECSettings.for_variant(variant or checked.variant, **values)


def train_dgrec(dataset: str, seed: int, s: DGRECSettings, run_dir: str | Path) -> dict[str, Any]:
    """One DGREC run written as a standard run folder; returns ``summary.json``'s dict."""
    from fedgraphrec.training.rundir import write_run

    torch.set_num_threads(1)
    res = run(dataset, s, seed)
    records = [{k: v for k, v in c.items() if k != "seconds"} for c in res["curve"]]
    summary = {
        "protocol": "dgrec",
        "variant": s.variant,
        "dataset": dataset,
        "seed": seed,
        "selection": "last epoch (DGREC has no validation split)",
        "selected_epoch": s.epochs,
        "test": res["metrics"],
        "noise_source": res["noise_source"],
        "noise_note": res["noise_note"],
        "randomness": res["randomness"],
        "settings": res["settings"],
        "data": res["data"],
        "ledger_bytes": res["ledger_bytes"],
        "accounting_per_sharing": res["accounting_per_sharing"],
        "train_seconds": res["seconds"],
        "epoch_seconds": [c["seconds"] for c in res["curve"]],
    }
    config = {"protocol": "dgrec", "dataset": dataset, "seed": seed, **asdict(s)}
    write_run(run_dir, config, records, summary, f"{s.variant} on {dataset}")
    return summary
