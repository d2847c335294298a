"""Runs that cannot lose work: ``--resume`` that must match its run, ``--out`` that never mixes two runs,
``--epochs`` of at least one, the ``run folder:`` line only for a folder that exists, and
``fedgraphrec settings PROTOCOL``."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fedgraphrec.cli._app import app
from fedgraphrec.training.config import ConfigError
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.trainer import Trainer

runner = CliRunner()
TINY = [
    *("--set", "dataset_options.n_users=60", "--set", "dataset_options.n_items=70"),
    *("--set", "dim=8", "--set", "ks=[5]", "--set", "metric=recall@5"),
]


def _train(out: Path, *extra: str, protocol: str = "central") -> str:
    res = runner.invoke(
        app, ["train", protocol, "--dataset", "synthetic", "--epochs", "1", "--no-progress", *TINY,
              "--out", str(out), *extra],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    return res.output


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished one-epoch central run (tests copy it before changing it)."""
    run = tmp_path_factory.mktemp("runs") / "central"
    _train(run)
    return run


def _copy(run: Path, to: Path) -> Path:
    to.mkdir()
    for f in run.iterdir():
        if f.is_file():
            (to / f.name).write_bytes(f.read_bytes())
    return to


def _refused(args: list[str]) -> str:
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1, res.output  # one error line
    return " ".join(res.output.split())


# ------------------------------------------------------------------ --resume
@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--set", "dim=16"], ["--resume with protocol.dim=16", "trained with protocol.dim=8"]),
        (["--set", "protocol.dim=16"], ["--resume with protocol.dim=16", "trained with protocol.dim=8"]),
        (["--seed", "7", "--model", "mf"], ["seed=7", "protocol.model='mf'", "seed=2020"]),
        (["--dataset", "gowalla"], ["dataset='gowalla'", "trained with dataset='synthetic'"]),
        (["--set", "ks=[5,10]"], ["eval.ks=[5, 10]", "eval.ks=[5]"]),
    ],
)
def test_resume_with_a_different_setting_is_refused_naming_it(finished, tmp_path, flags, named):
    run = _copy(finished, tmp_path / "r")
    before = (run / "metrics.jsonl").read_text()
    line = _refused(["train", "central", "--resume", str(run), "--epochs", "2", "--no-progress", *flags])
    assert line.startswith(f"error: {run / 'config.toml'}: --resume with ")
    for text in named:
        assert text in line, line
    assert "only --epochs may differ" in line
    assert (run / "metrics.jsonl").read_text() == before  # the run is untouched


def test_resume_with_another_protocol_or_a_config_file_that_differs_is_refused(finished, tmp_path):
    run = _copy(finished, tmp_path / "r")
    line = _refused(["train", "lpgcn", "--resume", str(run), "--epochs", "2"])
    assert "--resume with protocol lpgcn, but the run was trained with protocol central" in line
    other = tmp_path / "other.toml"
    other.write_text("[protocol]\nreg = 0.5\n")
    line = _refused(["train", "central", "--resume", str(run), "-c", str(other)])
    assert "protocol.reg=0.5" in line


def test_resume_with_the_runs_own_values_extends_it(finished, tmp_path):
    """Flags equal to the run's are fine; its own config.toml as --config too; --epochs extends."""
    run = _copy(finished, tmp_path / "r")
    res = runner.invoke(
        app, ["train", "central", "--resume", str(run), "--dataset", "synthetic", "--epochs", "2",
              "-c", str(finished / "config.toml"), "--no-progress", *TINY],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads((run / "summary.json").read_text())["epochs_run"] == 2
    assert "epochs = 2" in (run / "config.toml").read_text()


def test_resume_with_out_elsewhere_is_refused(finished, tmp_path):
    run = _copy(finished, tmp_path / "r")
    line = _refused(["train", "central", "--resume", str(run), "--out", str(tmp_path / "x")])
    assert "--out" in line and "--resume" in line
    assert not (tmp_path / "x").exists()


def test_the_trainer_names_the_keys_a_resumed_checkpoint_differs_in(finished, tmp_path):
    run = _copy(finished, tmp_path / "r")
    saved = load_config(run / "config.toml")
    cfg = load_config(run / "config.toml", ["seed=3", "protocol.reg=0.5"])
    with pytest.raises(ValueError, match=r"differs in protocol\.reg \(0\.5, checkpoint: .+\), seed \(3, "):
        Trainer(cfg, run, progress=False, resume=True).fit()
    assert load_config(run / "config.toml") == saved


# ------------------------------------------------------------------ --out / --overwrite
def test_out_onto_a_finished_run_is_refused_without_overwrite(finished, tmp_path):
    run = _copy(finished, tmp_path / "r")
    before = (run / "summary.json").read_text()
    line = _refused(["train", "central", "--dataset", "synthetic", "--epochs", "1", *TINY, "--out", str(run)])
    assert f"{run}: holds a run (config.toml)" in line and "--overwrite" in line and "--resume" in line
    assert (run / "summary.json").read_text() == before


def test_overwrite_replaces_the_old_run_and_its_files(finished, tmp_path):
    run = _copy(finished, tmp_path / "r")
    (run / "ledger.csv").write_text("stale\n")  # a file this run does not write
    (run / "transcripts").mkdir()
    _train(run, "--overwrite", "--seed", "5")
    assert not (run / "ledger.csv").exists() and not (run / "transcripts").exists()
    assert "seed = 5" in (run / "config.toml").read_text()


def test_a_folder_that_is_no_run_is_never_written_into_or_deleted(tmp_path):
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "thesis.tex").write_text("precious\n")
    args = ["train", "central", "--dataset", "synthetic", "--epochs", "1", *TINY, "--out", str(mine)]
    line = _refused(args)
    assert f"{mine}: not empty and not a run folder (no config.toml or metrics.jsonl)" in line
    line = _refused([*args, "--overwrite"])
    assert "refusing to delete" in line
    assert [p.name for p in mine.iterdir()] == ["thesis.tex"]
    assert (mine / "thesis.tex").read_text() == "precious\n"
    empty = tmp_path / "empty"
    empty.mkdir()
    _train(empty)  # an empty folder is a fine place for a run
    assert (empty / "summary.json").exists()


def test_overwrite_keeps_the_old_run_when_the_new_one_cannot_start(finished, tmp_path):
    run = _copy(finished, tmp_path / "r")
    before = sorted((p.name, p.read_bytes()) for p in run.iterdir())
    args = ["train", "central", "--overwrite", "--out", str(run), "--no-progress"]
    assert "missing" in _refused([*args, "--dataset", str(tmp_path / "missing")])
    assert "dim" in _refused([*args, "--set", "dim=0"])
    assert sorted((p.name, p.read_bytes()) for p in run.iterdir()) == before


def test_the_default_folder_of_a_run_started_in_the_same_second_is_a_new_one(tmp_path, monkeypatch):
    from datetime import UTC, datetime

    from fedgraphrec.training import rundir

    class Frozen:
        @staticmethod
        def now(tz: object) -> datetime:
            return datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

    monkeypatch.setattr(rundir, "datetime", Frozen)
    first = rundir.default_run_dir("lpgcn", "synthetic", tmp_path)
    first.mkdir()
    second = rundir.default_run_dir("lpgcn", "synthetic", tmp_path)
    assert first.name == "20260102-030405-lpgcn-synthetic"
    assert second.name == "20260102-030405-lpgcn-synthetic-2" and not second.exists()


def test_a_flower_run_that_fails_before_writing_leaves_no_folder_it_made(finished, tmp_path):
    from fedgraphrec.cli.flower import _run_folder

    made = tmp_path / "new"
    with pytest.raises(RuntimeError), _run_folder(made, overwrite=False):
        assert made.is_dir()
        raise RuntimeError("the simulation ended without a result")
    assert not made.exists()
    run = _copy(finished, tmp_path / "r")
    with pytest.raises(RuntimeError), _run_folder(run, overwrite=True):
        assert not any(run.iterdir())  # the old run's files went before the new run started
        raise RuntimeError("lost")
    assert run.is_dir()  # a folder the user named stays


@pytest.mark.parametrize("command", [["simulate"], ["deploy", "--superlink", "nowhere"]])
def test_flower_out_onto_a_run_is_refused_before_anything_starts(finished, tmp_path, command):
    pytest.importorskip("flwr")
    run = _copy(finished, tmp_path / "r")
    before = sorted(p.name for p in run.iterdir())
    args = ["flower", *command, "lpgcn", "--dataset", "synthetic", "--epochs", "1", "--out", str(run)]
    line = _refused(args)
    assert "holds a run (config.toml)" in line and "--overwrite" in line
    assert sorted(p.name for p in run.iterdir()) == before
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "a.txt").write_text("x")
    assert "refusing to delete" in _refused([*args[:-1], str(mine), "--overwrite"])


# ------------------------------------------------------------------ --epochs, the run folder line
@pytest.mark.parametrize("epochs", ["0", "-3"])
def test_epochs_below_one_is_refused_naming_the_parameter(tmp_path, epochs):
    out = tmp_path / "r"
    line = _refused(["train", "central", "--epochs", epochs, "--out", str(out)])
    assert f"epochs must be >= 1; got {epochs}" in line
    assert not out.exists()


def test_epochs_zero_in_a_file_is_refused_naming_the_file(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("epochs = 0\n")
    with pytest.raises(ConfigError, match=r"c\.toml: epochs must be >= 1; got 0"):
        load_config(cfg)


def test_a_failed_start_prints_no_run_folder_and_leaves_none(tmp_path):
    out = tmp_path / "r"
    res = runner.invoke(app, ["train", "central", "--dataset", str(tmp_path / "missing"), "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert "run folder" not in res.output and not out.exists()
    res = runner.invoke(app, ["train", "central", "--set", "dim=0", "--out", str(out)])
    assert res.exit_code == 2 and "run folder" not in res.output and not out.exists()


def test_the_run_folder_line_names_the_folder_written(tmp_path):
    out = tmp_path / "r"
    assert f"run folder: {out}" in " ".join(_train(out).split())


# ------------------------------------------------------------------ fedgraphrec settings
def test_settings_prints_the_protocols_table():
    res = runner.invoke(app, ["settings", "lpgcn"], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "lpgcn settings" in res.output
    for name in ("alpha", "secure_virtual_items", "secure_init", "batch_size"):
        assert f" {name} " in res.output, name
    assert "secagg_threshold" not in res.output


def test_settings_as_json_matches_the_dataclass():
    from fedgraphrec.protocols.registry import lookup
    from fedgraphrec.protocols.settings import settings_fields

    res = runner.invoke(app, ["settings", "lpgcn", "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)
    assert [r["setting"] for r in rows] == [f.name for f in settings_fields(lookup("lpgcn").settings)]
    alpha = next(r for r in rows if r["setting"] == "alpha")
    assert alpha["type"] == "int" and alpha["default"] == repr(lookup("lpgcn").settings().alpha)
    assert alpha["meaning"]


def test_settings_of_an_unknown_protocol_lists_the_known_ones():
    line = _refused(["settings", "lpgnc"])
    assert "unknown protocol 'lpgnc'" in line and "lpgcn" in line and "central" in line
    assert "unknown --format" in _refused(["settings", "lpgcn", "--format", "yaml"])


def test_settings_in_the_terminal_show_no_raw_restructuredtext() -> None:
    """The docstrings' ``:math:`\\alpha``` and ``:func:`~...``` roles render as text in a terminal."""
    table = CliRunner().invoke(app, ["settings", "lpgcn"])
    as_json = CliRunner().invoke(app, ["settings", "lpgcn", "--format", "json"])
    for res in (table, as_json):
        assert res.exit_code == 0, res.output
        assert ":math:" not in res.stdout and ":func:" not in res.stdout and "``" not in res.stdout
    alpha = next(r for r in json.loads(as_json.stdout) if r["setting"] == "alpha")
    assert alpha["meaning"] == "virtual items per client α."
