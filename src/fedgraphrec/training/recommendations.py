"""The tables a saved run hands out: recommendation lists and embedding tables, in original ids.

:class:`Recommendations` is one row per (user, rank): ``user``, ``rank`` (1 = best), ``item``,
``score``, as numpy columns, written as CSV or Parquet. :class:`EmbeddingTable` is one row per user
or item: its original id and its vector, written as the columns of an ``.npz`` file or a Parquet
file. Ids are the dataset's own (integers stay integers, strings stay strings); no pandas needed.
:func:`read_pairs` reads a file of (user, item) interactions in original ids for evaluation.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedgraphrec.data.errors import DataFormatError

__all__ = ["EmbeddingTable", "Recommendations", "id_array", "read_pairs"]


def id_array(ids: np.ndarray) -> np.ndarray:
    """Ids as a plain numpy array: int64 when they are integers, else unicode (no Python objects)."""
    ids = np.asarray(ids)
    if ids.dtype.kind in "iu":
        return ids.astype(np.int64)
    return np.asarray([str(v) for v in ids.tolist()], dtype=str)


def _arrow_ids(ids: np.ndarray) -> Any:
    import pyarrow as pa

    ids = id_array(ids)
    return pa.array(ids.tolist(), type=pa.int64() if ids.dtype.kind == "i" else pa.string())


@dataclass(frozen=True)
class Recommendations:
    """Top-K lists as a table: row ``j`` is user ``user[j]``'s item at ``rank[j]`` (1 = best).

    Attributes:
        user: original user ids.
        rank: 1-based rank within the user's list.
        item: original item ids.
        score: the model's score of the pair (float64; a predicted rating for rating protocols).
    """

    user: np.ndarray
    rank: np.ndarray
    item: np.ndarray
    score: np.ndarray

    def __len__(self) -> int:
        return len(self.rank)

    def rows(self) -> list[tuple[Any, int, Any, float]]:
        """The table as ``(user, rank, item, score)`` tuples of Python values."""
        return list(
            zip(self.user.tolist(), self.rank.tolist(), self.item.tolist(), self.score.tolist(), strict=True)
        )

    def to_csv(self, path: str | Path) -> Path:
        """Write ``user,rank,item,score`` with a header line (scores in full precision)."""
        path = Path(path)
        with path.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["user", "rank", "item", "score"])
            for user, rank, item, score in self.rows():
                writer.writerow([user, rank, item, repr(score)])
        return path

    def to_parquet(self, path: str | Path) -> Path:
        """Write the four columns as a Parquet file (needs pyarrow: the ``parquet`` extra)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = Path(path)
        table = pa.table(
            {
                "user": _arrow_ids(self.user),
                "rank": pa.array(self.rank.astype(np.int64)),
                "item": _arrow_ids(self.item),
                "score": pa.array(self.score.astype(np.float64)),
            }
        )
        pq.write_table(table, path)
        return path

    def write(self, path: str | Path) -> Path:
        """Write by extension: ``.parquet`` as Parquet, anything else as CSV."""
        return self.to_parquet(path) if str(path).endswith(".parquet") else self.to_csv(path)


@dataclass(frozen=True)
class EmbeddingTable:
    """The vectors of one side (users or items) with their original ids.

    Attributes:
        ids: original ids (row ``j`` is the entity ``ids[j]``).
        vectors: ``[len(ids), d]`` float array.
    """

    ids: np.ndarray
    vectors: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)

    def to_parquet(self, path: str | Path) -> Path:
        """Write columns ``id`` and ``embedding`` (a fixed-size list of floats) as a Parquet file."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = Path(path)
        dim = int(self.vectors.shape[1])
        flat = pa.array(np.ascontiguousarray(self.vectors).reshape(-1))
        table = pa.table(
            {"id": _arrow_ids(self.ids), "embedding": pa.FixedSizeListArray.from_arrays(flat, dim)}
        )
        pq.write_table(table, path)
        return path


_SEPARATORS = re.compile(r"[\t,;]|\s+")


def read_pairs(path: Path) -> tuple[list[str], list[str]]:
    """(user ids, item ids) of an interaction file in original ids, as text.

    One interaction a line: ``user<SEP>item[<SEP>more columns]`` with ``SEP`` a tab, a comma, a
    semicolon or spaces; blank lines are skipped. A first line whose second field is ``item``,
    ``item_id`` or ``itemId`` (any case) is a header.

    Raises:
        DataFormatError: a line with fewer than two fields (file:line).
        FileNotFoundError: no file at ``path``.
    """
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such interaction file")
    users: list[str] = []
    items: list[str] = []
    first = True
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        fields = [f.strip().strip('"') for f in _SEPARATORS.split(line.strip())]
        if len(fields) < 2:
            raise DataFormatError(path, number, f"expected 'user<TAB>item', got {line!r}")
        header, first = first and fields[1].lower() in ("item", "item_id", "itemid"), False
        if not header:
            users.append(fields[0])
            items.append(fields[1])
    return users, items
