"""Loader for the original MovieLens-100K release (``u.data``, ``u1..u5``/``ua``/``ub`` splits)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp

from fedgraphrec.data._arrays import sorted_unique
from fedgraphrec.data._ids import apply_test_only, duplicate_mask, pair_keys
from fedgraphrec.data._io import require_file, require_folder
from fedgraphrec.data._table import check_range, read_table
from fedgraphrec.data.errors import DataError
from fedgraphrec.data.loaders._compact import remap
from fedgraphrec.data.splits import DEFAULT_FRACTIONS, TEST, TRAIN, VALID, carve_validation, per_user_split
from fedgraphrec.data.types import Interactions, Ratings, RatingSplit, binary_csr

FIXED_SPLITS = ("u1", "u2", "u3", "u4", "u5", "ua", "ub")
RATING_RANGE = (1.0, 5.0)
Compact = Literal["train", "all"]
Rows = tuple[np.ndarray, np.ndarray, np.ndarray]


def read_ml_ratings(path: Path) -> Rows:
    """Read one ``user<TAB>item<TAB>rating<TAB>timestamp`` file as (users, items, ratings).

    Raises:
        DataFormatError: wrong column count, bad numbers, negative ids or a rating outside 1..5.
    """
    table = read_table(path, ("id", "id", "float", "id"))
    check_range(table, 2, *RATING_RANGE)
    users, items, ratings, _ = table.columns
    return users, items, ratings


def _select(rows: Rows, mask: np.ndarray) -> Rows:
    return rows[0][mask], rows[1][mask], rows[2][mask]


def _threshold(rows: Rows, threshold: float | None) -> Rows:
    return rows if threshold is None else _select(rows, rows[2] >= threshold)


def _parts(
    root: Path,
    split: str | None,
    threshold: float | None,
    fractions: tuple[float, float, float],
    seed: int,
) -> tuple[dict[str, Rows], dict[str, object]]:
    """Read the requested split, thresholded, as train/valid/test rows with original ids."""
    if split in (None, "all"):
        path = require_file(root, "u.data")
        rows = _threshold(read_ml_ratings(path), threshold)
        unique = duplicate_mask(rows[0], rows[1], "last")  # collapsed before the split
        rows = _select(rows, unique)
        labels = per_user_split(rows[0], fractions, seed)
        parts = {"train": _select(rows, labels == TRAIN), "test": _select(rows, labels == TEST)}
        if fractions[1] > 0:
            parts["valid"] = _select(rows, labels == VALID)
        meta = {"files": [str(path)], "split": "per-user", "fractions": fractions, "split_seed": seed}
        return parts, {**meta, "duplicate_rows_removed": int((~unique).sum())}
    if split not in FIXED_SPLITS:
        choices = ", ".join(FIXED_SPLITS)
        raise DataError(f"unknown MovieLens-100K split {split!r}; use one of {choices} or 'all'")
    base = require_file(root, f"{split}.base")
    test = require_file(root, f"{split}.test")
    parts = {
        "train": _threshold(read_ml_ratings(base), threshold),
        "test": _threshold(read_ml_ratings(test), threshold),
    }
    return parts, {"files": [str(base), str(test)], "split": split}


def _universe(
    root: Path, parts: dict[str, Rows], compact: Compact, split: str | None
) -> tuple[np.ndarray, ...]:
    """Sorted original user and item ids that become the compact index space."""
    if compact == "train":
        users, items, _ = parts["train"]
    elif compact == "all":
        udata = root / "u.data"
        if udata.is_file():
            users, items, _ = read_ml_ratings(udata)
        else:
            base = read_ml_ratings(require_file(root, f"{split}.base"))
            test = read_ml_ratings(require_file(root, f"{split}.test"))
            users = np.concatenate([base[0], test[0]])
            items = np.concatenate([base[1], test[1]])
    else:
        raise DataError(f"unknown compaction {compact!r}; use 'train' or 'all'")
    return sorted_unique(users), sorted_unique(items)


def _drop_seen(parts: dict[str, Rows]) -> tuple[dict[str, Rows], dict[str, int]]:
    """Held-out rows whose (user, item) pair is also in train are dropped (counted per split)."""
    train = parts["train"]
    out, counts = {"train": train}, {}
    for key, rows in parts.items():
        if key != "train":
            keys = pair_keys(np.concatenate([train[0], rows[0]]), np.concatenate([train[1], rows[1]]))
            seen = np.isin(keys[len(train[0]) :], keys[: len(train[0])])
            counts[f"dropped_{key}_overlap"] = int(seen.sum())
            out[key] = _select(rows, ~seen)
    return out, counts


def _compact(
    root: Path, parts: dict[str, Rows], compact: Compact, split: str | None
) -> tuple[dict[str, Rows], np.ndarray, np.ndarray, dict[str, int]]:
    user_ids, item_ids = _universe(root, parts, compact, split)
    parts, dropped = _drop_seen(parts)
    _, only = apply_test_only(parts["train"], {k: v for k, v in parts.items() if k != "train"}, drop=False)
    out: dict[str, Rows] = {}
    for key, (u, i, r) in parts.items():
        cu, ku = remap(u, user_ids)
        ci, ki = remap(i, item_ids)
        keep = ku & ki
        out[key] = (cu[keep], ci[keep], r[keep])
        if key != "train":
            dropped[f"dropped_{key}"] = int((~keep).sum())
    rows_dropped = sum(v for k, v in dropped.items() if not k.endswith("_overlap"))
    return out, user_ids, item_ids, {**dropped, **only, "test_only_rows_dropped": rows_dropped}


def _read(
    folder: str | Path,
    split: str | None,
    threshold: float | None,
    compact: Compact,
    fractions: tuple[float, float, float],
    seed: int,
) -> tuple[dict[str, Rows], np.ndarray, np.ndarray, dict[str, Any]]:
    """The split's compacted rows, the original user and item ids, and the info both loaders record.

    Raises the errors :func:`load_ml100k` lists.
    """
    root = require_folder(folder)
    parts, info = _parts(root, split, threshold, fractions, seed)
    parts, user_ids, item_ids, dropped = _compact(root, parts, compact, split)
    return parts, user_ids, item_ids, {**info, **dropped, "format": "ml100k", "folder": str(root)}


def load_ml100k(
    folder: str | Path,
    split: str | None = "u1",
    threshold: float | None = 4.0,
    compact: Compact = "train",
    *,
    seed: int = 0,
    fractions: tuple[float, float, float] = DEFAULT_FRACTIONS,
    valid_fraction: float = 0.0,
    name: str = "ml-100k",
) -> Interactions:
    """Load MovieLens-100K as implicit feedback.

    A rating ``>= threshold`` is a positive interaction; every other rating is dropped
    (``threshold=None`` keeps every rating).

    Id compaction (``compact``):
        * ``"train"`` (default): users and items are renumbered ``0..n-1`` in ascending original id
          over those that occur in the (thresholded) *training* data. Validation/test interactions
          whose user or item does not occur in train are dropped, and their numbers are recorded in
          ``info["dropped_test"]`` / ``info["dropped_valid"]``. For ``u1`` with threshold 4 this gives
          942 users and 1,408 items. This is the test-only rule of every loader: the counts of
          held-out users/items without a training row are ``info["test_only_users"]`` and
          ``info["test_only_items"]``.
        * ``"all"``: compaction over the ids of the full ``u.data`` (943 × 1,682, ratings below the
          threshold included), so nothing is dropped and users without positives keep empty rows.
        ``user_ids``/``item_ids`` give the original (1-based) id of every compact index.

    Args:
        folder: folder with the GroupLens files.
        split: a fixed split (``u1``..``u5``, ``ua``, ``ub``: ``<split>.base`` is train and
            ``<split>.test`` is test), or ``"all"``/``None`` for ``u.data`` with a seeded per-user
            split by ``fractions``.
        threshold: lowest rating kept as positive, or ``None`` for all ratings.
        compact: ``"train"`` or ``"all"`` (see above).
        seed: seed for the per-user split and the validation carve-out.
        fractions: (train, valid, test) for ``split="all"``.
        valid_fraction: for a fixed split, move this per-user fraction of train into ``valid``.
        name: dataset name.

    Returns:
        The binary train/valid/test matrices.

    Raises:
        DatasetNotFoundError: the folder or a needed file is missing.
        DataFormatError: a malformed file (naming file and line).
        DataError: an unknown split or compaction.
    """
    parts, user_ids, item_ids, info = _read(folder, split, threshold, compact, fractions, seed)
    n_users, n_items = len(user_ids), len(item_ids)

    def mat(key: str) -> sp.csr_matrix:
        u, i, _ = parts[key]
        return binary_csr(u, i, n_users, n_items)

    data = Interactions(
        name=name,
        n_users=n_users,
        n_items=n_items,
        train=mat("train"),
        test=mat("test"),
        valid=mat("valid") if "valid" in parts else None,
        user_ids=user_ids,
        item_ids=item_ids,
        info={**info, "threshold": threshold, "compact": compact},
    )
    if valid_fraction > 0:
        data = carve_validation(data, valid_fraction, seed)
    return data


def load_ml100k_ratings(
    folder: str | Path,
    split: str | None = "u1",
    compact: Compact = "all",
    *,
    seed: int = 0,
    fractions: tuple[float, float, float] = DEFAULT_FRACTIONS,
    valid_fraction: float = 0.0,
    name: str = "ml-100k-ratings",
) -> Ratings:
    """Load MovieLens-100K as explicit ratings on the 1..5 scale.

    The split options are those of :func:`load_ml100k`. Compaction defaults to ``"all"`` (the full
    943 × 1,682 id space, nothing dropped); ``"train"`` drops test/validation ratings of users or
    items unseen in train and records the counts in ``info``. The original ids are ``user_ids`` and
    ``item_ids`` (also kept in ``info`` for older readers).

    Raises:
        DatasetNotFoundError: the folder or a needed file is missing.
        DataFormatError: a malformed file (naming file and line).
        DataError: an unknown split or compaction.
    """
    parts, user_ids, item_ids, info = _read(folder, split, None, compact, fractions, seed)
    data = Ratings(
        name=name,
        n_users=len(user_ids),
        n_items=len(item_ids),
        train=RatingSplit(*parts["train"]),
        test=RatingSplit(*parts["test"]),
        valid=RatingSplit(*parts["valid"]) if "valid" in parts else None,
        rating_range=RATING_RANGE,
        info={**info, "compact": compact, "user_ids": user_ids, "item_ids": item_ids},
        user_ids=user_ids,
        item_ids=item_ids,
    )
    if valid_fraction > 0:
        data = carve_validation(data, valid_fraction, seed)
    return data
