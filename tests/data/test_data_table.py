"""The strict table parser behind every loader."""

from __future__ import annotations

import gzip
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgraphrec.data._table import check_range, count_entries, read_ragged_ids, read_table
from fedgraphrec.data.errors import DataFormatError, DatasetNotFoundError

Write = Callable[..., Path]


def test_reads_tabs_spaces_blank_lines_and_crlf(tmp_path: Path, write: Write) -> None:
    p = write(tmp_path / "r.tsv", "0\t1\t3.5\r\n\n1  2 4\n   \n2\t0\t1\n\n")
    t = read_table(p, ("id", "id", "float"))
    assert t.columns[0].tolist() == [0, 1, 2]
    assert t.columns[1].dtype == np.int64
    assert t.columns[2].tolist() == [3.5, 4.0, 1.0]
    assert t.lines.tolist() == [1, 3, 5]


def test_gzip_is_detected_by_content(tmp_path: Path, write: Write) -> None:
    p = write(tmp_path / "r.tsv", "0 1 5\n3 4 2\n", gz=True)
    t = read_table(p, ("id", "id", "float"))
    assert t.columns[0].tolist() == [0, 3]


def test_integral_and_decimal_ratings_give_same_types(tmp_path: Path, write: Write) -> None:
    a = read_table(write(tmp_path / "a", "0 1 5\n"), ("id", "id", "float"))
    b = read_table(write(tmp_path / "b", "0 1 5.0\n"), ("id", "id", "float"))
    assert a.columns[2].dtype == b.columns[2].dtype == np.float64
    assert a.columns[0].dtype == b.columns[0].dtype == np.int64


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("0 1 5\n0 1\n", 2, "expected 3 columns, got 2"),
        ("0 1 5\n\n0 1 5 7\n", 3, "expected 3 columns, got 4"),
        ("0 1 5\n1.5 1 5\n", 2, "'1.5' is not an integer id"),
        ("0 1 5\n0 x 5\n", 2, "column 2: 'x' is not an integer id"),
        ("0 1 5\n0 1 good\n", 2, "column 3: 'good' is not a number"),
        ("0 1 5\n0 1 nan\n", 2, "'nan' is not a number"),
        ("0 1 5\n0 1 0x10\n", 2, "is not a number"),
        ("0 1 5\n0 1 4\n-3 1 4\n", 3, "negative id -3"),
        ("0 1 5\n0 1e3 4\n", 2, "is not an integer id"),
        ("0 1 5\n0 1 4\n0 2 4\n0 3 ☃\n", 4, "is not a number"),
    ],
)
def test_errors_name_file_and_line(tmp_path: Path, write: Write, text: str, line: int, fragment: str) -> None:
    p = write(tmp_path / "bad.tsv", text)
    with pytest.raises(DataFormatError) as info:
        read_table(p, ("id", "id", "float"))
    msg = str(info.value)
    assert msg.startswith(f"{p}:{line}: ")
    assert fragment in msg
    assert info.value.line == line


def test_empty_file(tmp_path: Path, write: Write) -> None:
    p = write(tmp_path / "empty.tsv", "\n  \n")
    with pytest.raises(DataFormatError, match="file is empty") as info:
        read_table(p, ("id", "id"))
    assert info.value.line is None
    assert str(info.value) == f"{p}: file is empty"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetNotFoundError, match=r"nope\.tsv"):
        read_table(tmp_path / "nope.tsv", ("id", "id"))


def test_corrupt_gzip(tmp_path: Path) -> None:
    p = tmp_path / "x.gz"
    p.write_bytes(gzip.compress(b"0 1\n")[:12])
    with pytest.raises(DataFormatError, match="corrupt gzip"):
        read_table(p, ("id", "id"))


def test_str_column(tmp_path: Path, write: Write) -> None:
    t = read_table(write(tmp_path / "s", "0 1 train\n2 3 test\n"), ("id", "id", "str"))
    assert t.columns[2].tolist() == [b"train", b"test"]
    with pytest.raises(DataFormatError, match=r":2: column 1: 'a' is not an integer id"):
        read_table(write(tmp_path / "s2", "0 1 train\na 3 test\n"), ("id", "id", "str"))


def test_check_range_names_line(tmp_path: Path, write: Write) -> None:
    p = write(tmp_path / "r", "0 1 5\n\n0 2 6\n")
    t = read_table(p, ("id", "id", "float"))
    with pytest.raises(DataFormatError, match=r"r:3: rating 6 is outside the range \[1, 5\]"):
        check_range(t, 2, 1, 5)


def test_ragged(tmp_path: Path, write: Write) -> None:
    r = read_ragged_ids(write(tmp_path / "t.txt", "0 1 2 3\n\n1\n2 5\n"))
    assert r.values.tolist() == [0, 1, 2, 3, 1, 2, 5]
    assert r.lengths.tolist() == [4, 1, 2]
    assert r.lines.tolist() == [1, 3, 4]
    with pytest.raises(DataFormatError, match=r"t2.txt:2: column 3: 'x' is not an integer id"):
        read_ragged_ids(write(tmp_path / "t2.txt", "0 1\n1 2 x\n"))
    with pytest.raises(DataFormatError, match=r"t3.txt:3: negative id -2"):
        read_ragged_ids(write(tmp_path / "t3.txt", "0 1\n1 2\n2 -2\n"))


def test_count_entries_skips_header(tmp_path: Path, write: Write) -> None:
    assert count_entries(write(tmp_path / "u", "org_id remap_id\nA 0\nB 1\n\n")) == 2
    assert count_entries(write(tmp_path / "v", "A 0\nB 1\nC 2\n")) == 3


rows_strategy = st.lists(
    st.tuples(
        st.integers(0, 10**6),
        st.integers(0, 10**6),
        st.one_of(st.integers(0, 5).map(float), st.sampled_from([0.5, 1.5, 3.25, 4.75])),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(
    rows=rows_strategy,
    seps=st.lists(st.sampled_from(["\t", " ", "  ", " \t"]), min_size=1, max_size=3),
    blank_every=st.integers(0, 5),
    crlf=st.booleans(),
    gz=st.booleans(),
    corrupt=st.one_of(st.none(), st.tuples(st.integers(0, 39), st.sampled_from(["id", "rating", "cols"]))),
)
def test_parser_matches_reference(
    rows: list[tuple[int, int, float]],
    seps: list[str],
    blank_every: int,
    crlf: bool,
    gz: bool,
    corrupt: tuple[int, str] | None,
) -> None:
    lines: list[str] = []
    expected_lines: list[int] = []
    bad_line = None
    for k, (u, i, r) in enumerate(rows):
        if blank_every and k % blank_every == 0:
            lines.append("")
        sep = seps[k % len(seps)]
        cells = [str(u), str(i), f"{r:g}"]
        if corrupt is not None and corrupt[0] == k:
            if corrupt[1] == "id":
                cells[0] = f"{u}.5"
            elif corrupt[1] == "rating":
                cells[2] = "five"
            else:
                cells.append("9")
            bad_line = len(lines) + 1
        lines.append(sep.join(cells))
        expected_lines.append(len(lines))
    eol = "\r\n" if crlf else "\n"
    data = (eol.join(lines) + eol).encode()
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "t.tsv"
        p.write_bytes(gzip.compress(data) if gz else data)
        if bad_line is not None:
            with pytest.raises(DataFormatError) as info:
                read_table(p, ("id", "id", "float"))
            assert info.value.line == bad_line
            return
        t = read_table(p, ("id", "id", "float"))
    assert t.columns[0].tolist() == [u for u, _, _ in rows]
    assert t.columns[1].tolist() == [i for _, i, _ in rows]
    assert t.columns[2].tolist() == [r for _, _, r in rows]
    assert t.lines.tolist() == expected_lines


def test_utf8_bom_is_ignored(tmp_path: Path) -> None:
    p = tmp_path / "bom.tsv"
    p.write_bytes(b"\xef\xbb\xbf0\t1\n2\t3\n")
    assert read_table(p, ("id", "id")).columns[0].tolist() == [0, 2]
