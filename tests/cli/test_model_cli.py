"""``fedgraphrec recommend``, ``export`` and ``evaluate``: a trained run folder used from the shell."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fedgraphrec.cli._app import app

runner = CliRunner()
TINY = ["--set", "dataset_options.n_users=50", "--set", "dataset_options.n_items=60", "--set", "dim=8",
        "--set", "ks=[5]", "--set", "metric=recall@5", "--set", "valid_fraction=0.2"]  # fmt: skip


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "run"
    args = ["train", "central", "--dataset", "synthetic", "--epochs", "3", "--out", str(out), "--no-progress"]
    res = runner.invoke(app, [*args, *TINY])
    assert res.exit_code == 0, res.output
    return out


def test_recommend_prints_csv_with_the_runs_ids(run_dir: Path) -> None:
    res = runner.invoke(app, ["recommend", str(run_dir), "--users", "4,9", "-k", "3"])
    assert res.exit_code == 0, res.output
    rows = list(csv.reader(io.StringIO(res.stdout)))
    assert rows[0] == ["user", "rank", "item", "score"]
    assert [(r[0], r[1]) for r in rows[1:]] == [
        ("4", "1"),
        ("4", "2"),
        ("4", "3"),
        ("9", "1"),
        ("9", "2"),
        ("9", "3"),
    ]
    scores = [float(r[3]) for r in rows[1:4]]
    assert scores == sorted(scores, reverse=True)


def test_recommend_writes_csv_and_parquet_and_reads_users_from_a_file(run_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "users.txt").write_text("user\n1\n2\n")
    res = runner.invoke(
        app,
        [
            "recommend",
            str(run_dir),
            "--users",
            str(tmp_path / "users.txt"),
            "--out",
            str(tmp_path / "r.parquet"),
        ],
    )
    assert res.exit_code == 0, res.output
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "r.parquet")
    assert table.column_names == ["user", "rank", "item", "score"] and table.num_rows == 40
    assert set(table.column("user").to_pylist()) == {1, 2}
    res = runner.invoke(app, ["recommend", str(run_dir), "--last", "--out", str(tmp_path / "all.csv")])
    assert res.exit_code == 0, res.output
    from fedgraphrec.training.run import load_run

    rankable = 60 - load_run(run_dir, "last").seen().getnnz(axis=1)  # a user with fewer gets a shorter list
    assert len((tmp_path / "all.csv").read_text().splitlines()) == 1 + int(sum(min(20, r) for r in rankable))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["recommend", "{run}", "--users", "3,999"], "unknown user id '999'"),
        (["recommend", "{missing}"], "no such run folder"),
        (["recommend", "{run}", "-k", "0"], "k must be at least 1"),
        (["export", "{run}", "--format", "csv"], "--format must be npz or parquet"),
        (["evaluate", "{run}", "--split", "train"], "--split must be test or valid"),
        (["evaluate", "{run}", "--dataset", "{missing}"], "no such split, file or folder"),
        (["evaluate", "{missing}"], "no such run folder"),
    ],
)
def test_bad_input_is_one_error_line_and_exit_2(
    run_dir: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    argv = [a.format(run=run_dir, missing=tmp_path / "nope") for a in args]
    res = runner.invoke(app, argv)
    assert res.exit_code == 2, res.output
    assert message in res.output and "Traceback" not in res.output


def test_export_npz_is_read_by_numpy_alone(run_dir: Path, tmp_path: Path) -> None:
    res = runner.invoke(app, ["export", str(run_dir), "--format", "npz", "--out", str(tmp_path / "exp")])
    assert res.exit_code == 0, res.output
    script = (
        "import sys, numpy as np\n"
        f"d = np.load({str(tmp_path / 'exp' / 'embeddings.npz')!r}, allow_pickle=False)\n"
        "scores = d['user_embeddings'] @ d['item_embeddings'].T\n"
        "print(d['user_ids'][0], scores.shape, 'torch' in sys.modules, 'fedgraphrec' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert proc.stdout.split() == ["0", "(50,", "60)", "False", "False"]


def test_evaluate_prints_the_summarys_test_metrics(run_dir: Path, tmp_path: Path) -> None:
    summary = json.loads((run_dir / "summary.json").read_text())
    res = runner.invoke(app, ["evaluate", str(run_dir)])
    assert res.exit_code == 0, res.output
    assert f"{summary['test']['recall@5']:.4f}" in res.output
    res = runner.invoke(app, ["evaluate", str(run_dir), "--split", "valid", "--ks", "5,10"])
    assert res.exit_code == 0, res.output
    assert "recall@10" in res.output and f"{summary['valid']['recall@5']:.4f}" in res.output
    (tmp_path / "pairs.csv").write_text("user,item\n0,1\n0,2\n77777,3\n")
    res = runner.invoke(app, ["evaluate", str(run_dir), "--dataset", str(tmp_path / "pairs.csv")])
    assert res.exit_code == 0, res.output
    assert "dropped 1 with a user or item the run does not know" in res.output


def test_the_using_a_model_guide_runs(tmp_path: Path) -> None:
    """docs/guide/using-a-model.md runs top to bottom (train, recommend, export, the numpy snippet, evaluate)."""
    from tests.docs.doctools import ROOT, run_page

    assert run_page(ROOT / "docs" / "guide" / "using-a-model.md", tmp_path) is None
    assert (tmp_path / "recs.parquet").exists() and (tmp_path / "export" / "users.parquet").exists()


def test_recommend_on_a_simulated_federated_run_says_it_holds_every_clients_state(
    run_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "lpgcn"
    args = ["train", "lpgcn", "--dataset", "synthetic", "--epochs", "1", "--out", str(out), "--no-progress"]
    assert runner.invoke(app, [*args, *TINY]).exit_code == 0
    res = runner.invoke(app, ["recommend", str(out), "--users", "1", "-k", "2"])
    assert res.exit_code == 0, res.output
    assert "simulated in one process" in res.stderr and "stays on its own client" in res.stderr
    central = runner.invoke(app, ["recommend", str(run_dir), "--users", "1", "-k", "2"])
    assert central.exit_code == 0 and "note:" not in central.stderr
