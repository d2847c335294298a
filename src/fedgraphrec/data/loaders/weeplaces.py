"""Loader for the GroupIM release of Weeplaces (``interactions.tsv.gz``: user, item, split)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from fedgraphrec.data._io import require_file, require_folder
from fedgraphrec.data._table import read_table
from fedgraphrec.data.loaders._compact import drop_overlap
from fedgraphrec.data.types import Interactions, binary_csr

INTERACTION_FILES = ("interactions.tsv.gz", "interactions.tsv")
SPLIT_NAMES = ("train", "val_foldin", "val_heldout", "test_foldin", "test_heldout")
TRAIN_PARTS = ("train", "val_foldin", "test_foldin")


def load_weeplaces(folder: str | Path, *, name: str | None = None) -> Interactions:
    """Load Weeplaces user–POI check-ins as implicit feedback.

    GroupIM splits its *users* into train/val/test groups and, for val and test users, splits their
    items into a fold-in part (known at test time) and a held-out part (to predict). Here that maps
    to the usual transductive layout:

    * ``train`` = ``train`` rows + ``val_foldin`` + ``test_foldin``;
    * ``valid`` = ``val_heldout``;
    * ``test``  = ``test_heldout``.

    Held-out pairs that also occur in train (none in the stored copy) are removed and counted in
    ``info["dropped_valid_overlap"]``/``info["dropped_test_overlap"]``.

    Sizes are the largest ids plus one (8,643 users × 25,081 POIs for the stored copy). The group
    files are not read; ``info["rows_per_split"]`` records the row counts.

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
    n_users = int(users.max()) + 1
    n_items = int(items.max()) + 1

    def mat(*parts: str) -> sp.csr_matrix:
        m = np.isin(labels, parts)
        return binary_csr(users[m], items[m], n_users, n_items)

    rows = {s: int((labels == s).sum()) for s in SPLIT_NAMES}
    train = mat(*TRAIN_PARTS)
    valid, dropped_valid = drop_overlap(mat("val_heldout"), train)
    test, dropped_test = drop_overlap(mat("test_heldout"), train)
    return Interactions(
        name=name or root.name,
        n_users=n_users,
        n_items=n_items,
        train=train,
        valid=valid,
        test=test,
        info={
            "dropped_valid_overlap": dropped_valid,
            "dropped_test_overlap": dropped_test,
            "format": "weeplaces",
            "folder": str(root),
            "files": [str(path)],
            "split": "train+val_foldin+test_foldin / val_heldout / test_heldout",
            "rows_per_split": rows,
        },
    )
