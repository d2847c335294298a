"""Index arithmetic over a part's blocks of rows: where each logical message's rows start and end.

A rows :class:`~fedgraphrec.runtime.part.Part` stores its logical messages back to back, message
``k`` being ``counts[k]`` consecutive rows. :func:`block_bounds` turns the counts into offsets and
:func:`gather_blocks` turns a selection of messages into row indices, without copying rows
(:func:`selected_rows` gives none for a selection of every message as it came); the
part, the transport's node side and the batching of sealed parts all use them; :func:`block_sizes`
gives each block's bytes on the wire (remembered for static layouts). They import nothing of the
runtime, so every runtime module can build on them; :mod:`fedgraphrec.runtime.message` re-exports
the first two for existing callers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "block_bounds",
    "block_sizes",
    "equal_size_of",
    "equal_sizes",
    "gather_blocks",
    "in_order",
    "selected_rows",
]


def block_bounds(counts: np.ndarray | None, n_rows: int) -> np.ndarray:
    """Start offsets of every message's block of rows, plus the end (length ``messages + 1``)."""
    if counts is None:
        return np.arange(n_rows + 1, dtype=np.int64)
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    if out[-1] != n_rows:
        raise ValueError(f"message row counts add up to {out[-1]}, but the part has {n_rows} rows")
    return out


def _take(items: list[Any], pick: np.ndarray) -> list[Any]:
    """``[items[k] for k in pick]`` (the same objects), without a Python loop over many copies."""
    table = np.empty(len(items), dtype=object)
    table[:] = items
    return list(table[pick])


def in_order(pick: np.ndarray, n: int) -> bool:
    """Whether ``pick`` is ``0, 1, .., n - 1``: every message (or row) as it came (one node's relay)."""
    return len(pick) == n and bool((pick == np.arange(n)).all())


def selected_rows(counts: np.ndarray | None, n_rows: int, pick: np.ndarray) -> np.ndarray | None:
    """Row indices of messages ``pick`` of a table of ``n_rows`` rows; ``None``: the rows as they are.

    ``counts`` holds each message's rows (``None``: a row each; counts that do not add up to
    ``n_rows`` are refused). A selection of every message in order needs no indices (one node's
    relay); any other is gathered block by block.
    """
    if counts is None:  # a row a message: the selection is the rows
        return None if in_order(pick, n_rows) else pick
    bounds = block_bounds(counts, n_rows)
    return None if in_order(pick, len(counts)) else gather_blocks(bounds, pick)


def gather_blocks(bounds: np.ndarray, pick: np.ndarray) -> np.ndarray:
    """Row indices of blocks ``pick`` (in order), given block ``bounds``."""
    starts, ends = bounds[pick], bounds[pick + 1]
    lens = ends - starts
    if not len(lens):
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
    return np.arange(int(lens.sum()), dtype=np.int64) + offsets


_FROZEN: dict[tuple[object, ...], tuple[object, np.ndarray]] = {}


def _frozen(key: tuple[object, ...], owner: object, make: Callable[[], np.ndarray]) -> np.ndarray:
    """A read-only array made once per ``key`` (``owner``: the object whose id the key holds, kept alive)."""
    hit = _FROZEN.get(key)
    if hit is None or hit[0] is not owner:
        array = make()
        array.flags.writeable = False
        if len(_FROZEN) >= 512:
            _FROZEN.clear()
        hit = _FROZEN[key] = (owner, array)
    return hit[1]


def block_sizes(counts: np.ndarray, header: int, per_row: int) -> np.ndarray:
    """Bytes of every message's block (``header + counts * per_row``); for read-only counts, cached.

    A protocol sends the same static layout every step (e.g. each convolution-client's rows); the
    ledger then recognises the sizes by identity and books them without recounting.
    """
    if counts.flags.writeable:
        return header + counts * per_row
    return _frozen(("blocks", id(counts), header, per_row), counts, lambda: header + counts * per_row)


def equal_sizes(n: int, size: int) -> np.ndarray:
    """``n`` messages of ``size`` bytes each, as one read-only array reused for equal requests."""
    return _frozen(("equal", n, size), None, lambda: np.full(n, size, dtype=np.int64))


def equal_size_of(sizes: np.ndarray) -> int | None:
    """The common size, when ``sizes`` is an array :func:`equal_sizes` made (``None`` otherwise)."""
    if not len(sizes) or sizes.flags.writeable:
        return None
    size = int(sizes[0])
    hit = _FROZEN.get(("equal", len(sizes), size))
    return size if hit is not None and hit[1] is sizes else None
