"""The catalogue: one :class:`DatasetSpec` per dataset name users can type, in :data:`REGISTRY`.

Kept apart from :mod:`fedgraphrec.data.registry` (which finds and loads the files) so the list of
datasets and their per-dataset cleaning rules read as one table; the registry re-exports both names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from fedgraphrec.data import download as _download

__all__ = ["REGISTRY", "DatasetSpec"]


@dataclass(frozen=True)
class DatasetSpec:
    """A known dataset.

    Attributes:
        name: the name users type (``--dataset``).
        kind: ``"interactions"`` (implicit) or ``"ratings"`` (explicit, maybe with side information).
        folder: folder name under a data root; ``None`` for generated data.
        format: key of :data:`FORMATS` (or ``"synthetic"``/``"synthetic-ratings"``).
        options: default loader options (the per-dataset cleaning rules).
        description: one line for listings.
        availability: ``"complete"`` or ``"partial"`` as in the datasets' INDEX.md.
        note: what is missing or deviates, for listings and error messages.
        url: public download URL, when there is one.
    """

    name: str
    kind: Literal["interactions", "ratings"]
    folder: str | None
    format: str
    options: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    availability: str = "complete"
    note: str = ""
    url: str | None = None


def _spec(*args: Any, **kwargs: Any) -> DatasetSpec:
    kwargs["options"] = MappingProxyType(dict(kwargs.get("options", {})))
    return DatasetSpec(*args, **kwargs)


_SPECS = [
    _spec(
        "ml-100k",
        "interactions",
        "ml-100k",
        "ml100k",
        options={"split": "u1", "threshold": 4.0, "compact": "train"},
        description="MovieLens-100K, split u1, ratings >= 4 as positives, ids compacted over train",
        url=_download.ML100K_URL,
    ),
    _spec(
        "ml-100k-ratings",
        "ratings",
        "ml-100k",
        "ml100k-ratings",
        options={"split": "u1", "compact": "all"},
        description="MovieLens-100K explicit ratings 1..5, split u1",
        url=_download.ML100K_URL,
    ),
    _spec("gowalla", "interactions", "gowalla", "lightgcn", description="Gowalla check-ins (LightGCN split)"),
    _spec("yelp2018", "interactions", "yelp2018", "lightgcn", description="Yelp2018 (LightGCN split)"),
    _spec(
        "amazon-book",
        "interactions",
        "amazon-book",
        "lightgcn",
        description="Amazon-Book (LightGCN split)",
        availability="partial",
        note=(
            "training set missing: the original train.txt (2,380,730 interactions) could not be "
            "obtained; only the test split is here (see the datasets' INDEX.md)"
        ),
    ),
    _spec(
        "filmtrust",
        "ratings",
        "filmtrust",
        "ratings",
        options={"rating_range": (0.5, 4.0), "social_directed": True, "dedup": "none", "test_only": "keep"},
        description="FilmTrust ratings 0.5-4 + directed trust (per-user 80/10/10)",
    ),
    _spec(
        "ciao",
        "ratings",
        "ciao",
        "ratings",
        options={
            "rating_range": (1.0, 5.0),
            "drop_zero": True,
            "dedup": "last",
            "social_directed": True,
            "test_only": "keep",
        },
        description="Ciao ratings 1-5 + trust + 28 categories (rating-0 rows dropped, last duplicate kept)",
        note="deviates from the paper: +5.4 % items, +1.5 % unique ratings",
    ),
    _spec(
        "ciao-10core",
        "ratings",
        "ciao",
        "derived",
        options={"base": "ciao", "min_user": 10, "min_item": 10},
        description="Ciao's iterated 10-core (2,540 x 3,018; the Weeplaces rule), trust + categories",
        note="derived from ciao (users and items with < 10 interactions removed, iterated)",
    ),
    _spec(
        "epinions",
        "ratings",
        "epinions",
        "ratings",
        options={"rating_range": (1.0, 5.0), "dedup": "last", "social_directed": True, "test_only": "keep"},
        description="Epinions ratings 1-5 + trust + 27 categories (last duplicate kept)",
        note="deviates from the paper: +26.6 % ratings",
    ),
    _spec(
        "douban",
        "ratings",
        "douban",
        "ratings",
        options={
            "rating_range": (1.0, 5.0),
            "social_directed": False,
            "n_users": 3000,
            "n_items": 3000,
            "test_only": "keep",
        },
        description="Douban (Monti) ratings 1-5, fixed split, user graph",
    ),
    _spec(
        "flixster",
        "ratings",
        "flixster",
        "ratings",
        options={
            "rating_range": (0.5, 5.0),
            "social_directed": False,
            "n_users": 3000,
            "n_items": 3000,
            "test_only": "keep",
        },
        description="Flixster (Monti) ratings 0.5-5, fixed split, user graph, item graph in info",
        note="deviates from the paper: -45.9 % interactions",
    ),
    _spec(
        "weeplaces",
        "interactions",
        "weeplaces",
        "weeplaces",
        description="Weeplaces POI check-ins (GroupIM split)",
        availability="partial",
        note="no friendships and no POI categories",
    ),
    _spec(
        "synthetic",
        "interactions",
        None,
        "synthetic",
        description="generated implicit feedback (power-law popularity, planted topics)",
    ),
    _spec(
        "synthetic-ratings",
        "ratings",
        None,
        "synthetic-ratings",
        description="generated ratings with a social graph and item tags",
    ),
]

REGISTRY: Mapping[str, DatasetSpec] = MappingProxyType({s.name: s for s in _SPECS})
"""Every known dataset by name."""
