"""The training loop: determinism, resume after a crash, run folder contents."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from fedgraphrec.protocols.lpgcn.settings import LPGCNSettings
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.data import prepare_interactions
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.rundir import RunDir
from fedgraphrec.training.trainer import Trainer

TINY = [
    "dataset=synthetic",
    "dataset_options.n_users=120",
    "dataset_options.n_items=150",
    "dataset_options.seed=3",
    "dim=8",
    "n_layers=2",
    "batch_size=128",
    "lr=0.01",
    "epochs=6",
    "ks=[5, 10]",
    "metric=recall@10",
    "valid_fraction=0.1",
]


def untimed(history):
    return [{k: v for k, v in r.items() if not k.endswith("seconds")} for r in history]


def tiny_config(*extra):
    """TINY for whichever protocol ``extra`` names (a key the protocol lacks is skipped: ``shared``)."""
    return load_config(None, list(extra), shared=TINY)


def test_same_seed_gives_identical_metrics(tmp_path):
    a = Trainer(tiny_config(), tmp_path / "a", progress=False).fit()
    b = Trainer(tiny_config(), tmp_path / "b", progress=False).fit()
    assert [r["loss"] for r in a.history] == [r["loss"] for r in b.history]
    assert a.summary["test"] == b.summary["test"]
    c = Trainer(tiny_config("seed=7"), tmp_path / "c", progress=False).fit()
    assert [r["loss"] for r in c.history] != [r["loss"] for r in a.history]


def test_training_lowers_the_loss_and_writes_the_run_folder(tmp_path):
    res = Trainer(tiny_config("epochs=8"), tmp_path / "run", progress=False).fit()
    losses = [r["loss"] for r in res.history]
    assert losses[-1] < losses[0]
    run = RunDir(res.run_dir)
    assert run.load_config().epochs == 8
    assert len(run.read_metrics()) == 8
    summary = json.loads(run.summary_path.read_text())
    assert summary["selection"] == "valid" and 1 <= summary["selected_epoch"] <= 8
    assert set(summary["test"]) == {
        f"{m}@{k}" for m in ("precision", "recall", "ndcg", "hit") for k in (5, 10)
    }
    assert run.curves_path.stat().st_size > 1000


def test_interrupted_run_resumes_to_identical_metrics(tmp_path):
    full = Trainer(tiny_config(), tmp_path / "full", progress=False).fit()

    class Crash(Exception):
        pass

    def crash_after_3(epoch):
        if epoch == 3:
            raise Crash

    with pytest.raises(Crash):
        Trainer(tiny_config(), tmp_path / "cut", progress=False, on_epoch_end=crash_after_3).fit()
    resumed = Trainer(tiny_config(), tmp_path / "cut", progress=False, resume=True).fit()
    assert untimed(resumed.history) == untimed(full.history)
    assert resumed.summary["test"] == full.summary["test"]
    assert len(RunDir(tmp_path / "cut").read_metrics()) == 6


def test_resume_refuses_a_different_config(tmp_path):
    Trainer(tiny_config("epochs=2"), tmp_path / "r", progress=False).fit()
    with pytest.raises(ValueError, match=r"another config; it differs in protocol\.lr \(0\.5, checkpoint: "):
        Trainer(tiny_config("epochs=2", "lr=0.5"), tmp_path / "r", progress=False, resume=True).fit()


def test_early_stopping_on_validation(tmp_path):
    res = Trainer(tiny_config("epochs=50", "patience=2", "lr=0.3"), tmp_path / "es", progress=False).fit()
    assert res.summary["stopped_early"]
    assert res.summary["epochs_run"] < 50
    assert res.summary["selected_epoch"] <= res.summary["epochs_run"] - 2


def test_killed_process_resumes_to_identical_metrics(tmp_path):
    """A real SIGKILL of the CLI mid-run, then ``--resume``: the final metrics equal an uninterrupted run."""
    args = [a for item in [*TINY, "epochs=40", "n_layers=3"] for a in ("--set", item)]
    cli = [sys.executable, "-m", "fedgraphrec.cli", "train", "central", "--no-progress"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([*cli, *args, "--out", str(tmp_path / "ref")], check=True, env=env, capture_output=True)
    proc = subprocess.Popen(
        [*cli, *args, "--out", str(tmp_path / "kill")], env=env, stderr=subprocess.DEVNULL
    )
    ckpt = tmp_path / "kill" / "checkpoint.pt"
    deadline = time.time() + 60
    while not ckpt.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    killed_at = len(RunDir(tmp_path / "kill").read_metrics())
    subprocess.run([*cli, "--resume", str(tmp_path / "kill")], check=True, env=env, capture_output=True)
    ref = RunDir(tmp_path / "ref").read_summary()
    got = RunDir(tmp_path / "kill").read_summary()
    assert got["test"] == ref["test"] and got["selected_epoch"] == ref["selected_epoch"]
    assert killed_at < 40, "the process finished before it was killed; the test proved nothing"


def test_float64_run(tmp_path):
    """dtype=float64 trains float64 tables (and float32 float32) without touching torch's default."""
    for dtype, want in (("float64", torch.float64), ("float32", torch.float32)):
        trainer = Trainer(tiny_config(f"dtype={dtype}", "epochs=2"), tmp_path / dtype, progress=False)
        res = trainer.fit()
        assert res.summary["epochs_run"] == 2
        params = dict(trainer.learner.model.named_parameters())  # type: ignore[attr-defined]
        assert {p.dtype for p in params.values()} == {want}, dtype
    assert torch.get_default_dtype() == torch.float32


def test_lpgcn_run_resumes_to_identical_metrics_and_ledger(tmp_path):
    extra = ("protocol=lpgcn", "alpha=2", "verify=true", "epochs=4")
    full = Trainer(tiny_config(*extra), tmp_path / "full", progress=False).fit()

    class CrashError(Exception):
        pass

    def crash_after_2(epoch):
        if epoch == 2:
            raise CrashError

    with pytest.raises(CrashError):
        Trainer(tiny_config(*extra), tmp_path / "cut", progress=False, on_epoch_end=crash_after_2).fit()
    resumed = Trainer(tiny_config(*extra), tmp_path / "cut", progress=False, resume=True).fit()
    assert untimed(resumed.history) == untimed(full.history)
    assert resumed.summary["communication"] == full.summary["communication"]
    assert (tmp_path / "cut" / "ledger.csv").read_text() == (tmp_path / "full" / "ledger.csv").read_text()


FEDGREC = [
    "protocol=fedgrec",
    "K=2",
    "clients_per_round=25",
    "n_negatives=30",
    "local_steps=2",
    "eval_every=3",
]


def test_fedgrec_rounds_resume_to_identical_metrics(tmp_path):
    """Round-based protocols: a run stopped after 3 rounds and resumed equals an uninterrupted one."""
    ref = Trainer(tiny_config(*FEDGREC, "epochs=6"), tmp_path / "ref", progress=False).fit()

    class Stop(Exception):
        pass

    def crash(epoch: int) -> None:
        if epoch == 3:
            raise Stop

    with pytest.raises(Stop):
        Trainer(tiny_config(*FEDGREC, "epochs=6"), tmp_path / "cut", progress=False, on_epoch_end=crash).fit()
    resumed = Trainer(tiny_config(*FEDGREC, "epochs=6"), tmp_path / "cut", progress=False, resume=True).fit()
    assert untimed(resumed.history) == untimed(ref.history)
    assert resumed.summary["test"] == ref.summary["test"]
    assert ref.summary["communication"]["total_bytes"] == resumed.summary["communication"]["total_bytes"]


def test_fedgrec_log_every_keeps_evaluated_rounds(tmp_path):
    res = Trainer(tiny_config(*FEDGREC, "epochs=7", "log_every=2"), tmp_path / "l", progress=False).fit()
    assert [r["epoch"] for r in res.history] == [2, 3, 4, 6, 7]


def test_resume_with_more_epochs_extends_the_run(tmp_path):
    """A finished 6-round run extended to 9 equals a 9-round run (evaluations every 3 rounds)."""
    ref = Trainer(tiny_config(*FEDGREC, "epochs=9"), tmp_path / "ref", progress=False).fit()
    Trainer(tiny_config(*FEDGREC, "epochs=6"), tmp_path / "ext", progress=False).fit()
    longer = Trainer(tiny_config(*FEDGREC, "epochs=9"), tmp_path / "ext", progress=False, resume=True).fit()
    assert untimed(longer.history) == untimed(ref.history)
    assert RunDir(tmp_path / "ext").load_config().epochs == 9
    with pytest.raises(ValueError, match="not shortened"):
        Trainer(tiny_config(*FEDGREC, "epochs=4"), tmp_path / "ext", progress=False, resume=True).fit()


def test_resume_accepts_checkpoints_from_before_newer_config_keys(tmp_path):
    """A key added to TrainConfig later (here: log_every) takes its default when resuming."""
    Trainer(tiny_config("epochs=2"), tmp_path / "old", progress=False).fit()
    ckpt = tmp_path / "old" / "checkpoint.pt"
    payload = torch.load(ckpt, weights_only=True)  # plain data: nothing in it runs
    del payload["config"]["eval"]["log_every"]
    torch.save(payload, ckpt)
    res = Trainer(tiny_config("epochs=3"), tmp_path / "old", progress=False, resume=True).fit()
    assert res.summary["epochs_run"] == 3


def test_given_data_replaces_the_named_dataset(tmp_path):
    """``Trainer(data=…)`` trains and evaluates on that subset (DGREC's unregistered ciao-10core)."""
    from fedgraphrec.data.registry import load_dataset
    from fedgraphrec.data.types import Interactions

    full = load_dataset("synthetic", n_users=120, n_items=150, seed=3)
    sub = Interactions(name="sub", n_users=60, n_items=150, train=full.train[:60], test=full.test[:60])
    trainer = Trainer(
        tiny_config("valid_fraction=0.0", "epochs=1"), tmp_path / "sub", progress=False, data=sub
    )
    assert trainer.data is sub
    result = trainer.fit()
    assert result.summary["dataset"] == "sub" and result.summary["dataset_stats"]["users"] == 60


def test_secure_init_tables_are_not_the_seeds_and_verify_still_holds(tmp_path):
    """With secure_init the initial tables are not the seed's public stream (a server that saw plaintext
    item rows could otherwise regenerate them); the oracle starts from the same secret tables."""
    from fedgraphrec.training.protocol_learner import initial_tables

    settings = LPGCNSettings(dim=4, n_layers=1)
    cfg = TrainConfig(protocol="lpgcn", dataset="synthetic", dtype="float64", seed=3, settings=settings)
    data = prepare_interactions(cfg)
    seeded = initial_tables(cfg, data)["item_emb"]
    assert torch.equal(seeded, initial_tables(cfg, data)["item_emb"])
    secret = load_config(base=cfg, secure_init=True)
    a, b = (initial_tables(secret, data)["item_emb"] for _ in range(2))
    assert not torch.equal(a, seeded) and not torch.equal(a, b)
    assert abs(a.std().item() - settings.init_std) < 0.2 * settings.init_std  # still N(0, init_std²)
    result = Trainer(
        load_config(base=secret, epochs=1, batch_size=256, verify=True), tmp_path / "run", progress=False
    ).fit()
    assert result.summary["verify_max_deviation"] < 1e-10
    assert result.summary["randomness"]["init"] == "csprng"
