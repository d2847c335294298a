"""Loader for the LightGCN / NGCF text format (Gowalla, Yelp2018, Amazon-Book)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedgraphrec.data._ids import apply_test_only, to_index, universe
from fedgraphrec.data._io import find_file, read_bytes, require_folder
from fedgraphrec.data._table import Ragged, read_ragged_ids
from fedgraphrec.data.errors import DataFormatError, DatasetNotFoundError
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


def _declared(path: Path | None) -> np.ndarray:
    """The ``remap_id`` column (the last) of a ``user_list.txt``/``item_list.txt``; header skipped."""
    if path is None:
        return np.zeros(0, dtype=np.int64)
    out: list[int] = []
    for n, line in enumerate(read_bytes(path).decode("utf-8", "replace").splitlines(), start=1):
        tokens = line.split()
        if not tokens or (n == 1 and not tokens[-1].isdigit()):
            continue
        if not tokens[-1].isdigit():
            raise DataFormatError(path, n, f"the last column {tokens[-1]!r} is not an integer id")
        out.append(int(tokens[-1]))
    return np.asarray(out, dtype=np.int64)


def load_lightgcn(
    folder: str | Path,
    *,
    name: str | None = None,
    require_train: bool = True,
    valid_fraction: float = 0.0,
    seed: int = 0,
    user_fraction: float = 1.0,
    sample_seed: int = 0,
    test_only: str = "drop",
) -> Interactions:
    """Load a folder in the LightGCN format.

    Files: ``train.txt`` and ``test.txt`` (either may be gzipped as ``*.txt.gz``). Each line is
    ``user item item ...`` with non-negative integer ids; a line may repeat a user (the item
    sets are merged) and an item may repeat within a line (it collapses to one interaction). In
    ``test.txt`` a line with only a user id is valid and means that user has no test items; in
    ``train.txt`` it is an error, because a user without training items cannot be served.

    Ids: the compact index space is the sorted ids that occur in the files (after the test-only
    rule), plus the ``remap_id`` column of ``user_list.txt``/``item_list.txt`` when those exist
    (ids the release declares). A gap in the ids is no row; ids that are already ``0..n-1`` keep
    their meaning (``user_ids``/``item_ids`` is then the identity).

    Test-only ids: test rows of users or items without a training row are dropped (counts in
    ``info["test_only_users"]``, ``["test_only_items"]``, ``["test_only_rows_dropped"]``) unless
    ``test_only="keep"``; a folder without a training file keeps its test rows.

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
        test_only: ``"drop"`` (default) or ``"keep"`` test rows of users/items absent from train.

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

    if test_only not in ("drop", "keep"):
        raise ValueError(f"test_only must be 'drop' or 'keep', got {test_only!r}")
    held, counts = apply_test_only(
        (train_u, train_i, train_u),
        {"test": (test_u, test_i, test_u)},
        drop=test_only == "drop" and train_path is not None,
    )
    test_u, test_i, _ = held["test"]
    user_ids = universe(train_u, test_u, _declared(find_file(root, "user_list.txt")))
    item_ids = universe(train_i, test_i, _declared(find_file(root, "item_list.txt")))
    n_users, n_items = len(user_ids), len(item_ids)
    train_u, test_u = to_index(train_u, user_ids), to_index(test_u, user_ids)
    train_i, test_i = to_index(train_i, item_ids), to_index(test_i, item_ids)

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
        **counts,
        "test_only": test_only,
    }
    data = Interactions(
        name=ds_name,
        n_users=n_users,
        n_items=n_items,
        train=train,
        test=test,
        user_ids=user_ids,
        item_ids=item_ids,
        info=info,
    )
    if user_fraction != 1.0:
        data = sample_users(data, user_fraction, sample_seed)
    if valid_fraction > 0:
        data = carve_validation(data, valid_fraction, seed)
    return data
