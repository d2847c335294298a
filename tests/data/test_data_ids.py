"""Raw ids become compact indices in every loader, duplicates never straddle a split, test-only ids are counted.

Each test here failed on the loaders before the id rule (phantom rows for id gaps, no ``user_ids``,
duplicate pairs in train and test, no test-only counts).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from fedgraphrec.data.loaders.lightgcn import load_lightgcn
from fedgraphrec.data.loaders.movielens import load_ml100k, load_ml100k_ratings
from fedgraphrec.data.loaders.tsv import load_rating_folder
from fedgraphrec.data.loaders.weeplaces import load_weeplaces
from fedgraphrec.data.registry import load_dataset
from fedgraphrec.data.synthetic import synthetic_interactions, synthetic_ratings
from fedgraphrec.data.types import Interactions, Ratings

Write = Callable[..., Path]


def _pairs(m: object) -> set[tuple[int, int]]:
    coo = m.tocoo()  # type: ignore[attr-defined]
    return set(zip(coo.row.tolist(), coo.col.tolist(), strict=True))


def _rating_pairs(r: Ratings, part: str) -> set[tuple[int, int]]:
    split = getattr(r, part)
    return set(zip(split.users.tolist(), split.items.tolist(), strict=True))


def test_lightgcn_id_gap_is_no_phantom_user(tmp_path: Path, write: Write) -> None:
    write(tmp_path / "train.txt", "0 1 7\n5 3 7\n")
    write(tmp_path / "test.txt", "0 3\n5 1\n")
    d = load_lightgcn(tmp_path)
    assert (d.n_users, d.n_items) == (2, 3)
    assert d.user_ids is not None and d.user_ids.tolist() == [0, 5]
    assert d.item_ids is not None and d.item_ids.tolist() == [1, 3, 7]
    assert _pairs(d.train) == {(0, 0), (0, 2), (1, 1), (1, 2)}  # user 5 → index 1, item 7 → index 2
    assert (d.user_degrees() > 0).all()


def test_lightgcn_contiguous_ids_keep_their_meaning(tmp_path: Path, write: Write) -> None:
    write(tmp_path / "train.txt", "0 0 1\n1 2\n2 1 3\n")
    write(tmp_path / "test.txt", "0 2\n1 1\n2 0\n")
    d = load_lightgcn(tmp_path)
    assert d.user_ids is not None and d.user_ids.tolist() == [0, 1, 2]
    assert d.item_ids is not None and d.item_ids.tolist() == [0, 1, 2, 3]
    assert _pairs(d.train) == {(0, 0), (0, 1), (1, 2), (2, 1), (2, 3)}


def test_lightgcn_test_only_users_and_items_are_dropped_and_counted(tmp_path: Path, write: Write) -> None:
    write(tmp_path / "train.txt", "0 1 2\n1 2\n")
    write(tmp_path / "test.txt", "0 9\n1 1\n4 2\n")  # item 9 and user 4 occur only in test
    d = load_lightgcn(tmp_path)
    assert d.info["test_only_users"] == 1 and d.info["test_only_items"] == 1
    assert d.info["test_only_rows_dropped"] == 2
    assert d.user_ids is not None and d.user_ids.tolist() == [0, 1]
    assert d.item_ids is not None and d.item_ids.tolist() == [1, 2]
    assert _pairs(d.test) == {(1, 0)}
    stats = d.stats()
    assert stats["test_only_users"] == 1 and stats["test_only_items"] == 1
    kept = load_lightgcn(tmp_path, test_only="keep")
    assert kept.n_users == 3 and kept.n_items == 3 and kept.test.nnz == 3
    with pytest.raises(ValueError, match="test_only"):
        load_lightgcn(tmp_path, test_only="maybe")


def test_rating_folder_id_gap_and_default_dedup_before_the_split(tmp_path: Path, write: Write) -> None:
    # every pair is listed twice, once with another rating: a per-user split of the raw rows would put
    # some pairs in both train and test
    rows = [f"{u * 10}\t{i * 3}\t{1 + (u + i + k) % 5}" for k in range(2) for u in range(6) for i in range(8)]
    write(tmp_path / "ratings.tsv", "\n".join(rows) + "\n")
    r = load_rating_folder(tmp_path, fractions=(0.6, 0.0, 0.4), seed=3)
    assert (r.n_users, r.n_items) == (6, 8)
    assert r.user_ids is not None and r.user_ids.tolist() == [0, 10, 20, 30, 40, 50]
    assert r.info["duplicate_rows_removed"] == 48
    assert not _rating_pairs(r, "train") & _rating_pairs(r, "test")
    assert len(r.train) + len(r.test) == 48


def test_rating_folder_dedup_none_still_keeps_splits_disjoint(tmp_path: Path, write: Write) -> None:
    rows = [f"{u}\t{i}\t{1 + k}" for k in range(2) for u in range(6) for i in range(8)]
    write(tmp_path / "ratings.tsv", "\n".join(rows) + "\n")
    r = load_rating_folder(tmp_path, fractions=(0.6, 0.0, 0.4), seed=3, dedup="none")
    dropped = int(r.info["dropped_test_overlap"])  # type: ignore[call-overload]
    assert dropped > 0 and not _rating_pairs(r, "train") & _rating_pairs(r, "test")
    assert len(r.train) + len(r.test) + dropped == 96


def test_rating_folder_threshold_and_kcore(tmp_path: Path, write: Write) -> None:
    rows = [f"{u}\t{i}\t{5 if (u + i) % 3 else 1}" for u in range(8) for i in range(6)]
    rows += ["100\t0\t5", "0\t200\t5"]  # a user and an item with one rating each
    write(tmp_path / "ratings.tsv", "\n".join(rows) + "\n")
    r = load_rating_folder(tmp_path, threshold=4.0, kcore=2, fractions=(1.0, 0.0, 0.0))
    assert r.info["below_threshold_rows"] == 16 and r.info["kcore_rows_removed"] == 2
    assert float(r.train.ratings.min()) == 5.0
    assert r.user_ids is not None and 100 not in r.user_ids.tolist()
    assert r.item_ids is not None and 200 not in r.item_ids.tolist()


def test_rating_folder_test_only_rule(tmp_path: Path, write: Write) -> None:
    write(tmp_path / "train.tsv", "0\t0\t4\n1\t1\t3\n")
    write(tmp_path / "test.tsv", "0\t1\t5\n7\t0\t2\n1\t9\t1\n")
    r = load_rating_folder(tmp_path)
    assert (r.info["test_only_users"], r.info["test_only_items"], r.info["test_only_rows_dropped"]) == (
        1,
        1,
        2,
    )
    assert len(r.test) == 1 and (r.n_users, r.n_items) == (2, 2)
    kept = load_rating_folder(tmp_path, test_only="keep")
    assert len(kept.test) == 3 and kept.user_ids is not None and kept.user_ids.tolist() == [0, 1, 7]


def test_weeplaces_id_gap(tmp_path: Path, write: Write) -> None:
    rows = ["0\t4\ttrain", "10\t4\ttrain", "10\t8\tval_foldin", "0\t8\ttest_heldout"]
    write(tmp_path / "interactions.tsv", "\n".join(rows) + "\n")
    d = load_weeplaces(tmp_path)
    assert (d.n_users, d.n_items) == (2, 2)
    assert d.user_ids is not None and d.user_ids.tolist() == [0, 10]
    assert d.item_ids is not None and d.item_ids.tolist() == [4, 8]


def test_ml100k_duplicates_collapse_before_the_per_user_split(tmp_path: Path, write: Write) -> None:
    rows = [f"{u}\t{i}\t{4 + (k % 2)}\t{k}" for k in range(3) for u in range(1, 5) for i in range(1, 9)]
    write(tmp_path / "u.data", "\n".join(rows) + "\n")
    d = load_ml100k(tmp_path, split="all", threshold=None, fractions=(0.5, 0.0, 0.5), seed=1)
    assert d.info["duplicate_rows_removed"] == 64
    assert not _pairs(d.train) & _pairs(d.test)
    r = load_ml100k_ratings(tmp_path, split="all", fractions=(0.5, 0.0, 0.5), seed=1)
    assert not _rating_pairs(r, "train") & _rating_pairs(r, "test")
    assert r.user_ids is not None and r.user_ids.tolist() == [1, 2, 3, 4]


def test_ml100k_reports_test_only_ids(tmp_path: Path, write: Write) -> None:
    write(tmp_path / "u1.base", "1\t1\t5\t0\n2\t2\t5\t0\n")
    write(tmp_path / "u1.test", "1\t2\t5\t0\n3\t1\t5\t0\n2\t7\t4\t0\n")
    d = load_ml100k(tmp_path)
    assert (d.info["test_only_users"], d.info["test_only_items"], d.info["test_only_rows_dropped"]) == (
        1,
        1,
        2,
    )
    assert d.stats()["test_only_users"] == 1


def test_synthetic_and_ratings_views_carry_ids() -> None:
    d = synthetic_interactions(n_users=20, n_items=30, seed=0)
    assert d.user_ids is not None and d.user_ids.tolist() == list(range(20))
    assert "test_only_items" in d.info
    r = synthetic_ratings(n_users=20, n_items=30, seed=0)
    assert r.user_ids is not None and len(r.user_ids) == 20
    view = r.to_interactions()
    assert view.item_ids is not None and view.item_ids.tolist() == r.item_ids.tolist()  # type: ignore[union-attr]


def test_ids_must_match_the_sizes() -> None:
    d = synthetic_interactions(n_users=5, n_items=10, seed=0)
    with pytest.raises(ValueError, match="user_ids has 3 ids, expected 5"):
        Interactions(d.name, 5, 10, d.train, d.test, user_ids=np.arange(3))


def test_any_folder_name_under_a_data_root(
    tmp_path: Path, write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FEDGRAPHREC_DATA", raising=False)
    root = tmp_path / "DIR"
    write(root / "my-shop" / "train.txt", "0 1 2\n1 2\n")
    write(root / "my-shop" / "test.txt", "0 3\n1 1\n")
    d = load_dataset("my-shop", data_dir=root)
    assert isinstance(d, Interactions) and d.name == "my-shop" and d.n_users == 2
    write(root / "clicks.csv", "user,item\na,x\nb,y\na,y\nb,x\n")
    assert load_dataset("clicks.csv", data_dir=root, test_fraction=0.0).n_users == 2
    env_root = tmp_path / "ENV"
    write(env_root / "other" / "interactions.csv", "u1,i1\nu2,i1\n")
    monkeypatch.setenv("FEDGRAPHREC_DATA", str(env_root))
    assert load_dataset("other", test_fraction=0.0).n_items == 1
    with pytest.raises(Exception, match="neither a known dataset") as info:
        load_dataset("nowhere", data_dir=root)
    assert str(root / "nowhere") in str(info.value) and str(env_root / "nowhere") in str(info.value)
