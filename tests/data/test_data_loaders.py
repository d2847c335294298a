"""Each loader on tiny files written by the test, and on malformed ones."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from fedgraphrec.data.errors import DataError, DataFormatError, DatasetNotFoundError
from fedgraphrec.data.loaders.lightgcn import load_lightgcn
from fedgraphrec.data.loaders.movielens import load_ml100k, load_ml100k_ratings
from fedgraphrec.data.loaders.tsv import load_rating_folder
from fedgraphrec.data.loaders.weeplaces import load_weeplaces
from fedgraphrec.data.types import ItemGraph, Ratings

Write = Callable[..., Path]


def dense(m: object) -> list[list[int]]:
    return np.asarray(m.toarray(), dtype=int).tolist()  # type: ignore[attr-defined]


# ---------------------------------------------------------------- LightGCN


@pytest.mark.parametrize("gz", [False, True])
def test_lightgcn_basic(tmp_path: Path, write: Write, gz: bool) -> None:
    suffix = ".gz" if gz else ""
    write(tmp_path / f"train.txt{suffix}", "0 1 2\n1 2\n", gz=gz)
    write(tmp_path / f"test.txt{suffix}", "0 3\n1\n2 0\n", gz=gz)
    d = load_lightgcn(tmp_path, name="tiny", test_only="keep")  # user 2 is in test only
    assert (d.name, d.n_users, d.n_items) == ("tiny", 3, 4)
    assert dense(d.train) == [[0, 1, 1, 0], [0, 0, 1, 0], [0, 0, 0, 0]]
    assert dense(d.test) == [[0, 0, 0, 1], [0, 0, 0, 0], [1, 0, 0, 0]]
    assert d.valid is None
    assert d.info["test_users_without_items"] == 1


def test_lightgcn_user_fraction_samples_users_before_the_validation_carve(
    tmp_path: Path, write: Write
) -> None:
    lines = "".join(f"{u} {u % 7} {(u + 1) % 7} {(u + 2) % 7}\n" for u in range(40))
    write(tmp_path / "train.txt", lines)
    write(tmp_path / "test.txt", "".join(f"{u} {(u + 3) % 7}\n" for u in range(40)))
    d = load_lightgcn(tmp_path, user_fraction=0.5, sample_seed=1, valid_fraction=0.3)
    again = load_lightgcn(tmp_path, user_fraction=0.5, sample_seed=1, valid_fraction=0.3)
    assert d.n_users == 20 and d.info["user_sample"]["of_users"] == 40  # type: ignore[index]
    assert d.user_ids is not None and again.user_ids is not None
    assert d.user_ids.tolist() == again.user_ids.tolist()
    assert d.valid is not None and d.valid.nnz > 0
    assert d.train.nnz + d.valid.nnz == 3 * 20


def test_lightgcn_lists_enlarge_id_space(tmp_path: Path, write: Write) -> None:
    write(tmp_path / "train.txt", "0 1\n")
    write(tmp_path / "test.txt", "0 0\n")
    write(tmp_path / "user_list.txt", "org_id remap_id\na 0\nb 1\nc 2\n")
    write(tmp_path / "item_list.txt", "org_id remap_id\n" + "".join(f"x{k} {k}\n" for k in range(5)))
    d = load_lightgcn(tmp_path)
    assert (d.n_users, d.n_items) == (3, 5)


def test_lightgcn_duplicates_and_overlap(tmp_path: Path, write: Write) -> None:
    write(tmp_path / "train.txt", "0 1 1 2\n0 2 3\n")
    write(tmp_path / "test.txt", "0 3 4\n")
    d = load_lightgcn(tmp_path, test_only="keep")
    assert d.train.nnz == 3
    assert d.info["duplicate_train_pairs"] == 2
    assert d.item_ids is not None and d.item_ids.tolist() == [1, 2, 3, 4]  # item 0 occurs nowhere
    assert dense(d.test) == [[0, 0, 0, 1]]
    assert d.info["dropped_test_overlap"] == 1


def test_lightgcn_train_line_without_items_is_an_error(tmp_path: Path, write: Write) -> None:
    p = write(tmp_path / "train.txt", "0 1\n1\n")
    write(tmp_path / "test.txt", "0 0\n")
    with pytest.raises(DataFormatError, match=rf"^{p}:2: user 1 has no items"):
        load_lightgcn(tmp_path)


def test_lightgcn_malformed(tmp_path: Path, write: Write) -> None:
    write(tmp_path / "train.txt", "0 1\n")
    p = write(tmp_path / "test.txt", "0 0\n1 2 three\n")
    with pytest.raises(DataFormatError, match=rf"^{p}:2: column 3: 'three' is not an integer id"):
        load_lightgcn(tmp_path)


def test_lightgcn_missing_train(tmp_path: Path, write: Write) -> None:
    write(tmp_path / "test.txt", "0 0\n1 1\n")
    with pytest.raises(DataError, match="training set is missing"):
        load_lightgcn(tmp_path)
    d = load_lightgcn(tmp_path, require_train=False)
    assert d.train.nnz == 0 and d.test.nnz == 2 and d.info["train_missing"] is True


def test_lightgcn_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError, match="nowhere"):
        load_lightgcn(tmp_path / "nowhere")


def test_lightgcn_valid_fraction(tmp_path: Path, write: Write) -> None:
    write(tmp_path / "train.txt", "".join(f"{u} " + " ".join(map(str, range(10))) + "\n" for u in range(4)))
    write(tmp_path / "test.txt", "0 10\n")
    d = load_lightgcn(tmp_path, valid_fraction=0.2, seed=3)
    assert d.valid is not None and d.valid.nnz == 8 and d.train.nnz == 32
    assert d.train.multiply(d.valid).nnz == 0


# ---------------------------------------------------------------- MovieLens-100K

ML_TRAIN = "1\t10\t5\t0\n1\t20\t4\t0\n3\t10\t4\t0\n3\t30\t2\t0\n5\t20\t5\t0\n"
ML_TEST = "1\t30\t5\t0\n3\t20\t4\t0\n7\t10\t5\t0\n5\t10\t1\t0\n"


@pytest.fixture
def ml_folder(tmp_path: Path, write: Write) -> Path:
    folder = tmp_path / "ml"
    write(folder / "u1.base", ML_TRAIN)
    write(folder / "u1.test", ML_TEST)
    write(folder / "u.data", ML_TRAIN + ML_TEST)
    return folder


def test_ml100k_compact_train(ml_folder: Path) -> None:
    d = load_ml100k(ml_folder)
    assert d.user_ids is not None and d.item_ids is not None
    assert d.user_ids.tolist() == [1, 3, 5]
    assert d.item_ids.tolist() == [10, 20]
    assert dense(d.train) == [[1, 1], [1, 0], [0, 1]]
    assert dense(d.test) == [[0, 0], [0, 1], [0, 0]]
    assert d.info["dropped_test"] == 2  # (1, 30): item unseen in train; (7, 10): user unseen


def test_ml100k_compact_all(ml_folder: Path) -> None:
    d = load_ml100k(ml_folder, compact="all")
    assert (d.n_users, d.n_items) == (4, 3)
    assert d.train.nnz == 4 and d.test.nnz == 3
    assert d.info["dropped_test"] == 0


def test_ml100k_no_threshold(ml_folder: Path) -> None:
    d = load_ml100k(ml_folder, threshold=None)
    assert d.train.nnz == 5
    assert d.item_ids is not None and d.item_ids.tolist() == [10, 20, 30]


def test_ml100k_per_user_split(ml_folder: Path) -> None:
    a = load_ml100k(ml_folder, split="all", threshold=None, compact="all", seed=1)
    b = load_ml100k(ml_folder, split=None, threshold=None, compact="all", seed=1)
    assert (a.train != b.train).nnz == 0 and (a.test != b.test).nnz == 0
    assert a.train.nnz + a.test.nnz + (a.valid.nnz if a.valid is not None else 0) == 9


def test_ml100k_ratings(ml_folder: Path) -> None:
    r = load_ml100k_ratings(ml_folder)
    assert (r.n_users, r.n_items) == (4, 3)
    assert len(r.train) == 5 and len(r.test) == 4
    assert r.rating_range == (1.0, 5.0)
    assert sorted(r.train.ratings.tolist()) == [2, 4, 4, 5, 5]
    r2 = load_ml100k_ratings(ml_folder, compact="train")
    assert len(r2.test) == 3 and r2.info["dropped_test"] == 1


def test_ml100k_errors(tmp_path: Path, write: Write, ml_folder: Path) -> None:
    p = write(ml_folder / "u2.base", "1\t10\t5\t0\n1\t20\t4\n")
    write(ml_folder / "u2.test", ML_TEST)
    with pytest.raises(DataFormatError, match=rf"^{p}:2: expected 4 columns, got 3"):
        load_ml100k(ml_folder, split="u2")
    p = write(ml_folder / "u3.base", "1\t10\t5\t0\n1\t20\t6\t0\n")
    write(ml_folder / "u3.test", ML_TEST)
    with pytest.raises(DataFormatError, match=rf"^{p}:2: rating 6 is outside"):
        load_ml100k(ml_folder, split="u3")
    with pytest.raises(DatasetNotFoundError, match=r"u4\.base"):
        load_ml100k(ml_folder, split="u4")
    with pytest.raises(DataError, match="unknown MovieLens-100K split"):
        load_ml100k(ml_folder, split="u9")


# ---------------------------------------------------------------- rating folders


def _as_dict(r: Ratings) -> dict[tuple[int, int], float]:
    t = r.train
    return {(int(u), int(i)): float(x) for u, i, x in zip(t.users, t.items, t.ratings, strict=True)}


def test_rating_folder_dedup_last_and_drop_zero(tmp_path: Path, write: Write) -> None:
    # user 0 rates item 1 twice (3 then 5): "last" keeps 5; (1, 2) has a rating-0 row after a real one.
    rows = ["0\t1\t3", "0\t2\t4", "0\t1\t5", "1\t2\t2", "1\t2\t0", "1\t3\t4", "2\t0\t1", "2\t1\t1"]
    write(tmp_path / "ratings.tsv", "\n".join(rows) + "\n")
    r = load_rating_folder(tmp_path, rating_range=(1, 5), drop_zero=True, dedup="last", fractions=(1, 0, 0))
    assert r.info["rows_read"] == 8
    assert r.info["dropped_zero_ratings"] == 1
    assert r.info["duplicate_rows_removed"] == 1
    got = _as_dict(r)
    assert got[(0, 1)] == 5.0 and got[(1, 2)] == 2.0 and len(got) == 6
    first = load_rating_folder(tmp_path, drop_zero=True, dedup="first", fractions=(1, 0, 0))
    assert _as_dict(first)[(0, 1)] == 3.0


def test_rating_folder_zero_without_drop_is_out_of_range(tmp_path: Path, write: Write) -> None:
    p = write(tmp_path / "ratings.tsv", "0\t1\t3\n0\t2\t0\n")
    with pytest.raises(DataFormatError, match=rf"^{p}:2: rating 0 is outside the range \[1, 5\]"):
        load_rating_folder(tmp_path, rating_range=(1, 5))


def test_rating_folder_side_information(tmp_path: Path, write: Write) -> None:
    write(tmp_path / "ratings.tsv.gz", "0\t0\t1\n0\t1\t4\n1\t1\t3.5\n", gz=True)
    write(tmp_path / "social.tsv", "0\t1\n1\t5\n5\t5\n")  # user 5 only trusts: n_users covers it
    write(tmp_path / "item_tags.tsv", "0\t7\n1\t3\n1\t7\n4\t3\n")  # item 4 only tagged
    write(tmp_path / "item_graph.tsv", "0\t1\n1\t0\n")
    r = load_rating_folder(tmp_path, rating_range=(0.5, 4.0), fractions=(1, 0, 0))
    # users 2-4 and items 2-3 occur nowhere: no phantom rows; the trust-only user and tag-only item stay
    assert (r.n_users, r.n_items) == (3, 3)
    assert r.user_ids is not None and r.user_ids.tolist() == [0, 1, 5]
    assert r.item_ids is not None and r.item_ids.tolist() == [0, 1, 4]
    assert r.social is not None and r.social.src.tolist() == [0, 1, 2] and r.social.dst.tolist() == [1, 2, 2]
    assert r.social is not None and r.social.n_links == 3 and r.social.directed
    assert r.info["social_self_loops"] == 1
    assert r.tags is not None and r.tags.n_tags == 2
    assert np.asarray(r.info["tag_ids"]).tolist() == [3, 7]
    assert r.tags.matrix().toarray().tolist()[1] == [1.0, 1.0]
    graph = r.info["item_graph"]
    assert isinstance(graph, ItemGraph) and graph.n_links == 2 and graph.n_items == 3
    assert graph.adjacency().nnz == 2
    assert r.rating_range == (0.5, 4.0)
    assert r.name == tmp_path.name


def test_rating_folder_fixed_split(tmp_path: Path, write: Write) -> None:
    write(tmp_path / "ratings.tsv", "0\t0\t1\n")  # ignored when train/test exist
    write(tmp_path / "train.tsv", "0\t0\t1\n0\t1\t2\n1\t1\t3\n1\t2\t4\n1\t0\t5\n")
    write(tmp_path / "test.tsv", "0\t2\t3\n")
    r = load_rating_folder(tmp_path, n_users=10, n_items=4, social_directed=False)
    assert (r.n_users, r.n_items) == (10, 4)
    assert len(r.train) == 5 and len(r.test) == 1 and r.valid is None
    assert r.info["split"] == "fixed"
    r2 = load_rating_folder(tmp_path, valid_fraction=0.34, seed=1)
    # per user: round_half_up(2 * 0.34) = 1 and round_half_up(3 * 0.34) = 1 rows move
    assert r2.valid is not None and len(r2.valid) == 2 and len(r2.train) == 3


def test_rating_folder_per_user_split_and_inferred_range(tmp_path: Path, write: Write) -> None:
    rows = "".join(f"{u}\t{i}\t{1 + (u + i) % 4}\n" for u in range(5) for i in range(10))
    write(tmp_path / "ratings.tsv", rows)
    r = load_rating_folder(tmp_path, seed=2)
    assert len(r.train) == 40 and r.valid is not None and len(r.valid) == 5 and len(r.test) == 5
    assert r.rating_range == (1.0, 4.0)


@pytest.mark.parametrize(
    ("name", "text", "line", "fragment"),
    [
        ("ratings.tsv", "0\t1\t3\n0\t1\n", 2, "expected 3 columns, got 2"),
        ("ratings.tsv", "0\t1\t3\nu\t1\t3\n", 2, "'u' is not an integer id"),
        ("ratings.tsv", "0\t1\t3\n0\t1\tfour\n", 2, "'four' is not a number"),
        ("ratings.tsv", "0\t1\t3\n0\t-1\t3\n", 2, "negative id -1"),
        ("social.tsv", "0\t1\n1\t2\t3\n", 2, "expected 2 columns, got 3"),
        ("item_tags.tsv", "0\t1\n\n1\tx\n", 3, "'x' is not an integer id"),
    ],
)
def test_rating_folder_malformed(
    tmp_path: Path, write: Write, name: str, text: str, line: int, fragment: str
) -> None:
    if name != "ratings.tsv":
        write(tmp_path / "ratings.tsv", "0\t1\t3\n")
    p = write(tmp_path / name, text)
    with pytest.raises(DataFormatError) as info:
        load_rating_folder(tmp_path)
    assert str(info.value).startswith(f"{p}:{line}: ")
    assert fragment in str(info.value)


def test_rating_folder_empty_and_missing(tmp_path: Path, write: Write) -> None:
    with pytest.raises(DatasetNotFoundError, match=r"ratings\.tsv"):
        load_rating_folder(tmp_path)
    p = write(tmp_path / "ratings.tsv", "")
    with pytest.raises(DataFormatError, match=rf"^{p}: file is empty$"):
        load_rating_folder(tmp_path)


# ---------------------------------------------------------------- Weeplaces


def test_weeplaces(tmp_path: Path, write: Write) -> None:
    rows = [
        "0\t0\ttrain",
        "0\t1\ttrain",
        "1\t1\tval_foldin",
        "1\t2\tval_heldout",
        "2\t0\ttest_foldin",
        "2\t3\ttest_heldout",
    ]
    write(tmp_path / "interactions.tsv.gz", "\n".join(rows) + "\n", gz=True)
    d = load_weeplaces(tmp_path, test_only="keep")  # items 2 and 3 are held out only
    assert (d.n_users, d.n_items) == (3, 4)
    assert dense(d.train) == [[1, 1, 0, 0], [0, 1, 0, 0], [1, 0, 0, 0]]
    assert d.valid is not None and dense(d.valid) == [[0, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0]]
    assert dense(d.test) == [[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1]]
    assert d.info["rows_per_split"] == {
        "train": 2,
        "val_foldin": 1,
        "val_heldout": 1,
        "test_foldin": 1,
        "test_heldout": 1,
    }


def test_weeplaces_unknown_split(tmp_path: Path, write: Write) -> None:
    p = write(tmp_path / "interactions.tsv.gz", "0\t0\ttrain\n0\t1\tholdout\n", gz=True)
    with pytest.raises(DataFormatError, match=rf"^{p}:2: column 3: unknown split 'holdout'"):
        load_weeplaces(tmp_path)


def test_weeplaces_heldout_pairs_seen_in_train_are_dropped(tmp_path: Path, write: Write) -> None:
    rows = ["0\t0\ttrain", "1\t1\ttest_foldin", "1\t1\ttest_heldout", "1\t2\ttest_heldout"]
    write(tmp_path / "interactions.tsv", "\n".join(rows) + "\n")
    d = load_weeplaces(tmp_path, test_only="keep")
    assert d.test.nnz == 1 and d.info["dropped_test_overlap"] == 1
