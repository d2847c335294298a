"""Loader for the LightGCN / NGCF text format (Gowalla, Yelp2018, Amazon-Book)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedgraphrec.data._io import find_file, require_folder
from fedgraphrec.data._table import Ragged, count_entries, read_ragged_ids
from fedgraphrec.data.errors import DatasetNotFoundError
from fedgraphrec.data.loaders._compact import drop_overlap
from fedgraphrec.data.splits import carve_validation, sample_users
from fedgraphrec.data.types import Interactions, binary_csr

TRAIN_FILES = ("train.txt", "train.txt.gz")
TEST_FILES = ("test.txt", "test.txt.gz")


def _pairs(ragged: Ragged, allow_empty: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """Expand ``user item item ...`` rows into (user, item) pairs; also count item-less rows."""
    starts = np.concatenate([[0], np.cumsum(ragged.lengths)[:-1]])
    users = ragged.values[starts]
    n_items_per_row = ragged.lengths - 1
    empty = np.flatnonzero(n_items_per_row == 0)
    if len(empty) and not allow_empty:
        row = int(empty[0])
        raise ragged.fail(row, f"user {int(users[row])} has no items (a training line needs at least one)")
    is_item = np.ones(len(ragged.values), dtype=bool)
    is_item[starts] = False
    return np.repeat(users, n_items_per_row), ragged.values[is_item], len(empty)


def _max_plus_one(*arrays: np.ndarray) -> int:
    return max((int(a.max()) + 1 for a in arrays if len(a)), default=0)


def load_lightgcn(
    folder: str | Path,
    *,
    name: str | None = None,
    require_train: bool = True,
    valid_fraction: float = 0.0,
    seed: int = 0,
    user_fraction: float = 1.0,
    sample_seed: int = 0,
) -> Interactions:
    """Load a folder in the LightGCN format.

    Files: ``train.txt`` and ``test.txt`` (either may be gzipped as ``*.txt.gz``). Each line is
    ``user item item ...`` with 0-based, already compact ids; a line may repeat a user (the item
    sets are merged) and an item may repeat within a line (it collapses to one interaction). In
    ``test.txt`` a line with only a user id is valid and means that user has no test items; in
    ``train.txt`` it is an error, because a user without training items cannot be served.

    Sizes: ``n_users``/``n_items`` are the largest id in either file plus one, or the number of
    entries in ``user_list.txt``/``item_list.txt`` when those files exist and are larger (so users
    or items that never occur keep their rows).

    Test pairs that also occur in train are removed from test (the evaluation masks training items,
    so they could never be ranked); their number is recorded in ``info["dropped_test_overlap"]``.

    Args:
        folder: the dataset folder.
        name: dataset name (defaults to the folder name).
        require_train: when ``False``, a folder without a training file loads with an empty train
            matrix (used for listing partial datasets such as Amazon-Book); otherwise that raises.
        valid_fraction: if > 0, move this seeded per-user fraction of train into ``valid``.
        seed: seed for the validation carve-out.
        user_fraction: if < 1, keep only this seeded share of the users (their own train/test
            rows; :func:`~fedgraphrec.data.splits.sample_users`), before the validation carve-out:
            a CPU-budget stand-in for the whole benchmark.
        sample_seed: seed of the user sample (independent of the run seed, so every run of a
            table sees the same users).

    Returns:
        Binary train/test (and optionally valid) matrices.

    Raises:
        DatasetNotFoundError: the folder or ``test.txt`` is missing, or ``train.txt`` is missing and
            ``require_train`` is true (the message says the training set is missing).
        DataFormatError: a malformed line (naming file and line).
    """
    root = require_folder(folder)
    ds_name = name or root.name
    test_path = find_file(root, *TEST_FILES)
    train_path = find_file(root, *TRAIN_FILES)
    if train_path is None and (require_train or test_path is None):
        present = f" (only {test_path.name} is present)" if test_path is not None else ""
        raise DatasetNotFoundError(
            f"{ds_name}: the training set is missing: no train.txt or train.txt.gz in {root}{present}; "
            "this dataset cannot be used for training"
        )
    if test_path is None:
        raise DatasetNotFoundError(f"{ds_name}: no test.txt or test.txt.gz in {root}")

    test_u, test_i, empty_test_users = _pairs(read_ragged_ids(test_path), allow_empty=True)
    if train_path is not None:
        train_u, train_i, _ = _pairs(read_ragged_ids(train_path), allow_empty=False)
    else:
        train_u = train_i = np.zeros(0, dtype=np.int64)

    n_users = _max_plus_one(train_u, test_u)
    n_items = _max_plus_one(train_i, test_i)
    user_list = find_file(root, "user_list.txt")
    item_list = find_file(root, "item_list.txt")
    if user_list is not None:
        n_users = max(n_users, count_entries(user_list))
    if item_list is not None:
        n_items = max(n_items, count_entries(item_list))

    train = binary_csr(train_u, train_i, n_users, n_items)
    test, dropped_overlap = drop_overlap(binary_csr(test_u, test_i, n_users, n_items), train)
    info: dict[str, object] = {
        "format": "lightgcn",
        "folder": str(root),
        "train_file": str(train_path) if train_path is not None else None,
        "test_file": str(test_path),
        "duplicate_train_pairs": len(train_u) - int(train.nnz),
        "dropped_test_overlap": dropped_overlap,
        "test_users_without_items": empty_test_users,
        "train_missing": train_path is None,
    }
    data = Interactions(name=ds_name, n_users=n_users, n_items=n_items, train=train, test=test, info=info)
    if user_fraction != 1.0:
        data = sample_users(data, user_fraction, sample_seed)
    if valid_fraction > 0:
        data = carve_validation(data, valid_fraction, seed)
    return data
