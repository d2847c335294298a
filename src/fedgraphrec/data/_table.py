r"""Fast, strict parsing of whitespace-separated tables.

Every loader reads its files through this module. The bulk parse is vectorised (the line layout
is computed with NumPy on the raw bytes and the numbers are converted by ``numpy.fromstring``), so
a million-line file loads in a fraction of a second. Only when the fast path meets something it
cannot convert does a line-by-line scan run; it finds the first bad line and raises a
:class:`DataFormatError` naming the file and the 1-based line.

Conventions: columns are separated by any run of ASCII whitespace (tabs or spaces); lines are
separated by ``\n`` (``\r\n`` works too); blank lines are skipped, so a trailing newline or an
empty last line is harmless.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from fedgraphrec.data._io import read_bytes
from fedgraphrec.data.errors import DataFormatError

ColumnKind = Literal["id", "float", "str"]
"""``id``: non-negative integer; ``float``: finite decimal number; ``str``: any token (kept as bytes)."""

_WS_BYTES = b" \t\n\r\x0b\x0c"
_INT_RE = re.compile(rb"[+-]?[0-9]+")
_FLOAT_RE = re.compile(rb"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _lut(allowed: bytes) -> np.ndarray:
    table = np.ones(256, dtype=bool)
    table[np.frombuffer(allowed, dtype=np.uint8)] = False
    return table


_IS_WS = ~_lut(_WS_BYTES)
# Bytes that cannot occur in a token of the kind (whitespace counts as allowed: it separates tokens).
_BAD_FOR_ID = _lut(b"0123456789+-" + _WS_BYTES)
_BAD_FOR_FLOAT = _lut(b"0123456789+-.eE" + _WS_BYTES)


@dataclass(frozen=True)
class Table:
    """A parsed fixed-width table.

    Attributes:
        path: the file it came from (for error messages).
        columns: one array per column: int64 for ``id``, float64 for ``float``, bytes for ``str``.
        lines: 1-based line number of every row (blank lines are skipped, so rows ≠ lines).
    """

    path: Path
    columns: tuple[np.ndarray, ...]
    lines: np.ndarray

    def __len__(self) -> int:
        return len(self.lines)

    def fail(self, row: int, message: str) -> DataFormatError:
        """A :class:`DataFormatError` pointing at the line of ``row``."""
        return DataFormatError(self.path, int(self.lines[row]), message)


@dataclass(frozen=True)
class Ragged:
    """A parsed file of integer rows of varying length (the LightGCN ``user item item ...`` format).

    Attributes:
        path: the file it came from.
        values: all integers, row after row.
        lengths: number of integers in each row (always ≥ 1).
        lines: 1-based line number of every row.
    """

    path: Path
    values: np.ndarray
    lengths: np.ndarray
    lines: np.ndarray

    def fail(self, row: int, message: str) -> DataFormatError:
        """A :class:`DataFormatError` pointing at the line of ``row``."""
        return DataFormatError(self.path, int(self.lines[row]), message)


def _layout(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """Tokens on each physical line and the byte offset of every token, without a Python loop."""
    arr = np.frombuffer(data, dtype=np.uint8)
    ws = _IS_WS[arr]
    starts = ~ws
    starts[1:] &= ws[:-1]
    tok_pos = np.flatnonzero(starts)
    nl_pos = np.flatnonzero(arr == 10)
    before_each_nl = np.searchsorted(tok_pos, nl_pos)
    cumulative = np.append(before_each_nl, len(tok_pos))
    counts = np.diff(cumulative, prepend=0)
    return counts, tok_pos


def _read_layout(path: Path) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray]:
    """The file's bytes, its :func:`_layout` and the indices of its non-blank lines.

    Raises:
        DatasetNotFoundError: the file does not exist.
        DataFormatError: the file has no token at all.
    """
    data = read_bytes(path)
    counts, tok_pos = _layout(data)
    nonblank = np.flatnonzero(counts)
    if len(nonblank) == 0:
        raise DataFormatError(path, None, "file is empty")
    return data, counts, tok_pos, nonblank


def _fast_numbers(blob: bytes, kind: ColumnKind, expected: int) -> np.ndarray | None:
    """Convert a whitespace-separated blob of numbers, or ``None`` if anything looks off."""
    arr = np.frombuffer(blob, dtype=np.uint8)
    bad = _BAD_FOR_ID if kind == "id" else _BAD_FOR_FLOAT
    if bad[arr].any():
        return None
    dtype = np.int64 if kind == "id" else np.float64
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            values = np.fromstring(blob.decode("ascii"), dtype=dtype, sep=" ")
    except (ValueError, DeprecationWarning, UnicodeDecodeError):
        return None
    if len(values) != expected:
        return None
    return values


def _fast_numeric_table(data: bytes, kinds: Sequence[ColumnKind], tok_pos: np.ndarray) -> np.ndarray | None:
    """Parse a table of ``id``/``float`` columns in one pass; ``None`` if anything looks off.

    With only ``id`` columns the blob is parsed as int64. With a ``float`` column it is parsed as
    float64 (exact for ids below 2**53), and an id column must then hold no byte that only a
    decimal number can contain (``.``, ``e``, ``E``): such bytes are mapped to their token and
    hence to their column (every line is known to have ``len(kinds)`` tokens at this point).
    """
    if all(k == "id" for k in kinds):
        return _fast_numbers(data, "id", len(tok_pos))
    arr = np.frombuffer(data, dtype=np.uint8)
    decimal_only = np.flatnonzero((arr == ord(".")) | (arr == ord("e")) | (arr == ord("E")))
    if len(decimal_only) == 0:
        # Integral numbers only: the int64 parser is several times faster than the float one.
        ints = _fast_numbers(data, "id", len(tok_pos))
        return None if ints is None else ints.astype(np.float64)
    token = np.searchsorted(tok_pos, decimal_only, side="right") - 1
    is_id = np.array([k == "id" for k in kinds])
    if is_id[token % len(kinds)].any():
        return None
    return _fast_numbers(data, "float", len(tok_pos))


def _token_error(path: Path, line: int, col: int, token: bytes, kind: ColumnKind) -> DataFormatError:
    shown = token.decode("utf-8", "replace")
    if len(shown) > 40:
        shown = shown[:37] + "..."
    what = "an integer id" if kind == "id" else "a number"
    return DataFormatError(path, line, f"column {col + 1}: {shown!r} is not {what}")


def _scan_token(path: Path, line: int, col: int, token: bytes, kind: ColumnKind) -> int | float | bytes:
    if kind == "str":
        return token
    regex = _INT_RE if kind == "id" else _FLOAT_RE
    if regex.fullmatch(token) is None:
        raise _token_error(path, line, col, token, kind)
    return int(token) if kind == "id" else float(token)


def _scan_table(path: Path, data: bytes, kinds: Sequence[ColumnKind]) -> Table:
    """Line-by-line parse: slow, but it names the first bad line exactly."""
    cols: list[list[int | float | bytes]] = [[] for _ in kinds]
    lines: list[int] = []
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        tokens = raw.split()
        if not tokens:
            continue
        if len(tokens) != len(kinds):
            raise DataFormatError(path, lineno, f"expected {len(kinds)} columns, got {len(tokens)}")
        for j, (token, kind) in enumerate(zip(tokens, kinds, strict=True)):
            cols[j].append(_scan_token(path, lineno, j, token, kind))
        lines.append(lineno)
    arrays = tuple(_column_array(c, k) for c, k in zip(cols, kinds, strict=True))
    return Table(path, arrays, np.asarray(lines, dtype=np.int64))


def _column_array(values: list[int | float | bytes], kind: ColumnKind) -> np.ndarray:
    if kind == "id":
        return np.asarray(values, dtype=np.int64)
    if kind == "float":
        return np.asarray(values, dtype=np.float64)
    return np.asarray(values, dtype=np.bytes_)


def _validate(table: Table, kinds: Sequence[ColumnKind]) -> Table:
    """Checks shared by both parse paths: ids non-negative, numbers finite."""
    for j, (col, kind) in enumerate(zip(table.columns, kinds, strict=True)):
        if kind == "id":
            neg = np.flatnonzero(col < 0)
            if len(neg):
                r = int(neg[0])
                raise table.fail(r, f"column {j + 1}: negative id {int(col[r])}")
        elif kind == "float":
            bad = np.flatnonzero(~np.isfinite(col))
            if len(bad):
                r = int(bad[0])
                raise table.fail(r, f"column {j + 1}: {col[r]} is not a finite number")
    return table


def read_table(path: str | Path, kinds: Sequence[ColumnKind]) -> Table:
    """Parse a table whose every non-blank line has exactly ``len(kinds)`` columns.

    Args:
        path: the file (gzipped or not).
        kinds: the kind of each column.

    Returns:
        The parsed :class:`Table`.

    Raises:
        DatasetNotFoundError: the file does not exist.
        DataFormatError: the file is empty, a line has the wrong number of columns, a token does not
            convert, an id is negative or a number is not finite (naming the file and line).
    """
    p = Path(path)
    data, counts, tok_pos, nonblank = _read_layout(p)
    n_cols = len(kinds)
    wrong = np.flatnonzero(counts[nonblank] != n_cols)
    if len(wrong):
        line_index = int(nonblank[wrong[0]])
        raise DataFormatError(p, line_index + 1, f"expected {n_cols} columns, got {int(counts[line_index])}")
    lines = nonblank.astype(np.int64) + 1
    n_rows = len(lines)
    columns: list[np.ndarray] | None = None
    if "str" not in kinds:
        flat = _fast_numeric_table(data, kinds, tok_pos)
        columns = None
        if flat is not None:
            columns = [
                flat[j::n_cols].astype(np.int64) if k == "id" else flat[j::n_cols]
                for j, k in enumerate(kinds)
            ]
    else:
        tokens = data.split()
        parsed: list[np.ndarray] = []
        for j, kind in enumerate(kinds):
            col_tokens = tokens[j::n_cols]
            if kind == "str":
                values: np.ndarray | None = np.asarray(col_tokens, dtype=np.bytes_)
            else:
                values = _fast_numbers(b" ".join(col_tokens), kind, n_rows)
            if values is None:
                break
            parsed.append(values)
        else:
            columns = parsed
    if columns is None:
        table = _scan_table(p, data, kinds)
    else:
        table = Table(p, tuple(np.ascontiguousarray(c) for c in columns), lines)
    return _validate(table, kinds)


def read_ragged_ids(path: str | Path) -> Ragged:
    """Parse a file of non-negative integer rows of varying length (at least one per row).

    Raises:
        DatasetNotFoundError: the file does not exist.
        DataFormatError: the file is empty, a token is not an integer, or an id is negative.
    """
    p = Path(path)
    data, counts, _, nonblank = _read_layout(p)
    lengths = counts[nonblank].astype(np.int64)
    lines = nonblank.astype(np.int64) + 1
    values = _fast_numbers(data, "id", int(lengths.sum()))
    if values is None:
        values = _scan_ragged(p, data)
    ragged = Ragged(p, values, lengths, lines)
    neg = np.flatnonzero(values < 0)
    if len(neg):
        row = int(np.searchsorted(np.cumsum(lengths), neg[0], side="right"))
        raise ragged.fail(row, f"negative id {int(values[neg[0]])}")
    return ragged


def _scan_ragged(path: Path, data: bytes) -> np.ndarray:
    out: list[int] = []
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        for j, token in enumerate(raw.split()):
            value = _scan_token(path, lineno, j, token, "id")
            assert isinstance(value, int)
            out.append(value)
    return np.asarray(out, dtype=np.int64)


def check_range(table: Table, col: int, low: float, high: float, what: str = "rating") -> None:
    """Raise a :class:`DataFormatError` at the first row whose ``columns[col]`` is outside [low, high]."""
    values = table.columns[col]
    bad = np.flatnonzero((values < low) | (values > high))
    if len(bad):
        r = int(bad[0])
        raise table.fail(r, f"{what} {values[r]:g} is outside the range [{low:g}, {high:g}]")


def count_entries(path: str | Path) -> int:
    """Number of entries in a LightGCN ``user_list.txt``/``item_list.txt`` (header line excluded)."""
    p = Path(path)
    lines = [ln for ln in read_bytes(p).split(b"\n") if ln.strip()]
    if lines and not lines[0].split()[-1].isdigit():
        lines = lines[1:]
    return len(lines)
