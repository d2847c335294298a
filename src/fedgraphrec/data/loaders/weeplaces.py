"""Loader for the GroupIM release of Weeplaces (``interactions.tsv.gz``: user, item, split)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from fedgraphrec.data._ids import Rows, apply_test_only, to_index, universe
from fedgraphrec.data._io import read_bytes, require_file, require_folder
from fedgraphrec.data._table import read_table
from fedgraphrec.data.loaders._compact import drop_overlap
from fedgraphrec.data.types import Interactions, binary_csr

INTERACTION_FILES = ("interactions.tsv.gz", "interactions.tsv")
GROUP_USER_FILES = ("group_users.tsv", "group_users.tsv.gz")
GROUP_ITEM_FILES = ("group_items.tsv", "group_items.tsv.gz")
SPLIT_NAMES = ("train", "val_foldin", "val_heldout", "test_foldin", "test_heldout")
TRAIN_PARTS = ("train", "val_foldin", "test_foldin")


def is_weeplaces_file(path: Path) -> bool:
    """Whether the first line of ``path`` is ``user item split`` with a GroupIM split name."""
    try:
        first = read_bytes(path)[:4096].split(b"\n", 1)[0].split()
    except OSError:
        return False
    return len(first) == 3 and first[2].decode("utf-8", "replace") in SPLIT_NAMES


def load_weeplaces(folder: str | Path, *, name: str | None = None, test_only: str = "drop") -> Interactions:
    """Load Weeplaces user–POI check-ins as implicit feedback.

    GroupIM splits its *users* into train/val/test groups and, for val and test users, splits their
    items into a fold-in part (known at test time) and a held-out part (to predict). Here that maps
    to the usual transductive layout:

    * ``train`` = ``train`` rows + ``val_foldin`` + ``test_foldin``;
    * ``valid`` = ``val_heldout``;
    * ``test``  = ``test_heldout``.

    Held-out pairs that also occur in train (none in the stored copy) are removed and counted in
    ``info["dropped_valid_overlap"]``/``info["dropped_test_overlap"]``.

    Ids are compacted to the sorted ids that occur (:mod:`fedgraphrec.data._ids`; the originals are
    ``user_ids``/``item_ids``). Held-out rows of users or items without a training row (22 users and
    36 POIs of the stored copy) are dropped unless ``test_only="keep"``; the counts are
    ``info["test_only_users"]``, ``["test_only_items"]`` and ``["test_only_rows_dropped"]``. The
    group files are not read; ``info["rows_per_split"]`` records the row counts.

    Raises:
        DatasetNotFoundError: the folder or the interactions file is missing.
        DataFormatError: wrong column count, bad id, or an unknown split name (naming file and line).
    """
    root = require_folder(folder)
    path = require_file(root, *INTERACTION_FILES)
    table = read_table(path, ("id", "id", "str"))
    users, items, splits = table.columns
    names, codes = np.unique(splits, return_inverse=True)
    known = np.array([n.decode("utf-8", "replace") in SPLIT_NAMES for n in names])
    if not known.all():
        bad_rows = np.flatnonzero(~known[codes])
        row = int(bad_rows[0])
        shown = splits[row].decode("utf-8", "replace")
        raise table.fail(row, f"column 3: unknown split {shown!r}; expected one of {', '.join(SPLIT_NAMES)}")
    labels = np.array([n.decode() for n in names])[codes]
    if test_only not in ("drop", "keep"):
        raise ValueError(f"test_only must be 'drop' or 'keep', got {test_only!r}")

    def part(*parts: str) -> Rows:
        m = np.isin(labels, parts)
        return users[m], items[m], np.ones(int(m.sum()))

    held, counts = apply_test_only(
        part(*TRAIN_PARTS),
        {"val_heldout": part("val_heldout"), "test_heldout": part("test_heldout")},
        drop=test_only == "drop",
    )
    kept = {"train": part(*TRAIN_PARTS), **held}
    user_ids = universe(*(r[0] for r in kept.values()))
    item_ids = universe(*(r[1] for r in kept.values()))
    n_users, n_items = len(user_ids), len(item_ids)

    def mat(key: str) -> sp.csr_matrix:
        u, i, _ = kept[key]
        return binary_csr(to_index(u, user_ids), to_index(i, item_ids), n_users, n_items)

    rows = {s: int((labels == s).sum()) for s in SPLIT_NAMES}
    train = mat("train")
    valid, dropped_valid = drop_overlap(mat("val_heldout"), train)
    test, dropped_test = drop_overlap(mat("test_heldout"), train)
    return Interactions(
        name=name or root.name,
        n_users=n_users,
        n_items=n_items,
        train=train,
        valid=valid,
        test=test,
        user_ids=user_ids,
        item_ids=item_ids,
        info={
            **counts,
            "test_only": test_only,
            "dropped_valid_overlap": dropped_valid,
            "dropped_test_overlap": dropped_test,
            "format": "weeplaces",
            "folder": str(root),
            "files": [str(path)],
            "split": "train+val_foldin+test_foldin / val_heldout / test_heldout",
            "rows_per_split": rows,
        },
    )


def load_weeplaces_groups(folder: str | Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """GroupIM's groups of Weeplaces: ``(group, user)`` memberships and ``(group, item)`` visits.

    Returns four arrays in the raw ids of the files (the interactions file's user and item ids):
    the memberships' groups and users (``group_users.tsv``), then the group–item rows' groups and
    items (``group_items.tsv``, every split: a group's split says which group partition it is in,
    not which of its members' interactions are held out).

    Raises:
        DatasetNotFoundError: the folder or a group file is missing.
        DataFormatError: a line with the wrong column count or a bad id (naming file and line).
    """
    root = require_folder(folder)
    members = read_table(require_file(root, *GROUP_USER_FILES), ("id", "id"))
    visits = read_table(require_file(root, *GROUP_ITEM_FILES), ("id", "id", "str"))
    (g_users, users), (g_items, items) = members.columns, visits.columns[:2]
    return g_users, users, g_items, items
