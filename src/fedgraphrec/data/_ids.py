"""Raw ids to compact indices, and the cleaning rules every loader shares.

The rules (stated for users in the data guide, ``docs/tutorials/your-own-data.md``):

* **Compaction.** The compact index space of users (items) is the sorted list of the distinct
  original ids that occur; index ``k`` is the ``k``-th smallest id. Integer ids sort as numbers,
  text ids as text. A gap in the ids therefore never becomes an empty (phantom) row, and files whose
  ids are already ``0..n-1`` keep them unchanged (the map is the identity).
* **Duplicates.** Repeated (user, item) rows are collapsed before any split, so a pair can never be
  in both train and test (:func:`duplicate_mask`).
* **Test-only ids.** Users or items that occur in a held-out split (validation or test) but not in
  train cannot be scored by a model trained on train; by default their held-out rows are dropped
  (:func:`apply_test_only`), and the counts are reported in ``info``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedgraphrec.data._arrays import occurrence_mask, sorted_unique

Rows = tuple[np.ndarray, np.ndarray, np.ndarray]
"""(users, items, values) of one split, with original ids."""


def as_ids(tokens: Sequence[str] | np.ndarray) -> np.ndarray:
    """Ids read as text: int64 when every token is a canonical integer (``"7"``, not ``"007"``), else text.

    A token such as ``"007"`` keeps the ids text, so ``007`` and ``7`` stay two ids, and the written
    id map reads back the same (:func:`fedgraphrec.data.idmap.read_id_map` uses the same test).
    """
    text = np.asarray(tokens).astype(str)
    if len(text) == 0:
        return np.zeros(0, dtype=np.int64)
    try:
        ints = text.astype(np.int64)
    except (ValueError, OverflowError):
        return text
    if np.array_equal(ints.astype(str), text):
        return ints
    return text


def universe(*arrays: np.ndarray) -> np.ndarray:
    """Sorted distinct ids over ``arrays`` (all integers or all text)."""
    parts = [np.asarray(a) for a in arrays if len(a)]
    if not parts:
        return np.zeros(0, dtype=np.int64)
    if any(p.dtype.kind in "OUS" for p in parts):
        parts = [p.astype(str) for p in parts]
    return sorted_unique(np.concatenate(parts))


def to_index(ids: np.ndarray, ordered: np.ndarray) -> np.ndarray:
    """Compact index of every id in the sorted ``ordered`` (each id must occur there)."""
    ids = np.asarray(ids)
    if ordered.dtype.kind in "US":
        ids = ids.astype(str)
    index = np.searchsorted(ordered, ids)
    assert len(ids) == 0 or ((index < len(ordered)).all() and (ordered[index] == ids).all())
    return index.astype(np.int64)


def pair_keys(users: np.ndarray, items: np.ndarray) -> np.ndarray:
    """One int64 key per (user, item) row, equal exactly when both ids are equal."""
    item_ids = universe(items)
    return to_index(users, universe(users)) * max(len(item_ids), 1) + to_index(items, item_ids)


def duplicate_mask(users: np.ndarray, items: np.ndarray, keep: str = "last") -> np.ndarray:
    """Rows to keep so each (user, item) pair occurs once (its ``"first"`` or ``"last"`` row)."""
    if len(users) == 0:
        return np.ones(0, dtype=bool)
    return occurrence_mask(pair_keys(users, items), keep)


def apply_test_only(train: Rows, held: dict[str, Rows], drop: bool) -> tuple[dict[str, Rows], dict[str, int]]:
    """Count (and unless ``drop`` is false, remove) held-out rows of users or items absent from train.

    Args:
        train: the training rows.
        held: the held-out splits by name (``"valid"``, ``"test"``).
        drop: remove those rows (the default rule) or keep them.

    Returns:
        The held-out splits (filtered when ``drop``) and the counts for ``info``:
        ``test_only_users``/``test_only_items`` (distinct ids over every held-out split) and
        ``test_only_rows_dropped``.
    """
    train_users, train_items = universe(train[0]), universe(train[1])
    bad_users: list[np.ndarray] = []
    bad_items: list[np.ndarray] = []
    out: dict[str, Rows] = {}
    dropped = 0
    for key, (u, i, v) in held.items():
        known_u = (
            np.isin(np.asarray(u).astype(train_users.dtype), train_users) if len(u) else np.ones(0, bool)
        )
        known_i = (
            np.isin(np.asarray(i).astype(train_items.dtype), train_items) if len(i) else np.ones(0, bool)
        )
        bad_users.append(np.asarray(u)[~known_u])
        bad_items.append(np.asarray(i)[~known_i])
        keep = known_u & known_i
        if drop:
            dropped += int((~keep).sum())
            out[key] = (u[keep], i[keep], v[keep])
        else:
            out[key] = (u, i, v)
    counts = {
        "test_only_users": len(universe(*bad_users)),
        "test_only_items": len(universe(*bad_items)),
        "test_only_rows_dropped": dropped,
    }
    return out, counts


def kcore_mask(users: np.ndarray, items: np.ndarray, k: int) -> np.ndarray:
    """Rows of the iterated ``k``-core: drop users and items with fewer than ``k`` rows until none is left.

    Counts are of distinct (user, item) pairs, so collapse duplicates first.

    Raises:
        ValueError: ``k`` is not a positive integer.
    """
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"kcore must be a positive integer, got {k!r}")
    u = to_index(users, universe(users))
    i = to_index(items, universe(items))
    keep = np.ones(len(u), dtype=bool)
    while True:
        user_count = np.bincount(u[keep], minlength=int(u.max(initial=-1)) + 1)
        item_count = np.bincount(i[keep], minlength=int(i.max(initial=-1)) + 1)
        ok = keep & (user_count[u] >= k) & (item_count[i] >= k)
        if (ok == keep).all():
            return keep
        keep = ok
