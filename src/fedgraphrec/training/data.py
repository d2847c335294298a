"""The data of a run: what ``cfg.dataset`` loads as, for the protocol's kind.

Ranking protocols train on implicit feedback (:func:`prepare_interactions`, a validation split carved
if asked); DGREC on the interactions of its side-information loader; rating protocols (P4GCN and its
baselines) on the explicit ratings with the social graph, which their learners split themselves.
"""

from __future__ import annotations

from fedgraphrec.data.registry import load_dataset
from fedgraphrec.data.splits import carve_validation
from fedgraphrec.data.types import Interactions, Ratings
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.dgrec import load_data

__all__ = ["prepare_data", "prepare_interactions"]


def prepare_interactions(cfg: TrainConfig) -> Interactions:
    """Load the dataset named in ``cfg`` as implicit feedback, carving validation if asked.

    A ratings dataset becomes implicit feedback through :meth:`Ratings.to_interactions`; the
    ``implicit_threshold`` dataset option is its threshold (the loaders' own ``threshold`` drops
    rows before any split instead). The loader's counts (duplicates, test-only users/items) reach
    the run summary through :meth:`Interactions.stats` (``dataset_stats``).

    DGREC trains on the interactions of its side-information loader (:func:`~.dgrec.load_data`),
    with validation carved from their training part in the same way.
    """
    data: Interactions | Ratings
    if cfg.protocol == "dgrec":
        data = load_data(cfg.dataset, **cfg.dataset_options).interactions
    else:
        options = dict(cfg.dataset_options)
        threshold = options.pop("implicit_threshold", None)  # a view option, not the loader's
        data = load_dataset(cfg.dataset, data_dir=cfg.data_dir or None, **options)
        if isinstance(data, Ratings):
            data = data.to_interactions(threshold=threshold)
    if cfg.eval.valid_fraction > 0 and data.valid is None:
        data = carve_validation(data, cfg.eval.valid_fraction, seed=cfg.seed)
    return data


def prepare_data(cfg: TrainConfig) -> Interactions | Ratings:
    """What the run's learner trains on: :func:`prepare_interactions`, or the ratings of a rating protocol.

    Raises:
        ValueError: a rating protocol's dataset has no explicit ratings.
    """
    if cfg.entry().kind != "rating":
        return prepare_interactions(cfg)
    data = load_dataset(cfg.dataset, data_dir=cfg.data_dir or None, **cfg.dataset_options)
    if not isinstance(data, Ratings):
        raise ValueError(f"--dataset {cfg.dataset}: protocol {cfg.protocol} needs explicit ratings")
    return data
