"""DGREC's data: Flixster, Ciao-10core or Epinions with their social graph and item side information.

:func:`load_data` is what ``fedgraphrec train dgrec`` (and :mod:`fedgraphrec.reproduce.dgrec_runs`)
trains on: the interactions the :class:`~fedgraphrec.training.trainer.Trainer` evaluates, plus the
user graph and the item hyperedges DGREC's peers use. Flixster (Monti) uses its fixed split, the user
graph ``W_users`` as the inter-user graph and ``I + W_movies`` as item hyperedges (stand-in for the
paper's Flixster). Ciao/Epinions use trust links and the item categories as hyperedges; their full item
spaces do not fit one table per user, so DGREC runs on the registry's derived ``ciao-10core``
(:mod:`fedgraphrec.data.derived`; the paper's Weeplaces rule, which Ciao stands in for).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
import scipy.sparse as sp

from fedgraphrec.data.catalog import REGISTRY
from fedgraphrec.data.derived import core_subset
from fedgraphrec.data.registry import load_dataset
from fedgraphrec.data.types import Interactions, ItemGraph, Ratings
from fedgraphrec.training.dgrec_learner import DGRECData

__all__ = ["load_data", "load_side"]


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


@lru_cache(maxsize=2)
def load_data(
    name: str, *, top_items: int | None = None, min_user: int | None = None, min_item: int | None = None
) -> DGRECData:
    """:func:`load_side` as a :class:`~fedgraphrec.training.dgrec_learner.DGRECData`.

    Kept for the next call: the Trainer's evaluation data and the learner's side information come
    from one load.
    """
    train, test, social, tags = load_side(name, top_items=top_items, min_user=min_user, min_item=min_item)
    inter = Interactions(name=name, n_users=train.shape[0], n_items=train.shape[1], train=train, test=test)
    return DGRECData(inter, social, tags)
