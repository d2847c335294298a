"""Index arithmetic over a part's blocks of rows: where each logical message's rows start and end.

A rows :class:`~fedgraphrec.runtime.part.Part` stores its logical messages back to back, message
``k`` being ``counts[k]`` consecutive rows. :func:`block_bounds` turns the counts into offsets and
:func:`gather_blocks` turns a selection of messages into row indices, without copying rows; the
part, the transport's node side and the batching of sealed parts all use them; :func:`block_sizes`
gives each block's bytes on the wire (remembered for static layouts). They import nothing of the
runtime, so every runtime module can build on them; :mod:`fedgraphrec.runtime.message` re-exports
the first two for existing callers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["block_bounds", "block_sizes", "equal_size_of", "equal_sizes", "gather_blocks"]


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


def gather_blocks(bounds: np.ndarray, pick: np.ndarray) -> np.ndarray:
    """Row indices of blocks ``pick`` (in order), given block ``bounds``."""
    starts, ends = bounds[pick], bounds[pick + 1]
    lens = ends - starts
    if not len(lens):
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
    return np.arange(int(lens.sum()), dtype=np.int64) + offsets


_BLOCK_SIZES: dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray]] = {}


def block_sizes(counts: np.ndarray, header: int, per_row: int) -> np.ndarray:
    """Bytes of every message's block (``header + counts * per_row``); for read-only counts, cached.

    A protocol sends the same static layout every step (e.g. each convolution-client's rows); the
    ledger then recognises the sizes by identity and books them without recounting.
    """
    if counts.flags.writeable:
        return header + counts * per_row
    hit = _BLOCK_SIZES.get((id(counts), header, per_row))
    if hit is None or hit[0] is not counts:
        sizes = header + counts * per_row
        sizes.flags.writeable = False
        hit = (counts, sizes)
        if len(_BLOCK_SIZES) >= 256:
            _BLOCK_SIZES.clear()
        _BLOCK_SIZES[(id(counts), header, per_row)] = hit
    return hit[1]


_EQUAL: dict[tuple[int, int], np.ndarray] = {}


def equal_sizes(n: int, size: int) -> np.ndarray:
    """``n`` messages of ``size`` bytes each, as one read-only array reused for equal requests."""
    hit = _EQUAL.get((n, size))
    if hit is None:
        hit = np.full(n, size, dtype=np.int64)
        hit.flags.writeable = False
        if len(_EQUAL) >= 256:
            _EQUAL.clear()
        _EQUAL[(n, size)] = hit
    return hit


def equal_size_of(sizes: np.ndarray) -> int | None:
    """The common size, when ``sizes`` is an array :func:`equal_sizes` made (``None`` otherwise)."""
    if not len(sizes) or sizes.flags.writeable:
        return None
    size = int(sizes[0])
    return size if _EQUAL.get((len(sizes), size)) is sizes else None
