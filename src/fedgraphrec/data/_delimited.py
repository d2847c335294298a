"""Reading (user, item [, rating [, timestamp]]) rows from CSV, TSV and Parquet files.

Header rule (``header=None``, the default): the first line is a header when ``columns`` names
columns, when its user or item cell is a usual column name (``user``, ``user_id``, ``userid``,
``uid``, ``item``, ``item_id``, ``itemid``, ``iid``, ``movie_id``, ...), or when it holds a word in
a column whose next lines are all numbers (``customer,product,score`` above numeric scores).
Two text-id columns under an unusual header (``customer,product``) cannot be told from data: pass
``header=true`` (or ``false``) then. Parquet files always have column names.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedgraphrec.data._ids import as_ids
from fedgraphrec.data._io import read_bytes
from fedgraphrec.data.errors import DataFormatError

USER_NAMES = frozenset({"user", "user_id", "userid", "uid", "users", "u", "customer_id", "visitor_id"})
ITEM_NAMES = frozenset(
    {"item", "item_id", "itemid", "iid", "items", "i", "movie_id", "movieid", "product_id", "book_id"}
)
RATING_NAMES = frozenset({"rating", "ratings", "score", "value", "weight", "stars"})
FILE_FORMATS = ("csv", "tsv", "parquet")
Column = int | str


@dataclass(frozen=True)
class RawRows:
    """Rows of one file, ids still as read.

    Attributes:
        path: the file.
        users: user id of every row (int64 or text, see :func:`fedgraphrec.data._ids.as_ids`).
        items: item id of every row.
        ratings: the rating column as float64, or ``None`` when there is none.
        lines: the 1-based line (Parquet: row) of every row, for messages.
        header: whether the first line was read as a header.
    """

    path: Path
    users: np.ndarray
    items: np.ndarray
    ratings: np.ndarray | None
    lines: np.ndarray
    header: bool


def file_format(path: Path, given: str | None, hint: str) -> str:
    """``given`` or the format the file name says (``.csv``, ``.tsv``, ``.parquet``, optionally ``.gz``).

    Raises:
        DataFormatError: an unknown format, or a name that says none (with a working command).
    """
    if given is not None:
        if given not in FILE_FORMATS:
            raise DataFormatError(
                path, None, f"unknown format {given!r}; use one of {', '.join(FILE_FORMATS)}"
            )
        return given
    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    ext = suffixes[-1].lstrip(".") if suffixes else ""
    if ext in ("csv", "tsv", "parquet"):
        return ext
    if ext in ("pq", "txt", "tab"):
        return {"pq": "parquet", "txt": "tsv", "tab": "tsv"}[ext]
    raise DataFormatError(
        path, None, f"cannot tell the file format from its name; say it, e.g. {hint.format(fmt='csv')}"
    )


def command(path: Path, setting: str) -> str:
    """A working command line that reads ``path`` with one ``dataset_options`` setting (for hints)."""
    return f"fedgraphrec train central --dataset {path} --set {setting}"


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _detect_header(first: list[str], rest: list[list[str]], ucol: Column, icol: Column) -> bool:
    """The module docstring's header rule, for positional columns."""
    names = [c.strip().lower() for c in first]
    for col, known in ((ucol, USER_NAMES), (icol, ITEM_NAMES)):
        if isinstance(col, int) and col < len(names) and names[col] in known:
            return True
    for j, cell in enumerate(first):
        column = [r[j] for r in rest if j < len(r)]
        if column and not _is_number(cell) and all(_is_number(c) for c in column):
            return True
    return False


def _pick(names: list[str] | None, col: Column, path: Path, what: str, width: int) -> int:
    """Position of column ``col`` (a name in the header, or a 0-based position)."""
    if isinstance(col, str) and not col.lstrip("-").isdigit():
        if names is None:
            raise DataFormatError(path, 1, f"the {what} column is named {col!r} but the file has no header")
        lowered = [n.strip().lower() for n in names]
        if col.strip().lower() not in lowered:
            raise DataFormatError(path, 1, f"no {what} column {col!r}; the header has {', '.join(names)}")
        return lowered.index(col.strip().lower())
    pos = int(col)
    if not 0 <= pos < width:
        raise DataFormatError(path, 1, f"{what} column {pos} is out of range (the file has {width} columns)")
    return pos


def _by_name(names: list[str], known: frozenset[str]) -> int | None:
    lowered = [n.strip().lower() for n in names]
    return next((j for j, n in enumerate(lowered) if n in known), None)


def choose_columns(
    names: list[str] | None, columns: Sequence[Column] | None, path: Path, width: int
) -> tuple[int, int, int | None]:
    """Positions of the user, item and (optional) rating columns.

    Without ``columns``: header names that say user/item/rating, else positions 0, 1 and 2 (when
    the file has a third column).
    """
    if columns is not None:
        if not 2 <= len(columns) <= 4:
            raise DataFormatError(
                path, None, f"columns must name user, item[, rating[, timestamp]], got {columns}"
            )
        u = _pick(names, columns[0], path, "user", width)
        i = _pick(names, columns[1], path, "item", width)
        r = _pick(names, columns[2], path, "rating", width) if len(columns) > 2 else None
        return u, i, r
    if names is not None:
        user, item = _by_name(names, USER_NAMES), _by_name(names, ITEM_NAMES)
        if user is not None and item is not None:
            return user, item, _by_name(names, RATING_NAMES)
    return 0, 1, (2 if width > 2 else None)


def _ratings(cells: list[str], lines: np.ndarray, path: Path) -> np.ndarray:
    out = np.empty(len(cells), dtype=np.float64)
    for k, cell in enumerate(cells):
        try:
            out[k] = float(cell)
        except ValueError:
            hint = command(path, "'dataset_options.columns=[0,1]'")
            raise DataFormatError(
                path, int(lines[k]), f"rating {cell!r} is not a number; to ignore that column: {hint}"
            ) from None
        if not np.isfinite(out[k]):
            raise DataFormatError(path, int(lines[k]), f"rating {cell!r} is not a finite number")
    return out


def read_delimited(
    path: Path, fmt: str, header: bool | None, columns: Sequence[Column] | None
) -> tuple[list[str], list[str], list[str] | None, np.ndarray, bool]:
    """Cells of the user, item and rating columns of a CSV/TSV file, their line numbers, and the header flag.

    Raises:
        DataFormatError: undecodable text, a short line or an empty id (file:line).
    """
    try:
        text = read_bytes(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataFormatError(path, None, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    reader = csv.reader(io.StringIO(text), delimiter="," if fmt == "csv" else "\t")
    rows: list[list[str]] = []
    lines: list[int] = []
    try:
        for row in reader:
            if row and any(c.strip() for c in row):
                rows.append(row)
                lines.append(reader.line_num)
    except csv.Error as exc:
        raise DataFormatError(path, reader.line_num, f"bad {fmt.upper()} line: {exc}") from None
    if not rows:
        raise DataFormatError(path, None, "file is empty")
    named = columns is not None and any(isinstance(c, str) and not c.lstrip("-").isdigit() for c in columns)
    if header is None:
        probe = (columns[0], columns[1]) if columns is not None and not named else (0, 1)
        header = named or _detect_header(rows[0], rows[1:51], *probe)
    names = rows[0] if header else None
    if header:
        rows, lines = rows[1:], lines[1:]
        if not rows:
            raise DataFormatError(path, None, "the file has a header but no rows")
    u, i, r = choose_columns(names, columns, path, len(names) if names is not None else len(rows[0]))
    need = max(u, i, r if r is not None else 0) + 1
    for row, line in zip(rows, lines, strict=True):
        if len(row) < need:
            other = "tsv" if fmt == "csv" else "csv"
            raise DataFormatError(
                path,
                line,
                f"expected at least {need} columns, got {len(row)} (if the file is {other.upper()}: "
                f"{command(path, 'dataset_options.format=' + other)})",
            )
        if not row[u].strip() or not row[i].strip():
            raise DataFormatError(path, line, "empty user or item id")
    users = [row[u].strip() for row in rows]
    items = [row[i].strip() for row in rows]
    ratings = [row[r].strip() for row in rows] if r is not None else None
    return users, items, ratings, np.asarray(lines, dtype=np.int64), bool(header)


def read_parquet(
    path: Path, columns: Sequence[Column] | None
) -> tuple[list[str], list[str], list[object] | None, np.ndarray]:
    """Cells of the user, item and rating columns of a Parquet file and the 1-based row numbers.

    Raises:
        DataFormatError: an unreadable file or a missing (null) id (naming the file and row).
    """
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow is an optional extra
        raise DataFormatError(
            path, None, "reading Parquet needs pyarrow: pip install 'fedgraphrec[parquet]'"
        ) from None
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise DataFormatError(path, None, f"not a readable Parquet file: {exc}") from None
    names = list(table.column_names)
    u, i, r = choose_columns(names, columns, path, len(names))
    users = table.column(u).to_pylist()
    items = table.column(i).to_pylist()
    for k, (a, b) in enumerate(zip(users, items, strict=True)):
        if a is None or b is None or str(a).strip() == "" or str(b).strip() == "":
            raise DataFormatError(path, None, f"row {k + 1}: missing user or item id")
    ratings = table.column(r).to_pylist() if r is not None else None
    return [str(x) for x in users], [str(x) for x in items], ratings, np.arange(1, len(users) + 1)


def read_rows(path: Path, fmt: str, header: bool | None, columns: Sequence[Column] | None) -> RawRows:
    """Read one interaction file (see the module docstring) into :class:`RawRows`."""
    if fmt == "parquet":
        users, items, raw_ratings, lines = read_parquet(path, columns)
        is_header = True
        cells = None if raw_ratings is None else ["nan" if x is None else str(x) for x in raw_ratings]
    else:
        users, items, cells, lines, is_header = read_delimited(path, fmt, header, columns)
    ratings = None if cells is None else _ratings(cells, lines, path)
    return RawRows(path, as_ids(users), as_ids(items), ratings, lines, is_header)
