"""Loader for plain interaction files: CSV, TSV or Parquet rows of (user, item [, rating [, timestamp]]).

Input: one file (``--dataset my.csv``), or a folder holding ``interactions.csv|tsv|parquet`` (one
file, split here) or ``train.*`` + ``test.*`` (+ optional ``valid.*``; a fixed split). CSV and TSV
may be gzipped (``.csv.gz``). Ids may be integers or text; they are compacted to ``0..n-1`` in
sorted order (:mod:`fedgraphrec.data._ids`) and the originals kept in ``user_ids``/``item_ids``.

Cleaning, in this order: ``threshold`` keeps rows whose rating is ≥ it (the implicit positives);
repeated (user, item) rows collapse to one (the last); held-out pairs that are also in train are
dropped; ``kcore`` keeps the iterated k-core (users and items with ≥ k distinct pairs); a single
file is split per user (``test_fraction``, ``valid_fraction``, ``seed``); held-out rows of users or
items absent from train are dropped (``test_only="drop"``) or kept (``"keep"``). Every count is in
``info``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import scipy.sparse as sp

from fedgraphrec.data._delimited import FILE_FORMATS, Column, RawRows, file_format, read_rows
from fedgraphrec.data._ids import (
    Rows,
    apply_test_only,
    duplicate_mask,
    kcore_mask,
    pair_keys,
    to_index,
    universe,
)
from fedgraphrec.data._io import find_file
from fedgraphrec.data.errors import DataFormatError, DatasetNotFoundError
from fedgraphrec.data.splits import SPLIT_STREAM, TEST, TRAIN, VALID, carve_validation, per_user_split
from fedgraphrec.data.types import Interactions, binary_csr

TestOnly = Literal["drop", "keep"]
HINT = "fedgraphrec train central --dataset {path} --set dataset_options.format={fmt}"
_EXTENSIONS = tuple(f".{e}{gz}" for e in FILE_FORMATS for gz in ("", ".gz") if not (e == "parquet" and gz))


def _candidates(folder: Path, stem: str) -> Path | None:
    return find_file(folder, *(stem + ext for ext in _EXTENSIONS))


def interaction_files(folder: Path) -> dict[str, Path] | None:
    """The interaction files of ``folder`` by split (``"all"``, or ``"train"``/``"test"``/``"valid"``)."""
    single = _candidates(folder, "interactions")
    if single is not None:
        return {"all": single}
    train, test = _candidates(folder, "train"), _candidates(folder, "test")
    if train is None or test is None:
        return None
    files = {"train": train, "test": test}
    valid = _candidates(folder, "valid")
    if valid is not None:
        files["valid"] = valid
    return files


def _columns(columns: Sequence[Column] | str | None) -> Sequence[Column] | None:
    if isinstance(columns, str):
        return [c.strip() for c in columns.split(",")]
    return columns


def _resolve(path: Path) -> dict[str, Path]:
    if path.is_file():
        return {"all": path}
    if not path.is_dir():
        raise DatasetNotFoundError(f"no such file or folder: {path}")
    files = interaction_files(path)
    if files is None:
        raise DatasetNotFoundError(
            f"{path}: no interactions.csv|tsv|parquet and no train.* + test.* pair; "
            f"or name a file: {HINT.format(path=path / 'my.csv', fmt='csv')}"
        )
    return files


def _read(path: Path, fmt: str | None, header: bool | None, columns: Sequence[Column] | None) -> RawRows:
    kind = file_format(path, fmt, HINT.replace("{path}", str(path)))
    try:
        return read_rows(path, kind, header, columns)
    except DataFormatError as exc:
        if fmt is None and exc.line is None and "Parquet" in exc.reason:
            raise DataFormatError(
                path, None, f"{exc.reason}; if it is text, say so: {HINT.format(path=path, fmt='csv')}"
            ) from None
        raise


def _rows(raw: RawRows, mask: np.ndarray | None = None) -> Rows:
    values = raw.ratings if raw.ratings is not None else np.ones(len(raw.users))
    if mask is None:
        return raw.users, raw.items, values
    return raw.users[mask], raw.items[mask], values[mask]


def _select(rows: Rows, mask: np.ndarray) -> Rows:
    return rows[0][mask], rows[1][mask], rows[2][mask]


def _clean(
    raws: dict[str, RawRows], threshold: float | None, kcore: int | None, counts: dict[str, int]
) -> dict[str, Rows]:
    """Threshold, collapse duplicates, drop held-out pairs seen in train, k-core (module docstring order)."""
    parts: dict[str, Rows] = {}
    for key, raw in raws.items():
        keep = np.ones(len(raw.users), dtype=bool)
        if threshold is not None:
            if raw.ratings is None:
                raise DataFormatError(
                    raw.path, None, "threshold needs a rating column (see the columns option)"
                )
            keep &= raw.ratings >= threshold
            counts["below_threshold_rows"] += int((~keep).sum())
        rows = _rows(raw, keep)
        unique = duplicate_mask(rows[0], rows[1], "last")
        counts["duplicate_rows_removed"] += int((~unique).sum())
        parts[key] = _select(rows, unique)
    if "train" in parts:
        train = parts["train"]
        for key in [k for k in parts if k != "train"]:
            u, i, _ = parts[key]
            both = pair_keys(np.concatenate([train[0], u]), np.concatenate([train[1], i]))
            seen = np.isin(both[len(train[0]) :], both[: len(train[0])])
            counts[f"dropped_{key}_overlap"] = int(seen.sum())
            parts[key] = _select(parts[key], ~seen)
    if kcore is not None:
        keys = list(parts)
        sizes = np.cumsum([0, *(len(parts[k][0]) for k in keys)])
        mask = kcore_mask(
            np.concatenate([parts[k][0] for k in keys]), np.concatenate([parts[k][1] for k in keys]), kcore
        )
        counts["kcore_rows_removed"] = int((~mask).sum())
        parts = {k: _select(parts[k], mask[sizes[n] : sizes[n + 1]]) for n, k in enumerate(keys)}
    return parts


def load_interactions(
    path: str | Path,
    *,
    name: str | None = None,
    format: str | None = None,
    header: bool | None = None,
    columns: Sequence[Column] | str | None = None,
    threshold: float | None = None,
    kcore: int | None = None,
    seed: int = 0,
    test_fraction: float = 0.2,
    valid_fraction: float = 0.0,
    test_only: TestOnly = "drop",
) -> Interactions:
    """Load interaction rows as implicit feedback (see the module docstring for the rules).

    Args:
        path: a CSV/TSV/Parquet file, or a folder with ``interactions.*`` or ``train.*`` + ``test.*``.
        name: dataset name (default: the file's stem or the folder's name).
        format: ``"csv"``, ``"tsv"`` or ``"parquet"``; by default the file extension decides.
        header: whether the first line is a header; ``None`` detects it
            (:mod:`fedgraphrec.data._delimited` states the rule).
        columns: the user, item[, rating[, timestamp]] columns, by header name or 0-based position
            (a list, or a comma-separated string); default: header names that say so, else 0, 1, 2.
        threshold: keep only rows with rating ≥ ``threshold`` (needs a rating column).
        kcore: keep the iterated ``kcore``-core of users and items (before the split).
        seed: seed of the per-user split (and of a validation carve-out from a fixed split).
        test_fraction: each user's share of test rows when one file is split.
        valid_fraction: each user's share of validation rows (from train, for a fixed split).
        test_only: ``"drop"`` (default) or ``"keep"`` held-out rows of users/items absent from train.

    Raises:
        DatasetNotFoundError: no such file, or a folder without interaction files.
        DataFormatError: a malformed file, naming the file and line, with a working command.
        ValueError: a bad option value (named).
    """
    if test_only not in ("drop", "keep"):
        raise ValueError(f"test_only must be 'drop' or 'keep', got {test_only!r}")
    root = Path(path).expanduser()
    files = _resolve(root)
    raws = {key: _read(p, format, header, _columns(columns)) for key, p in files.items()}
    counts = dict.fromkeys(("below_threshold_rows", "duplicate_rows_removed"), 0)
    parts = _clean(raws, threshold, kcore, counts)
    info: dict[str, object] = {
        "format": "interactions",
        "files": [str(p) for p in files.values()],
        "header": {k: r.header for k, r in raws.items()},
        "threshold": threshold,
        "kcore": kcore,
        "rows_read": sum(len(r.users) for r in raws.values()),
    }
    if "all" in parts:
        fractions = (1.0 - test_fraction - valid_fraction, valid_fraction, test_fraction)
        every = parts.pop("all")
        labels = per_user_split(to_index(every[0], universe(every[0])), fractions, seed, stream=SPLIT_STREAM)
        parts = {"train": _select(every, labels == TRAIN), "test": _select(every, labels == TEST)}
        if valid_fraction > 0:
            parts["valid"] = _select(every, labels == VALID)
        info.update({"split": "per-user", "fractions": fractions, "split_seed": seed})
    else:
        info["split"] = "fixed"
    held, dropped = apply_test_only(
        parts["train"], {k: v for k, v in parts.items() if k != "train"}, drop=test_only == "drop"
    )
    info.update({**counts, **dropped, "test_only": test_only})
    train = parts["train"]
    user_ids = universe(train[0], *(h[0] for h in held.values()))
    item_ids = universe(train[1], *(h[1] for h in held.values()))

    def mat(rows: Rows) -> sp.csr_matrix:
        return binary_csr(
            to_index(rows[0], user_ids), to_index(rows[1], item_ids), len(user_ids), len(item_ids)
        )

    data = Interactions(
        name=name or (root.name.split(".")[0] if root.is_file() else root.name),
        n_users=len(user_ids),
        n_items=len(item_ids),
        train=mat(train),
        test=mat(held["test"]),
        valid=mat(held["valid"]) if "valid" in held else None,
        user_ids=user_ids,
        item_ids=item_ids,
        info=info,
    )
    if valid_fraction > 0 and "valid" not in held:
        data = carve_validation(data, valid_fraction, seed)
    return data
