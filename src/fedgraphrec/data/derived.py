"""Derived datasets: a registered dataset restricted to its dense core (``ciao-10core``).

A derived dataset is a name in :data:`~fedgraphrec.data.registry.REGISTRY` whose files are those of
a base dataset and whose content is :func:`core_subset` of it. ``ciao-10core`` is Ciao's iterated
10-core ("remove users and items with < 10 interactions", the paper's Weeplaces rule, repeated until
stable), 2,540 users × 3,018 items: DGREC keeps one item table per user, which Ciao's 105,114 items
would make ≈ 49.6 GB (7,375 × 105,114 × 16 × 4 B), and DGREC's Table 2 uses Ciao in place of the
unavailable Weeplaces. Since it is a registry name, every command (``train``, ``compare``,
``datasets``, ``reproduce``) can use it.

The filter is deterministic. Counts are over the de-duplicated (user, item) pairs of every split
together (train, validation and test), as a filter applied before splitting would count them; each
kept rating keeps the split the base loader gave it. Users and items get compact ids in their
original order; the social graph keeps the links among kept users, category tags keep the kept
items (categories left without an item are dropped) and an item graph (Flixster) keeps the links
among kept items. ``info`` records the base dataset, the filter, its rounds and the original ids.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from fedgraphrec.data.errors import DataError
from fedgraphrec.data.filters import dense_core
from fedgraphrec.data.types import ItemGraph, ItemTags, Ratings, RatingSplit, SocialGraph, binary_csr

__all__ = ["CORE_KEYS", "core_subset", "load_derived"]

CORE_KEYS = ("top_items", "min_user", "min_item")
"""The :func:`~fedgraphrec.data.filters.dense_core` keywords a derived dataset may set."""


def _mapping(kept: np.ndarray, n: int) -> np.ndarray:
    """Old id → new compact id (−1 for a dropped id)."""
    new = np.full(n, -1, dtype=np.int64)
    new[kept] = np.arange(len(kept))
    return new


def _split(split: RatingSplit, users: np.ndarray, items: np.ndarray) -> RatingSplit:
    u, i = users[split.users], items[split.items]
    keep = (u >= 0) & (i >= 0)
    return RatingSplit(u[keep], i[keep], split.ratings[keep])


def core_subset(data: Ratings, name: str, core: Mapping[str, Any]) -> Ratings:
    """``data`` restricted to its :func:`~fedgraphrec.data.filters.dense_core` (see the module doc).

    Args:
        data: the base dataset (explicit ratings; side information optional).
        name: the derived dataset's name (for run folders and reports).
        core: ``dense_core`` keywords among :data:`CORE_KEYS` (a missing ``min_*`` is 1).

    Raises:
        ValueError: an unknown filter key, an invalid value (named by ``dense_core``), or a filter
            that keeps no training rating.
    """
    unknown = set(core) - set(CORE_KEYS)
    if unknown:
        raise ValueError(
            f"derived dataset {name!r}: unknown filter keys {sorted(unknown)}; known: {CORE_KEYS}"
        )
    splits = {
        "train": data.train,
        "test": data.test,
        **({"valid": data.valid} if data.valid is not None else {}),
    }
    parts = [binary_csr(s.users, s.items, data.n_users, data.n_items) for s in splits.values()]
    sub = dense_core(
        parts,
        top_items=core.get("top_items"),
        min_user=1 if core.get("min_user") is None else core["min_user"],
        min_item=1 if core.get("min_item") is None else core["min_item"],
    )
    if sub.parts[0].nnz == 0:
        raise ValueError(f"derived dataset {name!r}: the filter {dict(core)} keeps no training rating")
    umap, imap = _mapping(sub.users, data.n_users), _mapping(sub.items, data.n_items)
    kept = {k: _split(s, umap, imap) for k, s in splits.items()}
    n_users, n_items = len(sub.users), len(sub.items)
    social = None
    if data.social is not None:
        s, d = umap[data.social.src], umap[data.social.dst]
        ok = (s >= 0) & (d >= 0)
        social = SocialGraph(n_users, s[ok], d[ok], directed=data.social.directed)
    tags = None
    if data.tags is not None:
        it, tg = imap[data.tags.items], data.tags.tags
        ok = it >= 0
        used = np.unique(tg[ok])  # categories with at least one kept item, compacted in order
        tags = ItemTags(n_items, len(used), it[ok], np.searchsorted(used, tg[ok]))
    info: dict[str, object] = {
        **data.info,
        "derived_from": data.name,
        "core": dict(core),
        "core_rounds": sub.rounds,
        "base_user_ids": sub.users,
        "base_item_ids": sub.items,
    }
    graph = data.info.get("item_graph")
    if isinstance(graph, ItemGraph):
        s, d = imap[graph.src], imap[graph.dst]
        ok = (s >= 0) & (d >= 0)
        info["item_graph"] = ItemGraph(n_items, s[ok], d[ok], directed=graph.directed)
    return Ratings(
        name=name,
        n_users=n_users,
        n_items=n_items,
        train=kept["train"],
        test=kept["test"],
        valid=kept.get("valid"),
        rating_range=data.rating_range,
        social=social,
        tags=tags,
        info=info,
        user_ids=sub.users if data.user_ids is None else data.user_ids[sub.users],
        item_ids=sub.items if data.item_ids is None else data.item_ids[sub.items],
    )


def load_derived(
    name: str,
    options: Mapping[str, Any],
    load: Callable[..., Any],
    data_dir: str | Path | None = None,
    download: bool = True,
) -> Ratings:
    """Load derived dataset ``name``: its base through ``load`` (the registry's), then the filter.

    Args:
        name: the derived dataset's registry name.
        options: its registry options merged with the caller's: ``base`` (the base dataset's name),
            the filter keys of :data:`CORE_KEYS`, and everything else for the base loader.
        load: :func:`~fedgraphrec.data.registry.load_dataset` (passed in: the registry imports
            this module).
        data_dir: explicit data root.
        download: allow the base dataset to be downloaded.

    Raises:
        DataError: the base is not a ratings dataset.
        ValueError: an invalid filter (see :func:`core_subset`).
    """
    opts = dict(options)
    base = opts.pop("base")
    core = {k: opts.pop(k) for k in CORE_KEYS if k in opts}
    data = load(base, data_dir, download=download, **opts)
    if not isinstance(data, Ratings):
        raise DataError(f"derived dataset {name!r}: its base {base!r} is not a ratings dataset")
    return core_subset(data, name, core)
