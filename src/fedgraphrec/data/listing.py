"""What datasets are available, where, and their statistics (``fedgraphrec datasets``).

Statistics are computed by actually loading each dataset, so they describe exactly what a run
would get. Results are cached in ``<cache>/dataset_stats.json``, keyed by the folder and the size
and modification time of its files, so a second listing is instant and any change to the files
invalidates the entry.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedgraphrec.data._arrays import sorted_unique
from fedgraphrec.data.catalog import REGISTRY, DatasetSpec
from fedgraphrec.data.errors import DataError
from fedgraphrec.data.registry import cache_dir, find_dataset, load_dataset
from fedgraphrec.data.types import Interactions, ItemGraph, Ratings

STATS_CACHE_FILE = "dataset_stats.json"
_STATS_VERSION = 2  # 2: ids compacted, test-only rows dropped (issue #32)


@dataclass(frozen=True)
class DatasetListing:
    """One row of the dataset listing.

    Attributes:
        name: registry name.
        kind: ``"interactions"`` or ``"ratings"``.
        where: the folder it was found in, ``"generated"``, or ``"not found"``.
        status: ``"complete"``, ``"partial"``, ``"not found"``, ``"downloadable"`` or ``"error"``.
        users: size of the user id space (0 when not loaded).
        items: size of the item id space.
        train: training interactions/ratings.
        valid: validation interactions/ratings.
        test: test interactions/ratings.
        links: social links (rows of the social graph).
        tags: number of distinct item tags.
        note: what is missing, deviates, or why loading failed.
    """

    name: str
    kind: str
    where: str
    status: str
    users: int = 0
    items: int = 0
    train: int = 0
    valid: int = 0
    test: int = 0
    links: int = 0
    tags: int = 0
    note: str = ""

    @property
    def path(self) -> str | None:
        """The folder it was found in, or ``None`` when it was not found."""
        return None if self.where == "not found" else self.where

    def as_dict(self) -> dict[str, Any]:
        """The fields plus ``path`` as a plain, JSON-serialisable dict."""
        return {**dataclasses.asdict(self), "path": self.path}


def describe(data: Interactions | Ratings) -> dict[str, Any]:
    """Summary statistics of a loaded dataset (counts, density, degrees, side information)."""
    out: dict[str, Any] = {
        "name": data.name,
        "kind": "interactions" if isinstance(data, Interactions) else "ratings",
    }
    out.update(data.stats())
    cells = max(data.n_users * data.n_items, 1)
    if isinstance(data, Interactions):
        deg = data.user_degrees()
        out["density"] = data.n_train / cells
        out["users_without_train"] = int((deg == 0).sum())
        out["mean_train_per_user"] = float(deg.mean()) if len(deg) else 0.0
        out["items_without_train"] = int((data.item_degrees() == 0).sum())
        return out
    n_ratings = len(data.train) + len(data.test) + (len(data.valid) if data.valid is not None else 0)
    out["density"] = n_ratings / cells
    out["rating_range"] = data.rating_range
    out["mean_train_rating"] = float(data.train.ratings.mean()) if len(data.train) else 0.0
    out["raters"] = len(sorted_unique(data.train.users))
    graph = data.info.get("item_graph")
    if isinstance(graph, ItemGraph):
        out["item_links"] = graph.n_links
    return out


def _signature(folder: Path) -> list[list[Any]]:
    return sorted([p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in folder.iterdir() if p.is_file())


def _load_cache(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) and raw.get("version") == _STATS_VERSION else {}


def _save_cache(path: Path, cache: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(cache, indent=1, sort_keys=True))
        tmp.replace(path)
    except OSError:
        pass  # a read-only cache only costs speed


def _listing_from_data(spec: DatasetSpec, where: str, data: Interactions | Ratings) -> DatasetListing:
    stats = data.stats()
    partial = spec.availability == "partial" or bool(data.info.get("train_missing"))
    return DatasetListing(
        name=spec.name,
        kind=spec.kind,
        where=where,
        status="partial" if partial else "complete",
        users=stats["users"],
        items=stats["items"],
        train=stats["train"],
        valid=stats["valid"],
        test=stats["test"],
        links=stats.get("links", 0),
        tags=stats.get("tags", 0),
        note=spec.note,
    )


def _list_one(spec: DatasetSpec, data_dir: str | Path | None, cache: dict[str, Any]) -> DatasetListing:
    if spec.folder is None:
        return _listing_from_data(spec, "generated", load_dataset(spec.name))
    folder = find_dataset(spec.name, data_dir)
    if folder is None:
        status = "downloadable" if spec.url else "not found"
        return DatasetListing(spec.name, spec.kind, "not found", status, note=spec.note)
    key = f"{spec.name}|{folder.resolve()}"
    signature = _signature(folder)
    entry = cache.get("entries", {}).get(key)
    if entry is not None and entry.get("signature") == signature:
        try:
            return DatasetListing(**entry["listing"])
        except TypeError:
            pass  # written by another version: recompute
    options: dict[str, Any] = {"require_train": False} if spec.format == "lightgcn" else {}
    try:
        data = load_dataset(spec.name, data_dir, download=False, **options)
    except DataError as exc:
        return DatasetListing(spec.name, spec.kind, str(folder), "error", note=str(exc))
    listing = _listing_from_data(spec, str(folder), data)
    cache.setdefault("entries", {})[key] = {"signature": signature, "listing": dataclasses.asdict(listing)}
    return listing


def list_datasets(data_dir: str | Path | None = None, *, use_cache: bool = True) -> list[DatasetListing]:
    """Every known dataset: where it was found, whether it is complete, and its statistics.

    Args:
        data_dir: explicit data root (searched first, as in :func:`load_dataset`).
        use_cache: reuse statistics cached for unchanged folders (and store new ones).

    Returns:
        One :class:`DatasetListing` per registry entry, in registry order. A dataset that fails to
        load is listed with status ``"error"`` and the reason in ``note``; nothing is downloaded.
    """
    cache_path = cache_dir() / STATS_CACHE_FILE
    cache = _load_cache(cache_path) if use_cache else {}
    cache["version"] = _STATS_VERSION
    listings = [_list_one(spec, data_dir, cache) for spec in REGISTRY.values()]
    if use_cache:
        _save_cache(cache_path, cache)
    return listings


_COLUMNS = ("name", "status", "users", "items", "train", "valid", "test", "links", "tags", "where")


def format_listing(listings: list[DatasetListing]) -> str:
    """A plain-text table of listings (numbers with thousands separators), for the CLI."""
    rows = [list(_COLUMNS)]
    for item in listings:
        d = item.as_dict()
        rows.append([f"{d[c]:,}" if isinstance(d[c], int) else str(d[c]) for c in _COLUMNS])
    widths = [max(len(r[j]) for r in rows) for j in range(len(_COLUMNS))]
    numeric = {c for c in _COLUMNS if c in ("users", "items", "train", "valid", "test", "links", "tags")}
    lines = []
    for r in rows:
        cells = [
            cell.rjust(w) if _COLUMNS[j] in numeric else cell.ljust(w)
            for j, (cell, w) in enumerate(zip(r, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)
