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
from fedgraphrec.data._ids import Rows, apply_test_only, kcore_mask, pair_keys, to_index, universe
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
    threshold: float | None = None,
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
    if threshold is not None:
        below = keep & (ratings < threshold)
        counts["below_threshold_rows"] = counts.get("below_threshold_rows", 0) + int(below.sum())
        keep &= ~below
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


def _rows(split: RatingSplit) -> Rows:
    return split.users, split.items, split.ratings


def _kcore(parts: dict[str, RatingSplit], k: int, counts: dict[str, int]) -> dict[str, RatingSplit]:
    """Every split restricted to the iterated ``k``-core of all of them together."""
    keys = list(parts)
    sizes = np.cumsum([0, *(len(parts[key]) for key in keys)])
    mask = kcore_mask(
        np.concatenate([parts[key].users for key in keys]),
        np.concatenate([parts[key].items for key in keys]),
        k,
    )
    counts["kcore_rows_removed"] = int((~mask).sum())
    return {key: _take(parts[key], mask[sizes[n] : sizes[n + 1]]) for n, key in enumerate(keys)}


def _take(split: RatingSplit, mask: np.ndarray) -> RatingSplit:
    return RatingSplit(split.users[mask], split.items[mask], split.ratings[mask])


def _drop_seen(parts: dict[str, RatingSplit], counts: dict[str, int]) -> dict[str, RatingSplit]:
    """Held-out rows whose (user, item) pair is also in train are dropped (counted per split)."""
    train = parts["train"]
    out = {"train": train}
    for key, split in parts.items():
        if key == "train":
            continue
        keys = pair_keys(
            np.concatenate([train.users, split.users]), np.concatenate([train.items, split.items])
        )
        seen = np.isin(keys[len(train) :], keys[: len(train)])
        counts[f"dropped_{key}_overlap"] = int(seen.sum())
        out[key] = _take(split, ~seen)
    return out


def _remap(split: RatingSplit, user_ids: np.ndarray, item_ids: np.ndarray) -> RatingSplit:
    return RatingSplit(to_index(split.users, user_ids), to_index(split.items, item_ids), split.ratings)


def load_rating_folder(
    folder: str | Path,
    *,
    name: str | None = None,
    rating_range: tuple[float, float] | None = None,
    drop_zero: bool = False,
    dedup: Dedup = "last",
    social_directed: bool = True,
    n_users: int | None = None,
    n_items: int | None = None,
    fractions: tuple[float, float, float] = DEFAULT_FRACTIONS,
    valid_fraction: float = 0.0,
    seed: int = 0,
    threshold: float | None = None,
    kcore: int | None = None,
    test_only: str = "drop",
) -> Ratings:
    """Load a rating folder (see the module docstring for the files).

    Cleaning happens in this order, separately for every rating file: rows with rating 0 are
    dropped when ``drop_zero`` (Ciao marks "no rating" with 0, outside its 1–5 scale); the rest are
    checked against ``rating_range`` (a value outside is an error naming file and line); rows below
    ``threshold`` are dropped; then repeated (user, item) pairs are de-duplicated by ``dedup``:
    ``"last"`` (default) keeps the last occurrence in file order (the most recent edit in Tang's
    releases), ``"first"`` the first, ``"none"`` keeps every row. Then ``kcore`` keeps the iterated
    k-core of all files together, and the split is drawn. After the split, held-out rows whose pair
    is also in train are dropped (so no pair is in both, even with ``dedup="none"``), and held-out
    rows of users or items without a training rating are dropped unless ``test_only="keep"``. Every
    count is recorded in ``info``.

    Ids: the compact index spaces are the sorted ids that occur in the rating files *and* the side
    files (FilmTrust has trust-only users; item tags and the item graph name items), plus
    ``0..n_users-1`` / ``0..n_items-1`` when ``n_users``/``n_items`` declare a matrix size (Douban,
    Flixster: 3,000). A gap in the ids is no row; ``user_ids``/``item_ids`` hold the originals.

    Split: ``train.tsv``/``test.tsv`` when present (then ``valid_fraction`` > 0 carves a per-user
    validation share out of train); otherwise a seeded per-user split of ``ratings.tsv`` by
    ``fractions``.

    Args:
        folder: dataset folder.
        name: dataset name (defaults to the folder name).
        rating_range: legal (lowest, highest) rating; ``None`` infers it from the data.
        drop_zero: drop rating-0 rows before the range check.
        dedup: ``"last"``, ``"first"`` or ``"none"`` (see above).
        social_directed: whether ``social.tsv`` holds directed trust links (``False`` for a
            symmetric friendship graph already listed in both directions).
        n_users: declared size of the user id space (ids ``0..n_users-1`` are kept even if unused).
        n_items: declared size of the item id space.
        fractions: (train, valid, test) for the per-user split.
        valid_fraction: validation share carved from a fixed train split.
        seed: seed of the per-user split / carve-out.
        threshold: keep only ratings ≥ ``threshold`` (the implicit positives).
        kcore: keep the iterated ``kcore``-core of users and items, before the split.
        test_only: ``"drop"`` (default) or ``"keep"`` held-out rows of users/items absent from train.

    Returns:
        The ratings with their social graph and item tags (``None`` where the file is absent).

    Raises:
        DatasetNotFoundError: the folder or the rating file is missing.
        DataFormatError: a malformed file (naming file and line).
        ValueError: a bad option value (named).
    """
    if test_only not in ("drop", "keep"):
        raise ValueError(f"test_only must be 'drop' or 'keep', got {test_only!r}")
    root = require_folder(folder)
    counts: dict[str, int] = {}
    info: dict[str, object] = {"format": "ratings-tsv", "folder": str(root), "dedup": dedup}
    info.update({"threshold": threshold, "kcore": kcore, "test_only": test_only})
    train_path, test_path = (
        find_file(root, "train.tsv", "train.tsv.gz"),
        find_file(root, "test.tsv", "test.tsv.gz"),
    )
    parts: dict[str, RatingSplit]
    if train_path is not None and test_path is not None:
        parts = {
            key: _read_rating_file(path, rating_range, drop_zero, dedup, counts, threshold)
            for key, path in (("train", train_path), ("test", test_path))
        }
        if kcore is not None:
            parts = _kcore(parts, kcore, counts)
        info.update({"split": "fixed", "files": [str(train_path), str(test_path)]})
    else:
        path = require_file(root, *RATING_FILES)
        every = _read_rating_file(path, rating_range, drop_zero, dedup, counts, threshold)
        if kcore is not None:
            every = _kcore({"all": every}, kcore, counts)["all"]
        train, valid, test = split_ratings(
            every.users, every.items, every.ratings, fractions=fractions, seed=seed
        )
        parts = {"train": train, "test": test, **({"valid": valid} if valid is not None else {})}
        info.update({"split": "per-user", "fractions": fractions, "split_seed": seed, "files": [str(path)]})
    parts = _drop_seen(parts, counts)
    held, only = apply_test_only(
        _rows(parts["train"]),
        {k: _rows(v) for k, v in parts.items() if k != "train"},
        drop=test_only == "drop",
    )
    parts = {"train": parts["train"], **{k: RatingSplit(*v) for k, v in held.items()}}
    info.update({**counts, **only})

    social_file = _pair_file(root, "social.tsv")
    tags_file = _pair_file(root, "item_tags.tsv")
    graph_file = _pair_file(root, "item_graph.tsv")
    user_ids = universe(
        *(p.users for p in parts.values()),
        *((social_file[1], social_file[2]) if social_file else ()),
        np.arange(n_users or 0, dtype=np.int64),
    )
    item_ids = universe(
        *(p.items for p in parts.values()),
        *((tags_file[1],) if tags_file else ()),
        *((graph_file[1], graph_file[2]) if graph_file else ()),
        np.arange(n_items or 0, dtype=np.int64),
    )
    nu, ni = len(user_ids), len(item_ids)

    social = None
    if social_file is not None:
        path, src, dst = social_file
        social = SocialGraph(nu, to_index(src, user_ids), to_index(dst, user_ids), directed=social_directed)
        info["social_file"] = str(path)
        info["social_self_loops"] = int((src == dst).sum())
        info["social_duplicate_rows"] = len(src) - len(sorted_unique(social.src * nu + social.dst))
    tags = None
    if tags_file is not None:
        path, items, raw_tags = tags_file
        tag_ids = sorted_unique(raw_tags)
        tags = ItemTags(ni, len(tag_ids), to_index(items, item_ids), np.searchsorted(tag_ids, raw_tags))
        info["tags_file"] = str(path)
        info["tag_ids"] = tag_ids
    if graph_file is not None:
        path, src, dst = graph_file
        info["item_graph"] = ItemGraph(ni, to_index(src, item_ids), to_index(dst, item_ids), directed=False)
        info["item_graph_file"] = str(path)

    if rating_range is None:
        values = np.concatenate([p.ratings for p in parts.values()])
        rating_range = (float(values.min()), float(values.max()))
    data = Ratings(
        name=name or root.name,
        n_users=nu,
        n_items=ni,
        train=_remap(parts["train"], user_ids, item_ids),
        test=_remap(parts["test"], user_ids, item_ids),
        valid=_remap(parts["valid"], user_ids, item_ids) if "valid" in parts else None,
        rating_range=(float(rating_range[0]), float(rating_range[1])),
        social=social,
        tags=tags,
        info=info,
        user_ids=user_ids,
        item_ids=item_ids,
    )
    if valid_fraction > 0 and "valid" not in parts:
        data = carve_validation(data, valid_fraction, seed)
    return data
