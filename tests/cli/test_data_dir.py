"""`--data-dir` is honoured by every command that loads data: a dataset present only in DIR is found."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from fedgraphrec.cli._app import app

runner = CliRunner()


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """DIR with a tiny ``gowalla`` (LightGCN files) and ``filmtrust`` (ratings + trust); nothing elsewhere."""
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    monkeypatch.setenv("FEDGRAPHREC_DATA", str(empty))  # restored after the test, whatever the CLI sets
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = tmp_path / "DIR"
    rng = np.random.default_rng(0)
    (root / "gowalla").mkdir(parents=True)
    train, test = [], []
    for u in range(40):
        items = rng.choice(50, size=8, replace=False)
        train.append(" ".join(map(str, [u, *sorted(items[:6])])))
        test.append(" ".join(map(str, [u, *sorted(items[6:])])))
    (root / "gowalla" / "train.txt").write_text("\n".join(train) + "\n")
    (root / "gowalla" / "test.txt").write_text("\n".join(test) + "\n")
    (root / "filmtrust").mkdir()
    rows = [
        f"{u}\t{i}\t{rng.integers(1, 9) / 2}" for u in range(30) for i in rng.choice(25, 6, replace=False)
    ]
    (root / "filmtrust" / "ratings.tsv").write_text("\n".join(rows) + "\n")
    links = {(int(a), int(b)) for a, b in rng.integers(0, 30, size=(60, 2)) if a != b}
    (root / "filmtrust" / "social.tsv").write_text("\n".join(f"{a}\t{b}" for a, b in sorted(links)) + "\n")
    return root


SMALL = ["--set", "dim=4", "--set", "batch_size=64", "--set", "ks=[5]", "--set", "metric=recall@5"]


COMMANDS = {
    "train": ["train", "central", "-d", "gowalla", "--epochs", "1", "--no-progress", *SMALL],
    "compare": ["compare", "--method", "central:model=mf", "-d", "gowalla", "--set", "epochs=1", *SMALL],
    "audit": [
        "audit",
        "fedgrec",
        "-d",
        "gowalla",
        "--rounds",
        "1",
        "--set",
        "dim=4",
        "--set",
        "clients_per_round=8",
    ],
    "p4gcn": ["train", "p4gcn", "-d", "filmtrust", "--epochs", "1", "--set", "method=pmf", "--set", "dim=4"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_dataset_only_in_data_dir_is_found(data_dir: Path, tmp_path: Path, command: str) -> None:
    args = [*COMMANDS[command], "--out", str(tmp_path / "out")]
    res = runner.invoke(app, [*args, "--data-dir", str(data_dir)])
    assert res.exit_code == 0, res.output
    if command == "p4gcn":
        assert json.loads((tmp_path / "out" / "summary.json").read_text())["dataset"] == "filmtrust"


@pytest.mark.parametrize("command", ["audit", "p4gcn"])
def test_without_data_dir_it_is_not_found(data_dir: Path, tmp_path: Path, command: str) -> None:
    res = runner.invoke(app, [*COMMANDS[command], "--out", str(tmp_path / "out")])
    assert res.exit_code == 2 and "not found; looked in" in res.output and "Traceback" not in res.output


def test_any_folder_name_in_data_dir_trains_and_reports_test_only_users(
    data_dir: Path, tmp_path: Path
) -> None:
    """``--data-dir DIR --dataset NAME`` finds ``DIR/NAME/`` for a name the registry does not know."""
    shop = data_dir / "my-shop"
    shop.mkdir()
    rng = np.random.default_rng(1)
    rows = [f"user{u},item{i}" for u in range(20) for i in rng.choice(15, 6, replace=False)]
    (shop / "train.csv").write_text("user,item\n" + "\n".join(rows) + "\n")
    held = [f"user{u},item{(u * 7) % 15}" for u in range(20)] + ["stranger,item1"]
    (shop / "test.csv").write_text("user,item\n" + "\n".join(held) + "\n")
    out = tmp_path / "out"
    args = ["train", "central", "-d", "my-shop", "--epochs", "1", "--no-progress", *SMALL]
    res = runner.invoke(app, [*args, "--data-dir", str(data_dir), "--out", str(out)])
    assert res.exit_code == 0, res.output
    stats = json.loads((out / "summary.json").read_text())["dataset_stats"]
    assert stats["users"] == 20 and stats["test_only_users"] == 1
