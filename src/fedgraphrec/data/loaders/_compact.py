"""Helpers shared by the loaders: id compaction and train/test overlap removal."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def remap(ids: np.ndarray, universe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Map original ids to their index in the sorted ``universe``.

    Args:
        ids: original ids.
        universe: sorted, distinct original ids; index ``k`` becomes compact id ``k``.

    Returns:
        ``(compact, known)``: the compact ids (meaningless where ``known`` is false) and a mask of the
        ids that occur in ``universe``.
    """
    ids = np.asarray(ids, dtype=np.int64)
    if len(universe) == 0:
        return np.zeros(len(ids), dtype=np.int64), np.zeros(len(ids), dtype=bool)
    pos = np.searchsorted(universe, ids)
    clipped = np.minimum(pos, len(universe) - 1)
    known = universe[clipped] == ids
    return clipped.astype(np.int64), known


def drop_overlap(held_out: sp.csr_matrix, train: sp.csr_matrix) -> tuple[sp.csr_matrix, int]:
    """Remove from a held-out matrix the pairs that also occur in train.

    The evaluation masks training items, so such pairs could never be ranked; removing them keeps
    the :class:`~fedgraphrec.data.types.Interactions` invariant that splits are disjoint.

    Returns:
        The cleaned matrix and the number of pairs removed.
    """
    overlap = held_out.multiply(train).tocsr()
    if overlap.nnz == 0:
        return held_out, 0
    cleaned = (held_out - overlap).tocsr()
    cleaned.eliminate_zeros()
    return cleaned, int(overlap.nnz)
