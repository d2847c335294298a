"""The generic interactions loader: CSV (with or without header), TSV and Parquet, string or integer ids."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from fedgraphrec.data.errors import DataError, DataFormatError, DatasetNotFoundError
from fedgraphrec.data.idmap import read_id_map, write_id_map
from fedgraphrec.data.loaders.interactions import load_interactions
from fedgraphrec.data.registry import load_dataset
from fedgraphrec.data.types import Interactions

Write = Callable[..., Path]

ROWS = [("alice", "apple", 5), ("bob", "apple", 3), ("alice", "pear", 4), ("carol", "kiwi", 2)]
ROWS += [("bob", "pear", 5), ("carol", "apple", 4), ("alice", "kiwi", 1), ("bob", "kiwi", 4)]


def _csv(
    rows: list[tuple[str, str, int]], sep: str = ",", header: str | None = "user_id,item_id,rating"
) -> str:
    lines = [] if header is None else [header.replace(",", sep)]
    return "\n".join(lines + [sep.join(map(str, r)) for r in rows]) + "\n"


def _train(d: Interactions) -> set[tuple[str, str]]:
    assert d.user_ids is not None and d.item_ids is not None
    coo = d.train.tocoo()
    return {(str(d.user_ids[u]), str(d.item_ids[i])) for u, i in zip(coo.row, coo.col, strict=True)}


@pytest.mark.parametrize(
    ("fname", "text"),
    [
        ("r.csv", _csv(ROWS)),
        ("r.tsv", _csv(ROWS, sep="\t")),
        ("r.csv.gz", _csv(ROWS)),
    ],
)
def test_text_files_with_a_header_and_string_ids(tmp_path: Path, write: Write, fname: str, text: str) -> None:
    p = write(tmp_path / fname, text, gz=fname.endswith(".gz"))
    d = load_dataset(p, test_fraction=0.0)
    assert isinstance(d, Interactions) and d.name == "r"
    assert d.user_ids is not None and d.user_ids.tolist() == ["alice", "bob", "carol"]
    assert d.item_ids is not None and d.item_ids.tolist() == ["apple", "kiwi", "pear"]
    assert _train(d) == {(u, i) for u, i, _ in ROWS}
    assert d.info["header"] == {"all": True}


def test_headerless_csv_and_integer_ids_with_gaps(tmp_path: Path, write: Write) -> None:
    p = write(tmp_path / "r.csv", "10,7\n30,7\n10,9\n")
    d = load_interactions(p, test_fraction=0.0)
    assert d.info["header"] == {"all": False}
    assert d.user_ids is not None and d.user_ids.tolist() == [10, 30] and d.n_items == 2


def test_header_detected_by_a_numeric_column(tmp_path: Path, write: Write) -> None:
    p = write(tmp_path / "r.csv", "customer,product,score\nc1,p1,5\nc2,p1,3\n")
    d = load_interactions(p, test_fraction=0.0)
    assert d.info["header"] == {"all": True} and d.n_users == 2
    forced = load_interactions(p, test_fraction=0.0, header=False, columns=[0, 1])
    assert forced.n_users == 3  # "customer" is then a user


def test_columns_by_name_and_threshold(tmp_path: Path, write: Write) -> None:
    text = "time,item,stars,who\n"
    text += "".join(f"{k},{i},{r},{u}\n" for k, (u, i, r) in enumerate(ROWS))
    p = write(tmp_path / "r.csv", text)
    d = load_interactions(p, columns="who,item,stars", threshold=4, test_fraction=0.0)
    assert _train(d) == {(u, i) for u, i, r in ROWS if r >= 4}
    assert d.info["below_threshold_rows"] == 3


def test_parquet(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table(
        {"user": [u for u, _, _ in ROWS], "item": [i for _, i, _ in ROWS], "rating": [r for *_, r in ROWS]}
    )
    pq.write_table(table, tmp_path / "r.parquet")
    d = load_dataset(tmp_path / "r.parquet", test_fraction=0.0, threshold=4)
    assert isinstance(d, Interactions) and _train(d) == {(u, i) for u, i, r in ROWS if r >= 4}
    ints = pa.table({"u": [3, 9, 3], "i": [1, 1, 2]})
    pq.write_table(ints, tmp_path / "ints.parquet")
    d2 = load_interactions(tmp_path / "ints.parquet", test_fraction=0.0)
    assert d2.user_ids is not None and d2.user_ids.tolist() == [3, 9]


def test_duplicates_collapse_before_the_split_and_kcore(tmp_path: Path, write: Write) -> None:
    rows = [(f"u{u}", f"i{i}", 5) for _ in range(3) for u in range(6) for i in range(6)]
    rows.append(("loner", "i0", 5))
    p = write(tmp_path / "r.csv", _csv(rows))
    d = load_interactions(p, test_fraction=0.5, kcore=2, seed=4)
    assert d.info["duplicate_rows_removed"] == 72 and d.info["kcore_rows_removed"] == 1
    assert d.train.multiply(d.test).nnz == 0 and d.n_users == 6
    assert d.train.nnz + d.test.nnz + d.info["test_only_rows_dropped"] == 36
    again = load_interactions(p, test_fraction=0.5, kcore=2, seed=4)
    assert (again.test != d.test).nnz == 0


def test_folder_with_train_and_test_files_and_test_only_rule(tmp_path: Path, write: Write) -> None:
    write(tmp_path / "shop" / "train.csv", "user,item\na,x\nb,y\na,y\n")
    write(tmp_path / "shop" / "test.csv", "user,item\na,z\nb,x\nnew,x\na,y\n")
    d = load_dataset(tmp_path / "shop")
    assert isinstance(d, Interactions) and d.info["split"] == "fixed"
    assert (d.info["test_only_users"], d.info["test_only_items"], d.info["test_only_rows_dropped"]) == (
        1,
        1,
        2,
    )
    assert d.info["dropped_test_overlap"] == 1 and d.test.nnz == 1
    kept = load_dataset(tmp_path / "shop", test_only="keep", valid_fraction=0.3)
    assert isinstance(kept, Interactions) and kept.n_users == 3 and kept.test.nnz == 3
    assert kept.valid is not None


def test_format_option_and_its_hint(tmp_path: Path, write: Write) -> None:
    p = write(tmp_path / "clicks.log", "a,x\nb,x\n")
    with pytest.raises(DataFormatError) as info:
        load_dataset(p)
    assert f"fedgraphrec train central --dataset {p} --set dataset_options.format=csv" in str(info.value)
    d = load_dataset(p, format="csv", test_fraction=0.0)
    assert isinstance(d, Interactions) and d.n_users == 2
    with pytest.raises(DataError, match="is a file"):
        load_dataset(p, format="lightgcn")


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("user,item,rating\na,x,5\nb,y,five\n", 3, "rating 'five' is not a number; to ignore that column: "),
        ("user,item\na,x\nb\n", 3, "expected at least 2 columns, got 1 (if the file is TSV: "),
        ("user,item\na,x\n,y\n", 3, "empty user or item id"),
    ],
)
def test_errors_name_file_and_line(tmp_path: Path, write: Write, text: str, line: int, fragment: str) -> None:
    p = write(tmp_path / "bad.csv", text)
    with pytest.raises(DataFormatError) as info:
        load_interactions(p)
    assert str(info.value).startswith(f"{p}:{line}: ") and fragment in str(info.value)


def test_bad_options_are_named(tmp_path: Path, write: Write) -> None:
    p = write(tmp_path / "r.csv", "user,item\na,x\n")
    with pytest.raises(DataFormatError, match="threshold needs a rating column"):
        load_interactions(p, threshold=3)
    with pytest.raises(DataFormatError, match="no user column 'who'"):
        load_interactions(p, columns=["who", "item"])
    with pytest.raises(DataError, match="unknown dataset option"):
        load_dataset(p, tresh=3)
    with pytest.raises(DatasetNotFoundError, match=r"no interactions\.csv"):
        load_interactions(tmp_path)


def test_string_ids_round_trip_through_the_id_map(tmp_path: Path, write: Write) -> None:
    p = write(tmp_path / "r.csv", "user,item\n007,x\n7,y\n")
    d = load_interactions(p, test_fraction=0.0)
    assert d.user_ids is not None and d.user_ids.tolist() == ["007", "7"]  # "007" keeps every id text
    write_id_map(tmp_path / "users.tsv", d.user_ids)
    assert read_id_map(tmp_path / "users.tsv").ids.tolist() == ["007", "7"]
