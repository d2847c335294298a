"""Id maps: the original user/item id behind each compact index, as a two-column TSV.

Every loader compacts raw ids (integers or strings) to ``0..n-1``; the map is what turns a compact
index back into the id the user's files use. A run folder keeps one per side (``ids/users.tsv``,
``ids/items.tsv``) so recommendations and exports speak the dataset's own ids. The file is plain
text any tool reads: a header line ``index<TAB>id``, then one line per index in order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedgraphrec.data.errors import DataFormatError

__all__ = ["HEADER", "IdMap", "read_id_map", "write_id_map"]

HEADER = "index\tid"


class IdMap:
    """Original ids by compact index, and the inverse lookup.

    Args:
        ids: the original id of each index ``0..n-1`` (distinct; any values whose ``str`` is distinct).
    """

    def __init__(self, ids: np.ndarray) -> None:
        self.ids = np.asarray(ids)
        self._index = {str(v): i for i, v in enumerate(self.ids.tolist())}
        if len(self._index) != len(self.ids):
            raise ValueError("an id map's ids must be distinct")

    def __len__(self) -> int:
        return len(self.ids)

    def original(self, index: np.ndarray) -> np.ndarray:
        """The original ids of compact ``index`` (an array)."""
        return self.ids[np.asarray(index, dtype=np.int64)]

    def lookup(self, ids: list[str] | np.ndarray) -> np.ndarray:
        """The compact index of each original id (compared as text).

        Raises:
            KeyError: an id that is not in the map (the message names it).
        """
        try:
            return np.asarray([self._index[str(v)] for v in ids], dtype=np.int64)
        except KeyError as exc:
            raise KeyError(f"unknown id {exc.args[0]!r}") from None

    def find(self, ids: list[str] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(index, known)``: each id's compact index (``-1`` where unknown) and the known mask."""
        index = np.asarray([self._index.get(str(v), -1) for v in ids], dtype=np.int64)
        return index, index >= 0

    @classmethod
    def identity(cls, n: int) -> IdMap:
        """The map of data whose ids were already ``0..n-1``."""
        return cls(np.arange(n, dtype=np.int64))


def write_id_map(path: Path, ids: np.ndarray) -> None:
    """Write ``ids`` (index order) as ``index<TAB>id`` lines under a header (atomically)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [HEADER, *(f"{i}\t{v}" for i, v in enumerate(np.asarray(ids).tolist()))]
    text = "\n".join(lines) + "\n"
    if any("\t" in str(v) or "\n" in str(v) for v in np.asarray(ids).tolist()):
        raise ValueError(f"{path}: an id holds a tab or a newline and cannot be written as TSV")
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def read_id_map(path: Path) -> IdMap:
    """Read a map written by :func:`write_id_map`; ids that are all canonical integers come back as int64.

    Raises:
        DataFormatError: a missing header, a malformed line or an index out of order (file:line).
    """
    lines = path.read_text().splitlines()
    if not lines or lines[0] != HEADER:
        raise DataFormatError(path, 1, f"expected the header {HEADER!r}")
    values: list[str] = []
    for n, line in enumerate(lines[1:], start=2):
        index, sep, value = line.partition("\t")
        if not sep or index != str(n - 2):
            raise DataFormatError(path, n, f"expected '{n - 2}<TAB>id', got {line!r}")
        values.append(value)
    if all(v.lstrip("-").isdigit() and str(int(v)) == v for v in values):  # "007" stays text
        return IdMap(np.asarray([int(v) for v in values], dtype=np.int64))
    return IdMap(np.asarray(values, dtype=object))
