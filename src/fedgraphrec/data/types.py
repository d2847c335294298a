"""Immutable dataset objects shared by every model and protocol.

All ids are 0-based and contiguous. Sparse matrices are SciPy CSR with sorted indices and no
duplicates; their arrays are made read-only so a protocol cannot mutate a dataset by accident.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp


def _freeze_csr(m: sp.csr_matrix) -> sp.csr_matrix:
    m = sp.csr_matrix(m, dtype=np.float32)
    m.sum_duplicates()
    m.sort_indices()
    for a in (m.data, m.indices, m.indptr):
        a.flags.writeable = False
    return m


def _freeze(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


def binary_csr(users: np.ndarray, items: np.ndarray, n_users: int, n_items: int) -> sp.csr_matrix:
    """Build a read-only binary user×item CSR matrix; duplicate pairs collapse to one."""
    users = np.asarray(users, dtype=np.int64)
    items = np.asarray(items, dtype=np.int64)
    m = sp.csr_matrix((np.ones(len(users), dtype=np.float32), (users, items)), shape=(n_users, n_items))
    m.sum_duplicates()
    m.data[:] = 1.0
    return _freeze_csr(m)


def _test_only_counts(info: dict[str, object]) -> dict[str, int]:
    """The loader's test-only counts (0 when it recorded none), for :meth:`Interactions.stats`."""
    keys = ("test_only_users", "test_only_items", "test_only_rows_dropped")
    return {k: int(v) if isinstance(v := info.get(k, 0), int | np.integer) else 0 for k in keys}


class _LinkList:
    """What user–user and item–item link lists share: read-only int64 ``src``/``dst`` and their count.

    Not a dataclass itself (its annotations are no fields), so each subclass keeps its own field
    order (the id-space size first).
    """

    src: np.ndarray
    dst: np.ndarray

    def __post_init__(self) -> None:
        """Make ``src``/``dst`` read-only int64 arrays (frozen-dataclass safe)."""
        object.__setattr__(self, "src", _freeze(np.asarray(self.src, dtype=np.int64)))
        object.__setattr__(self, "dst", _freeze(np.asarray(self.dst, dtype=np.int64)))

    @property
    def n_links(self) -> int:
        """Number of stored (src, dst) rows."""
        return len(self.src)


def _link_adjacency(src: np.ndarray, dst: np.ndarray, n: int, symmetric: bool) -> sp.csr_matrix:
    """Binary n×n adjacency of links without self-loops; ``symmetric`` adds every reverse link."""
    keep = src != dst
    s, d = src[keep], dst[keep]
    if symmetric:
        s, d = np.concatenate([s, d]), np.concatenate([d, s])
    return binary_csr(s, d, n, n)


@dataclass(frozen=True)
class Interactions:
    """Implicit feedback split into train / valid / test, as binary user×item CSR matrices.

    Attributes:
        name: dataset name (for run folders and reports).
        n_users: number of users (rows).
        n_items: number of items (columns).
        train: binary CSR ``(n_users, n_items)``; the only matrix a model may train on.
        test: binary CSR ``(n_users, n_items)``, disjoint from ``train``.
        valid: optional binary CSR carved from the original training data, disjoint from both.
        user_ids: original id of each compact user index (``None`` when ids were already compact).
        item_ids: original id of each compact item index.
        info: free-form provenance (source files, rules applied, dropped counts).
    """

    name: str
    n_users: int
    n_items: int
    train: sp.csr_matrix
    test: sp.csr_matrix
    valid: sp.csr_matrix | None = None
    user_ids: np.ndarray | None = None
    item_ids: np.ndarray | None = None
    info: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        shape = (self.n_users, self.n_items)
        for part in ("train", "test", "valid"):
            m = getattr(self, part)
            if m is None:
                continue
            if m.shape != shape:
                raise ValueError(f"Interactions.{part} has shape {m.shape}, expected {shape}")
            object.__setattr__(self, part, _freeze_csr(m))
        for ids, n in (("user_ids", self.n_users), ("item_ids", self.n_items)):
            a = getattr(self, ids)
            if a is not None:
                if len(a) != n:
                    raise ValueError(f"Interactions.{ids} has {len(a)} ids, expected {n}")
                object.__setattr__(self, ids, _freeze(np.asarray(a)))

    @property
    def n_train(self) -> int:
        """Number of training interactions."""
        return int(self.train.nnz)

    def train_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Training (user, item) pairs in CSR order (user-major, items ascending)."""
        users = np.repeat(np.arange(self.n_users, dtype=np.int64), np.diff(self.train.indptr))
        return users, self.train.indices.astype(np.int64)

    def user_degrees(self) -> np.ndarray:
        """|I_u| in the training graph."""
        return np.diff(self.train.indptr).astype(np.int64)

    def item_degrees(self) -> np.ndarray:
        """|U_i| in the training graph."""
        return np.bincount(self.train.indices, minlength=self.n_items).astype(np.int64)

    def stats(self) -> dict[str, int]:
        """Counts for listings and run summaries: sizes, interactions per split, test-only ids.

        ``test_only_users``/``test_only_items`` count the users/items of the held-out files without
        a training row (their held-out rows were dropped unless the loader's ``test_only="keep"``).
        """
        return {
            "users": self.n_users,
            "items": self.n_items,
            "train": self.n_train,
            "valid": int(self.valid.nnz) if self.valid is not None else 0,
            "test": int(self.test.nnz),
            **_test_only_counts(self.info),
        }


@dataclass(frozen=True)
class SocialGraph(_LinkList):
    """User–user links in the same id space as the ratings.

    Attributes:
        n_users: size of the user id space.
        src: link sources.
        dst: link targets.
        directed: whether ``(src, dst)`` is a directed trust link (FilmTrust, Ciao, Epinions) or one
            direction of an undirected friendship already listed both ways.
    """

    n_users: int
    src: np.ndarray
    dst: np.ndarray
    directed: bool = True

    def adjacency(self, symmetric: bool = True, self_loops: bool = False) -> sp.csr_matrix:
        """Binary adjacency; ``symmetric`` adds every reverse link (the P4GCN A1 rule)."""
        a = _link_adjacency(self.src, self.dst, self.n_users, symmetric)
        if self_loops:
            a = (a + sp.identity(self.n_users, dtype=np.float32, format="csr")).tocsr()
        return _freeze_csr(a)


@dataclass(frozen=True)
class ItemTags:
    """Item → tag (category) memberships; an item may carry several tags."""

    n_items: int
    n_tags: int
    items: np.ndarray
    tags: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", _freeze(np.asarray(self.items, dtype=np.int64)))
        object.__setattr__(self, "tags", _freeze(np.asarray(self.tags, dtype=np.int64)))

    def matrix(self) -> sp.csr_matrix:
        """Binary item×tag CSR."""
        return binary_csr(self.items, self.tags, self.n_items, self.n_tags)


@dataclass(frozen=True)
class RatingSplit:
    """One split of explicit ratings as parallel arrays (user, item, rating)."""

    users: np.ndarray
    items: np.ndarray
    ratings: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "users", _freeze(np.asarray(self.users, dtype=np.int64)))
        object.__setattr__(self, "items", _freeze(np.asarray(self.items, dtype=np.int64)))
        object.__setattr__(self, "ratings", _freeze(np.asarray(self.ratings, dtype=np.float32)))
        if not (len(self.users) == len(self.items) == len(self.ratings)):
            raise ValueError("RatingSplit arrays must have equal length")

    def __len__(self) -> int:
        return len(self.users)


@dataclass(frozen=True)
class Ratings:
    """Explicit ratings with optional side information (social graph, item tags).

    Attributes:
        name: dataset name.
        n_users: size of the user id space (shared with ``social``).
        n_items: size of the item id space.
        train: training ratings.
        test: test ratings.
        valid: optional validation ratings.
        rating_range: (lowest, highest) legal rating.
        social: optional user–user graph.
        tags: optional item tags.
        info: provenance (files, de-duplication rule, dropped counts).
        user_ids: original id of each compact user index (``None``: the ids are ``0..n_users-1``).
        item_ids: original id of each compact item index.
    """

    name: str
    n_users: int
    n_items: int
    train: RatingSplit
    test: RatingSplit
    valid: RatingSplit | None = None
    rating_range: tuple[float, float] = (1.0, 5.0)
    social: SocialGraph | None = None
    tags: ItemTags | None = None
    info: dict[str, object] = field(default_factory=dict)
    user_ids: np.ndarray | None = None
    item_ids: np.ndarray | None = None

    def __post_init__(self) -> None:
        for ids, n in (("user_ids", self.n_users), ("item_ids", self.n_items)):
            a = getattr(self, ids)
            if a is not None:
                if len(a) != n:
                    raise ValueError(f"Ratings.{ids} has {len(a)} ids, expected {n}")
                object.__setattr__(self, ids, _freeze(np.asarray(a)))

    def stats(self) -> dict[str, int]:
        """Counts for listings and run summaries: sizes, ratings per split, links, tags, test-only ids."""
        return {
            "users": self.n_users,
            "items": self.n_items,
            "train": len(self.train),
            "valid": len(self.valid) if self.valid is not None else 0,
            "test": len(self.test),
            "links": self.social.n_links if self.social is not None else 0,
            "tags": self.tags.n_tags if self.tags is not None else 0,
            **_test_only_counts(self.info),
        }

    def to_interactions(self, threshold: float | None = None) -> Interactions:
        """Implicit view: every rating (or every rating ≥ ``threshold``) becomes an interaction.

        Ids are kept as they are (no compaction), so side information stays aligned; the original
        ids (``user_ids``/``item_ids``) carry over.
        """

        def mat(split: RatingSplit | None) -> sp.csr_matrix | None:
            if split is None:
                return None
            keep = np.ones(len(split), bool) if threshold is None else split.ratings >= threshold
            return binary_csr(split.users[keep], split.items[keep], self.n_users, self.n_items)

        train, test = mat(self.train), mat(self.test)
        assert train is not None and test is not None
        return Interactions(
            name=self.name,
            n_users=self.n_users,
            n_items=self.n_items,
            train=train,
            test=test,
            valid=mat(self.valid),
            user_ids=self.user_ids,
            item_ids=self.item_ids,
            info={**self.info, "implicit_threshold": threshold},
        )


Dataset = Interactions | Ratings


@dataclass(frozen=True)
class ItemGraph(_LinkList):
    """Item–item relations (Flixster's ``W_movies``), in the item id space of the ratings.

    ``Ratings`` has no field for item relations, so loaders carry this object in
    ``Ratings.info["item_graph"]``.

    Attributes:
        n_items: size of the item id space.
        src: relation sources.
        dst: relation targets.
        directed: ``False`` when every undirected relation is already listed in both directions.
    """

    n_items: int
    src: np.ndarray
    dst: np.ndarray
    directed: bool = False

    def adjacency(self, symmetric: bool = True) -> sp.csr_matrix:
        """Binary item×item adjacency without self-loops; ``symmetric`` adds every reverse link."""
        return _link_adjacency(self.src, self.dst, self.n_items, symmetric)
