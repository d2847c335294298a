"""The real datasets under $FEDGRAPHREC_DATA match the statistics in their INDEX.md.

Skipped (with the reason) when FEDGRAPHREC_DATA is unset or a dataset folder is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from fedgraphrec.data.download import ML100K_SHA256, sha256_of
from fedgraphrec.data.errors import DataError
from fedgraphrec.data.listing import list_datasets
from fedgraphrec.data.loaders.lightgcn import load_lightgcn
from fedgraphrec.data.loaders.movielens import load_ml100k, load_ml100k_ratings
from fedgraphrec.data.registry import load_dataset
from fedgraphrec.data.types import Interactions, ItemGraph, Ratings

pytestmark = pytest.mark.datasets

Folder = Callable[[str], Path]


def _interactions(name: str, root: Path, **options: object) -> Interactions:
    d = load_dataset(name, data_dir=root, download=False, **options)
    assert isinstance(d, Interactions)
    return d


def _ratings(name: str, root: Path, **options: object) -> Ratings:
    r = load_dataset(name, data_dir=root, download=False, **options)
    assert isinstance(r, Ratings)
    return r


def _total(r: Ratings) -> int:
    return len(r.train) + len(r.test) + (len(r.valid) if r.valid is not None else 0)


@pytest.mark.parametrize(
    ("name", "users", "items", "train", "test"),
    [
        ("gowalla", 29_858, 40_981, 810_128, 217_242),
        ("yelp2018", 31_668, 38_048, 1_237_259, 324_147),
    ],
)
def test_lightgcn_datasets(
    dataset_folder: Folder, name: str, users: int, items: int, train: int, test: int
) -> None:
    folder = dataset_folder(name)
    d = _interactions(name, folder.parent)
    assert (d.n_users, d.n_items, d.n_train, d.test.nnz) == (users, items, train, test)
    assert d.train.multiply(d.test).nnz == 0
    assert (d.user_degrees() > 0).all() and (d.item_degrees() > 0).all()


def test_amazon_book_is_test_only(dataset_folder: Folder) -> None:
    folder = dataset_folder("amazon-book")
    with pytest.raises(DataError, match="training set is missing"):
        load_dataset("amazon-book", data_dir=folder.parent, download=False)
    d = load_lightgcn(folder, require_train=False)
    assert (d.n_users, d.n_items, d.n_train, d.test.nnz) == (52_643, 91_599, 0, 603_378)


def test_ml100k_u1_threshold4(dataset_folder: Folder) -> None:
    folder = dataset_folder("ml-100k")
    d = _interactions("ml-100k", folder.parent)
    assert (d.n_users, d.n_items) == (942, 1_408)
    assert (d.user_degrees() > 0).all() and (d.item_degrees() > 0).all()
    assert d.n_train == 44_140
    assert d.test.nnz + int(d.info["dropped_test"]) == 11_235  # type: ignore[call-overload]
    full = load_ml100k(folder, compact="all")
    assert (full.n_users, full.n_items) == (943, 1_682)
    assert full.info["dropped_test"] == 0 and full.test.nnz == 11_235


@pytest.mark.parametrize(
    ("split", "train", "test"), [("u1", 80_000, 20_000), ("u5", 80_000, 20_000), ("ua", 90_570, 9_430)]
)
def test_ml100k_ratings_splits(dataset_folder: Folder, split: str, train: int, test: int) -> None:
    r = load_ml100k_ratings(dataset_folder("ml-100k"), split=split)
    assert (r.n_users, r.n_items, len(r.train), len(r.test)) == (943, 1_682, train, test)
    counts = np.bincount(np.concatenate([r.train.ratings, r.test.ratings]).astype(int), minlength=6)
    assert counts[1:].tolist() == [6_110, 11_370, 27_145, 34_174, 21_201]


def test_ml100k_per_user_split(dataset_folder: Folder) -> None:
    r = load_ml100k_ratings(dataset_folder("ml-100k"), split="all", seed=0)
    assert _total(r) == 100_000
    assert r.valid is not None and 9_000 < len(r.test) < 11_000


def test_ml100k_checksums_match_the_release(dataset_folder: Folder) -> None:
    folder = dataset_folder("ml-100k")
    for name, digest in ML100K_SHA256.items():
        assert sha256_of(folder / name) == digest, name


def test_filmtrust(dataset_folder: Folder) -> None:
    r = _ratings("filmtrust", dataset_folder("filmtrust").parent)
    # the paper's 35,497 rows keep 3 repeated pairs; a pair the split puts in train and held-out is
    # dropped from the held-out side (no pair in both)
    overlap = int(r.info["dropped_test_overlap"]) + int(r.info["dropped_valid_overlap"])  # type: ignore[call-overload]
    assert _total(r) + overlap == 35_497 and overlap == 2
    assert r.valid is not None
    raters = np.unique(np.concatenate([r.train.users, r.valid.users, r.test.users]))
    assert len(raters) == 1_508 and r.n_users == 1_642
    assert r.n_items == 2_071
    assert r.social is not None and r.social.n_links == 1_853
    assert r.rating_range == (0.5, 4.0)


def test_ciao(dataset_folder: Folder) -> None:
    r = _ratings("ciao", dataset_folder("ciao").parent)
    assert (r.n_users, r.n_items) == (7_375, 105_114)
    assert r.info["rows_read"] == 284_086 and r.info["dropped_zero_ratings"] == 34
    assert _total(r) == 284_086 - 34 - int(r.info["duplicate_rows_removed"])  # type: ignore[call-overload]
    assert r.social is not None and r.social.n_links == 111_781
    assert r.tags is not None and r.tags.n_tags == 28
    assert min(float(s.ratings.min()) for s in (r.train, r.test)) >= 1.0


def test_ciao_10core_is_the_iterated_10_core_of_ciao(dataset_folder: Folder) -> None:
    """The registry's derived ``ciao-10core``: the counts of results/dgrec/README.md, side info aligned."""
    r = _ratings("ciao-10core", dataset_folder("ciao").parent)
    assert (r.n_users, r.n_items) == (2_540, 3_018)
    assert r.valid is not None and (len(r.train), len(r.valid), len(r.test)) == (57_151, 7_247, 7_248)
    assert r.info["derived_from"] == "ciao" and r.info["core_rounds"] == 8
    assert r.tags is not None and r.tags.n_tags == 23
    assert r.social is not None and r.social.adjacency(symmetric=True).nnz == 74_718
    inter = r.to_interactions()
    per_user = np.asarray((inter.train + inter.test + inter.valid).sum(axis=1)).ravel()
    assert per_user.min() >= 10


def test_epinions(dataset_folder: Folder) -> None:
    folder = dataset_folder("epinions")
    r = _ratings("epinions", folder.parent)
    assert (r.n_users, r.n_items) == (22_165, 296_277)
    assert r.info["duplicate_rows_removed"] == 922_267 - 912_441
    assert _total(r) == 912_441
    assert r.social is not None and r.social.n_links == 355_754
    assert r.info["social_self_loops"] == 224 and r.info["social_duplicate_rows"] == 27
    assert r.tags is not None and r.tags.n_tags == 27


def test_douban(dataset_folder: Folder) -> None:
    r = _ratings("douban", dataset_folder("douban").parent)
    assert (r.n_users, r.n_items, len(r.train), len(r.test)) == (3_000, 3_000, 123_202, 13_689)
    assert r.social is not None and r.social.n_links == 2_690 and not r.social.directed
    assert r.social.adjacency().nnz == 2 * 1_344


def test_flixster(dataset_folder: Folder) -> None:
    r = _ratings("flixster", dataset_folder("flixster").parent)
    assert (r.n_users, r.n_items, len(r.train), len(r.test)) == (3_000, 3_000, 23_556, 2_617)
    assert r.social is not None and r.social.adjacency().nnz == 59_354
    graph = r.info["item_graph"]
    assert isinstance(graph, ItemGraph) and graph.n_links == 50_918 and graph.adjacency().nnz == 50_918
    assert r.rating_range == (0.5, 5.0)


def test_weeplaces(dataset_folder: Folder) -> None:
    d = _interactions("weeplaces", dataset_folder("weeplaces").parent, test_only="keep")
    assert (d.n_users, d.n_items) == (8_643, 25_081)
    assert d.valid is not None
    assert (d.n_train, d.valid.nnz, d.test.nnz) == (355_913 + 29_082 + 61_595, 19_885, 42_010)
    # the default drops the held-out rows of the 22 users and 36 POIs without a training row
    dropped = _interactions("weeplaces", dataset_folder("weeplaces").parent)
    assert (dropped.n_users, dropped.n_items) == (8_643 - 22, 25_081 - 36)
    assert dropped.stats()["test_only_users"] == 22 and dropped.stats()["test_only_items"] == 36
    assert dropped.valid is not None and dropped.n_train == d.n_train
    assert dropped.valid.nnz + dropped.test.nnz + dropped.info["test_only_rows_dropped"] == 19_885 + 42_010


def test_listing_of_the_real_root(datasets_root: Path) -> None:
    listings = {x.name: x for x in list_datasets(datasets_root)}
    for name in ("ml-100k", "gowalla", "yelp2018", "filmtrust", "ciao", "epinions", "douban", "flixster"):
        assert listings[name].status == "complete", (name, listings[name].note)
    assert listings["amazon-book"].status == "partial" and listings["amazon-book"].train == 0
    assert listings["weeplaces"].status == "partial"
    assert listings["ciao-10core"].status == "complete" and listings["ciao-10core"].items == 3_018
    assert listings["gowalla"].users == 29_858
