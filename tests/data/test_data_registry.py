"""Registry: names, data-root resolution, format detection, downloading (mocked), listings."""

from __future__ import annotations

import hashlib
import io
import urllib.error
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from fedgraphrec.data import download as dl
from fedgraphrec.data.catalog import REGISTRY
from fedgraphrec.data.errors import DataError, DataFormatError, DatasetNotFoundError
from fedgraphrec.data.listing import describe, format_listing, list_datasets
from fedgraphrec.data.registry import (
    cache_dir,
    data_roots,
    detect_format,
    find_dataset,
    load_dataset,
    resolve_data_root,
)
from fedgraphrec.data.types import Interactions, Ratings

Write = Callable[..., Path]

ML_BASE = "1\t10\t5\t0\n1\t20\t4\t0\n2\t10\t4\t0\n"
ML_TEST = "1\t30\t5\t0\n2\t20\t4\t0\n"


def _lightgcn(write: Write, folder: Path, n_items: int) -> Path:
    write(folder / "train.txt", "0 " + " ".join(map(str, range(n_items))) + "\n")
    write(folder / "test.txt", "0\n")
    return folder


def test_registry_has_the_required_names() -> None:
    required = {
        "ml-100k",
        "ml-100k-ratings",
        "gowalla",
        "yelp2018",
        "amazon-book",
        "filmtrust",
        "ciao",
        "epinions",
        "douban",
        "flixster",
        "weeplaces",
        "synthetic",
    }
    assert required <= set(REGISTRY)


def test_cache_dir_follows_xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c" / "fedgraphrec"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "fedgraphrec"


def test_resolution_order(tmp_path: Path, write: Write, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit, env = tmp_path / "explicit", tmp_path / "env"
    cache = cache_dir()
    for root, n in ((explicit, 2), (env, 3), (cache, 4)):
        _lightgcn(write, root / "gowalla", n)
    monkeypatch.setenv("FEDGRAPHREC_DATA", str(env))

    assert [why for why, _ in data_roots(explicit)] == ["data_dir argument", "FEDGRAPHREC_DATA", "user cache"]
    assert resolve_data_root(explicit) == explicit
    assert resolve_data_root() == env
    d = load_dataset("gowalla", data_dir=explicit)
    assert isinstance(d, Interactions) and d.n_items == 2 and d.name == "gowalla"
    assert load_dataset("gowalla").n_items == 3
    monkeypatch.delenv("FEDGRAPHREC_DATA")
    assert resolve_data_root() == cache
    assert load_dataset("gowalla").n_items == 4
    # a root that lacks the dataset falls through to the next one
    assert find_dataset("gowalla", tmp_path / "empty") == cache / "gowalla"


def test_not_found_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FEDGRAPHREC_DATA", raising=False)
    with pytest.raises(DatasetNotFoundError) as info:
        load_dataset("gowalla", data_dir=tmp_path)
    msg = str(info.value)
    assert "FEDGRAPHREC_DATA" in msg and "--data-dir" in msg and str(tmp_path / "gowalla") in msg
    with pytest.raises(DatasetNotFoundError, match=r"neither a known dataset"):
        load_dataset("no-such-dataset")


def test_detect_format(tmp_path: Path, write: Write) -> None:
    cases = {
        "a": ("train.txt.gz", "lightgcn"),
        "b": ("u.data", "ml100k"),
        "c": ("ratings.tsv.gz", "ratings"),
        "d": ("interactions.tsv.gz", "weeplaces"),
    }
    for sub, (fname, fmt) in cases.items():
        write(tmp_path / sub / fname, "0\t0\ttrain\n" if fmt == "weeplaces" else "0 0 1\n")
        assert detect_format(tmp_path / sub) == fmt
    write(tmp_path / "e" / "train.tsv", "0 0 1\n")
    write(tmp_path / "e" / "test.tsv", "0 0 1\n")
    assert detect_format(tmp_path / "e") == "ratings"
    write(tmp_path / "g" / "interactions.tsv", "u1\ti1\n")  # no GroupIM split column: not Weeplaces
    assert detect_format(tmp_path / "g") == "interactions"
    write(tmp_path / "h" / "train.csv", "u,i\n")
    write(tmp_path / "h" / "test.csv", "u,i\n")
    assert detect_format(tmp_path / "h") == "interactions"
    (tmp_path / "f").mkdir()
    with pytest.raises(DataError, match="pass format="):
        detect_format(tmp_path / "f")


def test_load_by_path_detects_and_honours_format(tmp_path: Path, write: Write) -> None:
    folder = tmp_path / "mydata"
    write(folder / "u1.base", ML_BASE)
    write(folder / "u1.test", ML_TEST)
    d = load_dataset(folder)
    assert isinstance(d, Interactions) and d.n_users == 2
    r = load_dataset(str(folder), format="ml100k-ratings", compact="train")
    assert isinstance(r, Ratings) and len(r.train) == 3
    with pytest.raises(DataError, match="unknown format"):
        load_dataset(folder, format="nosuch")


def test_known_folder_name_gets_dataset_rules(tmp_path: Path, write: Write) -> None:
    write(tmp_path / "ciao" / "ratings.tsv", "0\t1\t3\n0\t1\t5\n0\t2\t0\n1\t1\t2\n")
    r = load_dataset(tmp_path / "ciao", fractions=(1.0, 0.0, 0.0))
    assert isinstance(r, Ratings) and r.name == "ciao"
    assert r.info["dropped_zero_ratings"] == 1 and r.info["duplicate_rows_removed"] == 1
    write(tmp_path / "other" / "ratings.tsv", "0\t1\t3\n0\t1\t5\n0\t2\t0\n")
    plain = load_dataset(tmp_path / "other", fractions=(1.0, 0.0, 0.0), dedup="none")
    assert isinstance(plain, Ratings) and len(plain.train) == 3 and plain.rating_range == (0.0, 5.0)


def test_options_override_registry_defaults(tmp_path: Path, write: Write) -> None:
    folder = tmp_path / "ml-100k"
    write(folder / "u2.base", ML_BASE)
    write(folder / "u2.test", ML_TEST)
    d = load_dataset("ml-100k", data_dir=tmp_path, split="u2", threshold=5.0, download=False)
    assert isinstance(d, Interactions) and d.train.nnz == 1


def test_amazon_book_missing_train_is_clear(tmp_path: Path, write: Write) -> None:
    write(tmp_path / "amazon-book" / "test.txt", "0 1\n1 0\n")
    with pytest.raises(DataError, match="training set is missing"):
        load_dataset("amazon-book", data_dir=tmp_path)


def test_synthetic_by_name() -> None:
    d = load_dataset("synthetic", n_users=50, n_items=80, seed=1)
    assert isinstance(d, Interactions) and d.n_users == 50 and d.name == "synthetic"
    r = load_dataset("synthetic-ratings", n_users=40, n_items=60)
    assert isinstance(r, Ratings) and r.social is not None


# ---------------------------------------------------------------- downloading (network mocked)


def _zip_bytes(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("ml-100k/", "")
        for name, text in files.items():
            zf.writestr(f"ml-100k/{name}", text)
        zf.writestr("../evil.txt", "no")
    return buf.getvalue()


def _fake_fetch(payload: bytes, calls: list[str]) -> Callable[..., None]:
    def fetch(url: str, dest: Path, timeout: float = 60.0) -> None:
        calls.append(url)
        dest.write_bytes(payload)

    return fetch


@pytest.fixture
def no_local_data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FEDGRAPHREC_DATA", raising=False)


@pytest.mark.usefixtures("no_local_data")
def test_download_success(monkeypatch: pytest.MonkeyPatch) -> None:
    files = {"u.data": ML_BASE + ML_TEST, "u1.base": ML_BASE, "u1.test": ML_TEST, "README": "x"}
    digests = {n: hashlib.sha256(files[n].encode()).hexdigest() for n in ("u.data", "u1.base", "u1.test")}
    calls: list[str] = []
    monkeypatch.setattr(dl, "fetch_url", _fake_fetch(_zip_bytes(files), calls))
    monkeypatch.setattr(dl, "ML100K_SHA256", digests)
    d = load_dataset("ml-100k")
    assert calls == [dl.ML100K_URL]
    assert isinstance(d, Interactions) and d.n_users == 2
    target = cache_dir() / "ml-100k"
    assert sorted(p.name for p in target.iterdir()) == ["README", "u.data", "u1.base", "u1.test"]
    assert not (cache_dir() / "evil.txt").exists()
    assert [p.name for p in cache_dir().iterdir()] == ["ml-100k"]  # temporary folder removed
    load_dataset("ml-100k-ratings")  # second use: found in the cache, no new download
    assert len(calls) == 1


@pytest.mark.usefixtures("no_local_data")
def test_download_checksum_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    files = {"u.data": "1\t1\t1\t0\n", "u1.base": ML_BASE, "u1.test": ML_TEST}
    monkeypatch.setattr(dl, "fetch_url", _fake_fetch(_zip_bytes(files), []))
    with pytest.raises(DataError, match=r"checksum mismatch for u\.data"):
        load_dataset("ml-100k")
    assert not (cache_dir() / "ml-100k").exists()
    assert list(cache_dir().iterdir()) == []


@pytest.mark.usefixtures("no_local_data")
def test_download_not_a_zip(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dl, "fetch_url", _fake_fetch(b"<html>captive portal</html>", []))
    with pytest.raises(DataError, match="not a valid zip"):
        load_dataset("ml-100k")


@pytest.mark.usefixtures("no_local_data")
def test_download_without_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(url: str, dest: Path, timeout: float = 60.0) -> None:
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(dl, "fetch_url", offline)
    with pytest.raises(DatasetNotFoundError) as info:
        load_dataset("ml-100k")
    msg = str(info.value)
    assert "name resolution" in msg and "FEDGRAPHREC_DATA" in msg and "--data-dir" in msg
    assert not (cache_dir() / "ml-100k").exists()


@pytest.mark.usefixtures("no_local_data")
def test_download_can_be_disabled(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError, match="not found"):
        load_dataset("ml-100k", data_dir=tmp_path, download=False)


# ---------------------------------------------------------------- listings


@pytest.mark.usefixtures("no_local_data")
def test_list_datasets_on_a_small_root(tmp_path: Path, write: Write) -> None:
    _lightgcn(write, tmp_path / "gowalla", 3)
    write(tmp_path / "amazon-book" / "test.txt", "0 1\n1 0 2\n")
    write(tmp_path / "filmtrust" / "ratings.tsv", "0\t0\t9\n")  # out of FilmTrust's range
    listings = {x.name: x for x in list_datasets(tmp_path)}
    assert listings["gowalla"].status == "complete" and listings["gowalla"].items == 3
    assert listings["gowalla"].where == str(tmp_path / "gowalla")
    assert listings["amazon-book"].status == "partial" and listings["amazon-book"].test == 3
    assert listings["filmtrust"].status == "error" and "outside the range" in listings["filmtrust"].note
    assert listings["yelp2018"].status == "not found" and listings["yelp2018"].where == "not found"
    assert listings["ml-100k"].status == "downloadable"
    assert listings["synthetic"].where == "generated"
    table = format_listing(list(listings.values()))
    assert table.splitlines()[0].split()[:3] == ["name", "status", "users"]
    assert "gowalla" in table
    assert (cache_dir() / "dataset_stats.json").is_file()


@pytest.mark.usefixtures("no_local_data")
def test_list_datasets_cache_is_invalidated_by_changes(tmp_path: Path, write: Write) -> None:
    folder = _lightgcn(write, tmp_path / "gowalla", 3)
    assert {x.name: x for x in list_datasets(tmp_path)}["gowalla"].items == 3
    write(folder / "train.txt", "0 0 1 2 3 4 5 6\n")
    assert {x.name: x for x in list_datasets(tmp_path)}["gowalla"].items == 7
    assert {x.name: x for x in list_datasets(tmp_path, use_cache=False)}["gowalla"].items == 7


def test_describe() -> None:
    d = describe(load_dataset("synthetic", n_users=30, n_items=40))
    assert d["kind"] == "interactions" and d["users"] == 30 and 0 < d["density"] < 1
    r = describe(load_dataset("synthetic-ratings", n_users=30, n_items=40))
    assert r["kind"] == "ratings" and r["rating_range"] == (1.0, 5.0) and r["links"] > 0


def test_malformed_dataset_error_propagates(tmp_path: Path, write: Write) -> None:
    write(tmp_path / "douban" / "train.tsv", "0\t0\t4\n0\t1\n")
    write(tmp_path / "douban" / "test.tsv", "0\t2\t4\n")
    with pytest.raises(DataFormatError, match=r"train.tsv:2: expected 3 columns, got 2"):
        load_dataset("douban", data_dir=tmp_path)


@pytest.mark.usefixtures("no_local_data")
def test_listing_dict_is_json_ready(tmp_path: Path, write: Write) -> None:
    import json

    _lightgcn(write, tmp_path / "gowalla", 3)
    rows = [x.as_dict() for x in list_datasets(tmp_path)]
    by_name = {r["name"]: r for r in json.loads(json.dumps(rows))}
    assert by_name["gowalla"]["path"] == str(tmp_path / "gowalla")
    assert by_name["yelp2018"]["path"] is None and by_name["yelp2018"]["where"] == "not found"


def test_a_misspelt_loader_option_is_named_with_the_ones_the_loader_takes(tmp_path) -> None:
    with pytest.raises(
        DataError, match=r"unknown dataset option\(s\) user_fractio; this loader takes: .*n_users"
    ):
        load_dataset("synthetic", user_fractio=0.5)
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "train.txt").write_text("0 1 2\n1 0\n")
    (folder / "test.txt").write_text("0 0\n1 1\n")
    with pytest.raises(DataError, match=r"mine: unknown dataset option\(s\) splt; .*user_fraction"):
        load_dataset(folder, splt="u2")
