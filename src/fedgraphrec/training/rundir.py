"""The run folder: resolved config, per-epoch metrics, summary, checkpoint and plots.

Layout of ``RUN_DIR``::

    config.toml      the resolved TrainConfig (a run can be repeated or resumed from it)
    metrics.jsonl    one JSON record per evaluated or trained epoch
    summary.json     the selected epoch's metrics, timings, dataset statistics
    curves.png       learning curves
    checkpoint.pt    model + optimizer + loop state after the last checkpointed epoch
    best.pt          the selected epoch's model (summary.json's selected_epoch): tables or scores
    last.pt          the last evaluated epoch's model (summary.json's last_epoch)
    ids/users.tsv    the original user id of each compact index (index<TAB>id)
    ids/items.tsv    the original item id of each compact index

``best.pt``/``last.pt`` hold plain tensors (:mod:`fedgraphrec.training.snapshot`); a run folder
holds them only when the model can be kept (not for a Flower run: its users' rows stay on the
SuperNodes; ``summary.json``'s ``model_note`` says why one is missing).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, overload

import numpy as np
import tomli_w

from fedgraphrec.data.idmap import write_id_map
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.loading import load_config

__all__ = ["RunDir", "default_run_dir"]


def default_run_dir(protocol: str, dataset: str, root: str | Path = "runs") -> Path:
    """``runs/<UTC timestamp>-<protocol>-<dataset>`` (dataset paths reduced to their folder name).

    A name already taken gets a ``-2``, ``-3``, ... suffix, so a default folder never holds an older run.
    """
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    name = Path(dataset).name or "data"
    path = Path(root) / f"{stamp}-{protocol}-{name}"
    n = 1
    while path.exists():  # two runs started in the same second: never share a folder
        n += 1
        path = Path(root) / f"{stamp}-{protocol}-{name}-{n}"
    return path


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class _RunFile:
    """One file of the run folder by name: on a :class:`RunDir` ``run``, the path ``run.path / name``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.__doc__ = f"``{name}``."

    @overload
    def __get__(self, run: None, owner: type) -> _RunFile: ...

    @overload
    def __get__(self, run: RunDir, owner: type) -> Path: ...

    def __get__(self, run: RunDir | None, owner: type) -> Path | _RunFile:
        return self if run is None else run.path / self.name


class RunDir:
    """Reads and writes the files of one run folder."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    config_path = _RunFile("config.toml")
    metrics_path = _RunFile("metrics.jsonl")
    summary_path = _RunFile("summary.json")
    checkpoint_path = _RunFile("checkpoint.pt")
    curves_path = _RunFile("curves.png")
    best_path = _RunFile("best.pt")
    last_path = _RunFile("last.pt")
    user_ids_path = _RunFile("ids/users.tsv")
    item_ids_path = _RunFile("ids/items.tsv")

    RUN_MARKERS = ("config.toml", "metrics.jsonl")
    """The files that make a folder a run folder (the only kind an overwrite may empty)."""

    def check_free(self, overwrite: bool = False) -> None:
        """Refuse a folder a new run would mix with, or delete, other work; touches nothing.

        Free: a missing or empty folder, or (with ``overwrite``) a run folder. A non-empty folder
        that is no run folder (neither ``config.toml`` nor ``metrics.jsonl``) is never free.

        Raises:
            ValueError: naming the folder and why, and what to pass instead.
        """
        path = self.path
        if not path.exists():
            return
        if not path.is_dir():
            raise ValueError(f"{path}: exists and is not a folder; choose another --out")
        if not any(path.iterdir()):
            return
        marker = next((name for name in self.RUN_MARKERS if (path / name).exists()), None)
        if marker is None:
            why = f"{path}: not empty and not a run folder (no config.toml or metrics.jsonl)"
            if overwrite:
                raise ValueError(f"{why}; refusing to delete it, even with --overwrite")
            raise ValueError(f"{why}; choose another --out")
        if not overwrite:
            raise ValueError(
                f"{path}: holds a run ({marker}); pass --overwrite to replace it, "
                f"or --resume {path} to continue it"
            )

    def prepare(self, overwrite: bool = False) -> None:
        """Make the folder for a new run: :meth:`check_free`, then remove an old run's files.

        With ``overwrite`` every file and subfolder of the old run goes (a stale ``summary.json``,
        ``ledger.csv`` or ``transcripts/`` would otherwise pass for the new run's); the folder itself
        stays (it may be a link).
        """
        self.check_free(overwrite)
        if self.path.exists():
            for child in self.path.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
        self.path.mkdir(parents=True, exist_ok=True)

    def discard_if_empty(self) -> None:
        """Remove the folder if nothing was written to it (a run that failed before its first file)."""
        if self.path.is_dir() and not any(self.path.iterdir()):
            self.path.rmdir()

    def create(self, config: TrainConfig) -> None:
        """Make the folder and write the resolved config."""
        self.path.mkdir(parents=True, exist_ok=True)
        _atomic_write(self.config_path, tomli_w.dumps(config.to_dict()).encode())

    def write_id_maps(
        self, shape: tuple[int, int], user_ids: np.ndarray | None, item_ids: np.ndarray | None
    ) -> None:
        """Write ``ids/users.tsv`` and ``ids/items.tsv`` (``None``: the ids were ``0..n-1`` already).

        Raises:
            ValueError: an id map whose length is not the data's number of users or items.
        """
        for path, ids, n, side in (
            (self.user_ids_path, user_ids, shape[0], "user"),
            (self.item_ids_path, item_ids, shape[1], "item"),
        ):
            ids = np.arange(n, dtype=np.int64) if ids is None else np.asarray(ids)
            if len(ids) != n:
                raise ValueError(f"the data has {n} {side}s but {len(ids)} {side} ids")
            write_id_map(path, ids)

    def load_config(self) -> TrainConfig:
        """The resolved config stored in the folder."""
        return load_config(self.config_path)

    def append_metrics(self, record: dict[str, Any]) -> None:
        """Append one record to ``metrics.jsonl``."""
        with self.metrics_path.open("a") as f:
            f.write(json.dumps(record) + "\n")

    def rewrite_metrics(self, records: Iterable[dict[str, Any]]) -> None:
        """Replace ``metrics.jsonl`` (used on resume, to drop records after the checkpoint)."""
        _atomic_write(self.metrics_path, "".join(json.dumps(r) + "\n" for r in records).encode())

    def read_metrics(self) -> list[dict[str, Any]]:
        """All records of ``metrics.jsonl``."""
        if not self.metrics_path.exists():
            return []
        return [json.loads(line) for line in self.metrics_path.read_text().splitlines() if line.strip()]

    def write_summary(self, summary: dict[str, Any]) -> None:
        """Write ``summary.json``."""
        _atomic_write(self.summary_path, (json.dumps(summary, indent=2) + "\n").encode())

    def read_summary(self) -> dict[str, Any]:
        """Read ``summary.json``."""
        data: dict[str, Any] = json.loads(self.summary_path.read_text())
        return data


def write_run(
    folder: str | Path,
    config: dict[str, Any],
    records: list[dict[str, Any]],
    summary: dict[str, Any],
    title: str = "",
) -> Path:
    """Write a run folder for a run the :class:`~fedgraphrec.training.Trainer` does not drive (P4GCN, DGREC).

    The same files as every run: ``config.toml`` (``None`` values left out, TOML has no null),
    ``metrics.jsonl`` (one record per epoch: ``epoch``, ``loss`` and ``valid``/``test`` metric dicts),
    ``summary.json`` and ``curves.png``. Called once the run has finished, so a failed run leaves no
    half-written folder.
    """
    from fedgraphrec.training.plots import plot_curves

    run = RunDir(folder)
    run.path.mkdir(parents=True, exist_ok=True)
    _atomic_write(run.config_path, tomli_w.dumps({k: v for k, v in config.items() if v is not None}).encode())
    run.rewrite_metrics(records)
    run.write_summary(summary)
    plot_curves(records, run.curves_path, title, selected_epoch=summary.get("selected_epoch"))
    return run.path
