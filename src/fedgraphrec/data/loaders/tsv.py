"""Loader for rating folders with side information (FilmTrust, Ciao, Epinions, Douban, Flixster).

Folder layout (every id 0-based; rating and social files share one user id space):
    * ``ratings.tsv`` or ``ratings.tsv.gz``: ``user item rating``;
    * ``train.tsv`` + ``test.tsv`` (optional): a fixed split in the same format; when present it is
      used and ``ratings.tsv`` is not read;
    * ``social.tsv`` (optional): ``user user`` links;
    * ``item_tags.tsv`` (optional): ``item tag``; tags are renumbered ``0..n_tags-1`` in ascending
      original id (originals in ``info["tag_ids"]``);
    * ``item_graph.tsv`` (optional): ``item item`` relations, returned as an :class:`ItemGraph` in
      ``info["item_graph"]`` because :class:`Ratings` has no field for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np

from fedgraphrec.data._arrays import occurrence_mask, sorted_unique
from fedgraphrec.data._io import find_file, require_file, require_folder
from fedgraphrec.data._table import Table, check_range, read_table
from fedgraphrec.data.splits import DEFAULT_FRACTIONS, carve_validation, split_ratings
from fedgraphrec.data.types import ItemGraph, ItemTags, Ratings, RatingSplit, SocialGraph

Dedup = Literal["none", "last", "first"]
RATING_FILES = ("ratings.tsv", "ratings.tsv.gz")


def _dedup_mask(users: np.ndarray, items: np.ndarray, rule: Dedup) -> np.ndarray:
    """Rows to keep so that each (user, item) pair occurs once; file order is preserved."""
    n = len(users)
    if rule == "none" or n == 0:
        return np.ones(n, dtype=bool)
    return occurrence_mask(users * (int(items.max()) + 1) + items, rule)


def _read_rating_file(
    path: Path,
    rating_range: tuple[float, float] | None,
    drop_zero: bool,
    dedup: Dedup,
    counts: dict[str, int],
) -> RatingSplit:
    """Read, clean and validate one ``user item rating`` file; add what was removed to ``counts``."""
    table = read_table(path, ("id", "id", "float"))
    users, items, ratings = table.columns
    counts["rows_read"] = counts.get("rows_read", 0) + len(table)
    keep = np.ones(len(table), dtype=bool)
    if drop_zero:
        zero = ratings == 0
        counts["dropped_zero_ratings"] = counts.get("dropped_zero_ratings", 0) + int(zero.sum())
        keep &= ~zero
    if rating_range is not None:
        kept = Table(table.path, tuple(c[keep] for c in table.columns), table.lines[keep])
        check_range(kept, 2, *rating_range)
    users, items, ratings = users[keep], items[keep], ratings[keep]
    unique = _dedup_mask(users, items, dedup)
    counts["duplicate_rows_removed"] = counts.get("duplicate_rows_removed", 0) + int((~unique).sum())
    return RatingSplit(users[unique], items[unique], ratings[unique])


def _pair_file(folder: Path, name: str) -> tuple[Path, np.ndarray, np.ndarray] | None:
    path = find_file(folder, name, name + ".gz")
    if path is None:
        return None
    table = read_table(path, ("id", "id"))
    return path, table.columns[0], table.columns[1]


def _max_id(*arrays: np.ndarray) -> int:
    return max((int(a.max()) + 1 for a in arrays if len(a)), default=0)


def load_rating_folder(
    folder: str | Path,
    *,
    name: str | None = None,
    rating_range: tuple[float, float] | None = None,
    drop_zero: bool = False,
    dedup: Dedup = "none",
    social_directed: bool = True,
    n_users: int | None = None,
    n_items: int | None = None,
    fractions: tuple[float, float, float] = DEFAULT_FRACTIONS,
    valid_fraction: float = 0.0,
    seed: int = 0,
) -> Ratings:
    """Load a rating folder (see the module docstring for the files).

    Cleaning happens in this order, separately for every rating file: rows with rating 0 are
    dropped when ``drop_zero`` (Ciao marks "no rating" with 0, outside its 1–5 scale); the rest are
    checked against ``rating_range`` (a value outside is an error naming file and line); then
    repeated (user, item) pairs are de-duplicated by ``dedup``: ``"last"`` keeps the last
    occurrence in file order (the most recent edit in Tang's releases), ``"first"`` the first,
    ``"none"`` keeps every row. The counts are recorded in ``info``.

    Sizes: ``n_users`` covers every user in the rating files *and* the social graph (FilmTrust has
    trust-only users); ``n_items`` covers the rating files, the item tags and the item graph. The
    ``n_users``/``n_items`` arguments raise these to a known matrix size (Douban, Flixster: 3,000).

    Split: ``train.tsv``/``test.tsv`` when present (then ``valid_fraction`` > 0 carves a per-user
    validation share out of train); otherwise a seeded per-user split of ``ratings.tsv`` by
    ``fractions``.

    Args:
        folder: dataset folder.
        name: dataset name (defaults to the folder name).
        rating_range: legal (lowest, highest) rating; ``None`` infers it from the data.
        drop_zero: drop rating-0 rows before the range check.
        dedup: ``"none"``, ``"last"`` or ``"first"`` (see above).
        social_directed: whether ``social.tsv`` holds directed trust links (``False`` for a
            symmetric friendship graph already listed in both directions).
        n_users: minimum size of the user id space.
        n_items: minimum size of the item id space.
        fractions: (train, valid, test) for the per-user split.
        valid_fraction: validation share carved from a fixed train split.
        seed: seed of the per-user split / carve-out.

    Returns:
        The ratings with their social graph and item tags (``None`` where the file is absent).

    Raises:
        DatasetNotFoundError: the folder or the rating file is missing.
        DataFormatError: a malformed file (naming file and line).
    """
    root = require_folder(folder)
    counts: dict[str, int] = {}
    info: dict[str, object] = {"format": "ratings-tsv", "folder": str(root), "dedup": dedup}
    train_path, test_path = (
        find_file(root, "train.tsv", "train.tsv.gz"),
        find_file(root, "test.tsv", "test.tsv.gz"),
    )
    valid: RatingSplit | None
    if train_path is not None and test_path is not None:
        train = _read_rating_file(train_path, rating_range, drop_zero, dedup, counts)
        test = _read_rating_file(test_path, rating_range, drop_zero, dedup, counts)
        valid = None
        info.update({"split": "fixed", "files": [str(train_path), str(test_path)]})
    else:
        path = require_file(root, *RATING_FILES)
        every = _read_rating_file(path, rating_range, drop_zero, dedup, counts)
        train, valid, test = split_ratings(
            every.users, every.items, every.ratings, fractions=fractions, seed=seed
        )
        info.update({"split": "per-user", "fractions": fractions, "split_seed": seed, "files": [str(path)]})
    info.update(counts)
    parts = [p for p in (train, valid, test) if p is not None]

    social_file = _pair_file(root, "social.tsv")
    tags_file = _pair_file(root, "item_tags.tsv")
    graph_file = _pair_file(root, "item_graph.tsv")
    social_ids = (social_file[1], social_file[2]) if social_file else ()
    tag_items = (tags_file[1],) if tags_file else ()
    graph_ids = (graph_file[1], graph_file[2]) if graph_file else ()
    nu = max(_max_id(*(p.users for p in parts), *social_ids), n_users or 0)
    ni = max(_max_id(*(p.items for p in parts), *tag_items, *graph_ids), n_items or 0)

    social = None
    if social_file is not None:
        path, src, dst = social_file
        social = SocialGraph(nu, src, dst, directed=social_directed)
        info["social_file"] = str(path)
        info["social_self_loops"] = int((src == dst).sum())
        info["social_duplicate_rows"] = len(src) - len(sorted_unique(src * nu + dst))
    tags = None
    if tags_file is not None:
        path, items, raw_tags = tags_file
        tag_ids = sorted_unique(raw_tags)
        tag_index = np.searchsorted(tag_ids, raw_tags)
        tags = ItemTags(ni, len(tag_ids), items, tag_index)
        info["tags_file"] = str(path)
        info["tag_ids"] = tag_ids
    if graph_file is not None:
        path, src, dst = graph_file
        info["item_graph"] = ItemGraph(ni, src, dst, directed=False)
        info["item_graph_file"] = str(path)

    if rating_range is None:
        values = np.concatenate([p.ratings for p in parts])
        rating_range = (float(values.min()), float(values.max()))
    data = Ratings(
        name=name or root.name,
        n_users=nu,
        n_items=ni,
        train=train,
        test=test,
        valid=valid,
        rating_range=(float(rating_range[0]), float(rating_range[1])),
        social=social,
        tags=tags,
        info=info,
    )
    if valid_fraction > 0 and valid is None:
        data = carve_validation(data, valid_fraction, seed)
    return data
