"""DGREC's data: Flixster, Ciao-10core, Epinions or Weeplaces with a user graph and item hyperedges.

:func:`load_data` is what ``fedgraphrec train dgrec`` (and :mod:`fedgraphrec.reproduce.dgrec_runs`)
trains on: the interactions the :class:`~fedgraphrec.training.trainer.Trainer` evaluates, plus the
user graph and the item hyperedges DGREC's peers use. Flixster (Monti) uses its fixed split, the user
graph ``W_users`` as the inter-user graph and ``I + W_movies`` as item hyperedges (stand-in for the
paper's Flixster). Ciao/Epinions use trust links and the item categories as hyperedges; their full item
spaces do not fit one table per user, so DGREC runs on the registry's derived ``ciao-10core``
(:mod:`fedgraphrec.data.derived`; the paper's Weeplaces rule, which Ciao stands in for).

Weeplaces (the GroupIM copy) ships neither the friendships nor the POI categories the paper uses, so
:func:`weeplaces_side` builds the paper's preprocessing and split from its check-ins and stands in
for the side information with GroupIM's groups: users who share a group are linked, and the POIs a
group visited form one hyperedge, keeping a POI only where some member holds it among its
*training* items and no member holds it in test (a group's visit is its members' joint check-in,
so no held-out pair shapes a hyperedge).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
import scipy.sparse as sp

from fedgraphrec.data.catalog import REGISTRY
from fedgraphrec.data.derived import core_subset
from fedgraphrec.data.filters import dense_core
from fedgraphrec.data.loaders.weeplaces import load_weeplaces_groups
from fedgraphrec.data.registry import load_dataset
from fedgraphrec.data.splits import TEST, per_user_split
from fedgraphrec.data.types import Interactions, ItemGraph, Ratings, binary_csr
from fedgraphrec.training.dgrec_learner import DGRECData

__all__ = ["WEEPLACES_CORE", "load_data", "load_side", "weeplaces_side"]

WEEPLACES_CORE = 10
"""The paper's Weeplaces rule: users and items with fewer interactions are removed (iterated)."""
WEEPLACES_TEST = 0.2
"""The paper's split: a seeded 20 % of each user's interactions is the test set (spec §8.2)."""


def _positions(ids: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """Index of every id in the sorted ``kept`` ids, −1 where it is not kept."""
    at = np.searchsorted(kept, ids).clip(0, max(len(kept) - 1, 0))
    found = (kept[at] == ids) if len(kept) else np.zeros(len(ids), bool)
    return np.where(found, at, -1)


def _membership(groups: np.ndarray, members: np.ndarray, n_members: int) -> sp.csr_matrix:
    """Group × member 0/1 matrix of the rows whose member is kept (groups compacted)."""
    ok = members >= 0
    _, g = np.unique(groups, return_inverse=True)
    return binary_csr(g[ok], members[ok], int(g.max(initial=-1)) + 1, n_members)


def weeplaces_side(
    *, top_items: int | None = None, min_user: int | None = None, min_item: int | None = None
) -> tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]:
    """(train, test, user graph, item×hyperedge incidence) for DGREC on Weeplaces (module doc).

    Every check-in pair of the copy (GroupIM's train, fold-in and held-out rows together) is
    filtered to its iterated (``min_user``, ``min_item``)-core (default :data:`WEEPLACES_CORE`) and
    split per user 80/20 with a fixed seed (spec §8.2; GroupIM's group-based split is not the
    paper's). The user graph links users who share a GroupIM group; hyperedge *g* holds the POIs
    group *g* visited that some member has among its training items and no member in test.

    Raises:
        ValueError: a filter that keeps no interaction.
    """
    data = load_dataset("weeplaces", test_only="keep")
    assert isinstance(data, Interactions) and data.user_ids is not None and data.item_ids is not None
    parts = [m for m in (data.train, data.valid, data.test) if m is not None]
    every = sum(parts[1:], parts[0])
    core = dense_core(
        [every.tocsr()],
        top_items=top_items,
        min_user=WEEPLACES_CORE if min_user is None else min_user,
        min_item=WEEPLACES_CORE if min_item is None else min_item,
    )
    if core.parts[0].nnz == 0:
        raise ValueError(f"weeplaces: the filter {top_items=}, {min_user=}, {min_item=} keeps no interaction")
    pairs = core.parts[0].tocoo()
    n_users, n_items = len(core.users), len(core.items)
    held = per_user_split(pairs.row, (1.0 - WEEPLACES_TEST, 0.0, WEEPLACES_TEST), seed=0) == TEST
    train = binary_csr(pairs.row[~held], pairs.col[~held], n_users, n_items)
    test = binary_csr(pairs.row[held], pairs.col[held], n_users, n_items)
    g_users, users, g_items, items = load_weeplaces_groups(str(data.info["folder"]))
    members = _membership(g_users, _positions(users, data.user_ids[core.users]), n_users)
    social = (members.T @ members).tocsr()
    social.setdiag(0)
    social.eliminate_zeros()
    visits = _membership(g_items, _positions(items, data.item_ids[core.items]), n_items)
    # visits and memberships number groups in their own files; align them on the raw group ids
    _, in_users, in_items = np.intersect1d(np.unique(g_users), np.unique(g_items), return_indices=True)
    members, visits = members[in_users], visits[in_items]
    # group × item: how many members hold the POI in training / in test. A group's visit is its
    # members' joint check-in, so a POI any member holds in test stays out of that group's hyperedge
    trained, tested = (members @ train).tocsr(), (members @ test).tocsr()
    kept = visits.multiply(trained > 0).tocsr()
    kept = (kept - kept.multiply(tested > 0)).tocsr()
    kept.eliminate_zeros()
    tags = kept.T.tocsr()
    tags = tags[:, np.asarray(tags.sum(0)).ravel() > 0]
    return train, test, (social > 0).astype(np.float64).tocsr(), (tags > 0).astype(np.float64).tocsr()


def load_side(
    name: str,
    *,
    top_items: int | None = None,
    min_user: int | None = None,
    min_item: int | None = None,
) -> tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]:
    """(train, test, social adjacency, item×tag incidence) for a dataset with side information.

    ``name`` is any registry dataset with ratings, a social graph and item side information,
    derived ones included (``ciao-10core``, :mod:`fedgraphrec.data.derived`), or ``weeplaces``
    (:func:`weeplaces_side`). The train/test split
    is the loader's (Flixster: its fixed split; Ciao/Epinions: the seeded per-user 80/10/10 split,
    whose validation part this runner does not use). ``top_items``/``min_user``/``min_item``
    restrict the dataset to its :func:`~fedgraphrec.data.derived.core_subset` (for a derived
    dataset they replace its own filter values).

    Raises:
        ValueError: the dataset lacks ratings with a social graph or side information for items,
            or a filter parameter is invalid or keeps no training interaction.
    """
    if name == "weeplaces":
        return weeplaces_side(top_items=top_items, min_user=min_user, min_item=min_item)
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
