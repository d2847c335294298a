"""A rich progress bar for epochs and minibatches, silent when disabled or not on a terminal."""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

__all__ = ["EpochProgress"]


class EpochProgress:
    """Two bars (epochs, batches of the current epoch) on stderr."""

    def __init__(self, epochs: int, batches: int, enabled: bool = True, start: int = 0) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.batches = batches
        self._progress: Progress | None = None
        self._epochs = epochs
        self._start = start
        self._epoch_task: Any = None
        self._batch_task: Any = None

    def __enter__(self) -> EpochProgress:
        if self.enabled:
            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[info]}"),
                console=Console(stderr=True),
                transient=False,
            )
            self._progress.start()
            self._epoch_task = self._progress.add_task(
                "epochs", total=self._epochs, completed=self._start, info=""
            )
            self._batch_task = self._progress.add_task("batches", total=self.batches, info="")
        return self

    def advance_batch(self) -> None:
        """One minibatch done."""
        if self._progress is not None:
            self._progress.advance(self._batch_task)

    def end_epoch(self, record: dict[str, Any], metric: str) -> None:
        """One epoch done; show its loss and the tracked metric."""
        if self._progress is None:
            return
        info = f"loss {record['loss']:.4f}"
        for split in ("valid", "test"):
            if split in record and metric in record[split]:
                info += f"  {split} {metric} {record[split][metric]:.4f}"
        self._progress.update(self._epoch_task, advance=1, info=info)
        self._progress.reset(self._batch_task, total=self.batches)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._progress is not None:
            self._progress.stop()
