"""``checkpoint.pt`` is untrusted input: it runs no code on load and holds no key in the clear."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from fedgraphrec.training.checkpoint import (
    KEY_FILE_ENV,
    CheckpointError,
    from_plain,
    load_checkpoint,
    to_plain,
)
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.trainer import Trainer

TINY = [
    "dataset=synthetic",
    "dataset_options.n_users=60",
    "dataset_options.n_items=70",
    "dataset_options.seed=3",
    "dim=4",
    "n_layers=2",
    "batch_size=64",
    "ks=[5]",
    "metric=recall@5",
    "valid_fraction=0.1",
]


class _RunsCode:
    """Unpickling this runs a shell command that writes a marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (f"touch {self.marker}",)


def test_a_checkpoint_that_would_run_code_is_refused_unread(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    marker = tmp_path / "pwned"
    payload = {"config": {}, "learner": _RunsCode(marker)}
    torch.save(payload, run / "checkpoint.pt")
    # the file is a real exploit: the old loader (weights_only=False) runs it
    probe = tmp_path / "probe"
    torch.save({"learner": _RunsCode(probe)}, tmp_path / "probe.pt")
    torch.load(tmp_path / "probe.pt", weights_only=False)
    assert probe.exists()

    trainer = Trainer(load_config(None, [*TINY, "epochs=1"]), run, progress=False, resume=True)
    with pytest.raises(CheckpointError, match=r"checkpoint\.pt: refusing to load"):
        trainer.fit()
    assert not marker.exists(), "the checkpoint's code ran"


def _key_material(trainer: Trainer) -> list[bytes]:
    out: list[bytes] = []
    for program in trainer.learner.programs.values():  # type: ignore[attr-defined]
        st = program.state
        out.append(bytes(st.key))
        keys = st.private_keys
        raw = keys if isinstance(keys, bytes) else np.asarray(keys, dtype=np.uint8).tobytes()
        out += [raw[k : k + 32] for k in range(0, len(raw), 32)]
    return [k for k in out if k]


@pytest.mark.parametrize("protocol", ["lpgcn", "gnn4fr"])
def test_a_real_crypto_checkpoint_holds_no_key_and_resumes(tmp_path: Path, protocol: str) -> None:
    cfg = [*TINY, f"protocol={protocol}", "crypto=real"]
    run = tmp_path / "run"
    first = Trainer(load_config(None, [*cfg, "epochs=2"]), run, progress=False)
    first.fit()
    secrets = _key_material(first)
    assert len(secrets[0]) == 32, "a real-crypto run agreed a group key S"
    for path in run.rglob("*"):  # nothing in the run folder holds a key's bytes
        if path.is_file():
            data = path.read_bytes()
            assert not any(key in data for key in secrets), f"{path.name} holds key material"
    assert Path(os.environ[KEY_FILE_ENV]).stat().st_size == 32  # the user's key, outside the folder

    resumed = Trainer(load_config(None, [*cfg, "epochs=3"]), run, progress=False, resume=True)
    assert resumed._load_checkpoint()
    assert _key_material(resumed) == secrets  # the keys came back from the encrypted entry
    before, after = first.learner.tables(), resumed.learner.tables()  # type: ignore[attr-defined]
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert resumed.fit().summary["epochs_run"] == 3


def test_resume_without_the_users_key_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = [*TINY, "protocol=lpgcn", "crypto=real", "epochs=1"]
    Trainer(load_config(None, cfg), tmp_path / "run", progress=False).fit()
    ckpt = tmp_path / "run" / "checkpoint.pt"
    monkeypatch.setenv(KEY_FILE_ENV, str(tmp_path / "absent.key"))
    with pytest.raises(CheckpointError, match=r"absent\.key"):
        load_checkpoint(ckpt)
    (tmp_path / "other.key").write_bytes(os.urandom(32))
    monkeypatch.setenv(KEY_FILE_ENV, str(tmp_path / "other.key"))
    with pytest.raises(CheckpointError, match="does not decrypt"):
        load_checkpoint(ckpt)
    monkeypatch.setenv(KEY_FILE_ENV, str(tmp_path / "run" / "inside.key"))
    with pytest.raises(CheckpointError, match="must not be inside the run folder"):
        Trainer(load_config(None, [*cfg, "epochs=2"]), tmp_path / "run", progress=False, resume=True).fit()


def test_plain_data_round_trip_and_refusals() -> None:
    from fedgraphrec.protocols.lpgcn.holdings import TokenIndex

    value = {
        "a": np.arange(6, dtype=np.int32).reshape(2, 3),
        "v": np.zeros(3, dtype="|V16"),
        "s": np.float64(1.5),
        "b": b"\x00\x01",
        "t": (torch.ones(2, dtype=torch.float64), torch.int64),
        7: sp.csr_matrix(np.eye(3, dtype=np.float32)),
        "idx": TokenIndex(np.arange(32, dtype=np.uint8).reshape(2, 16)),
        "__fgr__": None,
    }
    back = from_plain(to_plain(value))
    assert np.array_equal(back["a"], value["a"]) and back["a"].dtype == np.int32
    assert back["v"].dtype == np.dtype("|V16") and back["s"] == 1.5 and isinstance(back["s"], np.float64)
    assert (
        back["b"] == b"\x00\x01" and back["t"][1] is torch.int64 and torch.equal(back["t"][0], value["t"][0])
    )
    assert (back[7] != value[7]).nnz == 0 and "__fgr__" in back
    assert back["idx"].find(np.arange(32, dtype=np.uint8).reshape(2, 16)).tolist() == [0, 1]
    with pytest.raises(CheckpointError, match="cannot store"):
        to_plain({"f": len})
    with pytest.raises(CheckpointError, match="not of a loaded fedgraphrec module"):
        from_plain({"__fgr__": "object", "class": "os:system", "vars": {}})
    with pytest.raises(CheckpointError, match="dtype"):
        from_plain(
            {"__fgr__": "ndarray", "dtype": "|O", "shape": [1], "data": torch.zeros(8, dtype=torch.uint8)}
        )
