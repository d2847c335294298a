"""Model snapshots: the selected and the last evaluated model of a run, as plain tensors.

A run folder keeps two snapshot files beside the resume state (``checkpoint.pt``):

* ``best.pt`` — the model of the epoch ``summary.json`` reports (``selected_epoch``), written when
  the selection metric improves, at that evaluation;
* ``last.pt`` — the model of the last evaluated epoch (``last_epoch``).

Why two files and not the checkpoint: the checkpoint is the state after the last *trained* epoch,
while the summary reports the best *validated* one; a user who loads "the model" must get the one
whose metrics they were shown. A snapshot is what ranking needs and nothing else, in one of two forms:

* ``scoring = "dot"``: ``users`` ``[n_users, d]`` and ``items`` ``[n_items, d]``; the score of user
  ``u`` for item ``i`` is ``users[u] · items[i]`` (the tables the evaluation itself ranked with);
* ``scoring = "scores"``: a dense ``scores`` ``[n_users, n_items]`` matrix (models whose score is no
  dot product: NCF, Mult-VAE, DGREC's per-user models; predicted ratings of the rating protocols),
  written only up to :data:`DENSE_LIMIT` entries.

The file holds tensors, strings and integers only: ``torch.load(path, weights_only=True)`` reads it
and runs no code from it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from fedgraphrec.evaluation.recommend import ScoreRows, dot_scores

__all__ = [
    "DENSE_LIMIT",
    "FORMAT",
    "ModelFiles",
    "Snapshot",
    "dense_scores",
    "load_snapshot",
    "save_snapshot",
]

FORMAT = "fedgraphrec.model/1"
"""The ``format`` tag of a snapshot file."""

DENSE_LIMIT = 100_000_000
"""Most entries of a dense score snapshot (``n_users × n_items``; 400 MB in float32)."""


@dataclass(frozen=True)
class Snapshot:
    """One model as the tables or scores that rank items (module docstring).

    Attributes:
        epoch: the epoch whose model this is.
        scoring: ``dot`` (``users``/``items`` tables) or ``scores`` (a dense matrix).
        users: ``[n_users, d]`` user table (``dot``).
        items: ``[n_items, d]`` item table (``dot``).
        scores: ``[n_users, n_items]`` scores (``scores``; predicted ratings for rating protocols).
    """

    epoch: int
    scoring: str
    users: torch.Tensor | None = None
    items: torch.Tensor | None = None
    scores: torch.Tensor | None = None

    @classmethod
    def dot(cls, epoch: int, users: torch.Tensor, items: torch.Tensor) -> Snapshot:
        """A dot-product model's tables (copied: a model may update its tables in place later)."""
        return cls(epoch, "dot", users=users.detach().clone(), items=items.detach().clone())

    @classmethod
    def dense(cls, epoch: int, scores: torch.Tensor) -> Snapshot:
        """A model's full score matrix."""
        return cls(epoch, "scores", scores=scores.detach())

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_users, n_items)``."""
        if self.scores is not None:
            return int(self.scores.shape[0]), int(self.scores.shape[1])
        assert self.users is not None and self.items is not None
        return int(self.users.shape[0]), int(self.items.shape[0])

    def score_rows(self) -> ScoreRows:
        """The model's score rows in float64 (``users[u] · items`` or the stored row)."""
        if self.scores is not None:
            table = self.scores.to(torch.float64)
            return lambda idx: table[idx]
        assert self.users is not None and self.items is not None
        return dot_scores(self.users.to(torch.float64), self.items.to(torch.float64))

    def payload(self) -> dict[str, Any]:
        """What the file holds (tensors, strings, integers)."""
        out: dict[str, Any] = {"format": FORMAT, "epoch": self.epoch, "scoring": self.scoring}
        for name in ("users", "items", "scores"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value.contiguous()
        return out


def save_snapshot(path: Path, snapshot: Snapshot) -> None:
    """Write ``snapshot`` to ``path`` atomically (a crash leaves the previous file whole)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(snapshot.payload(), tmp)
    os.replace(tmp, path)


def load_snapshot(path: Path) -> Snapshot:
    """Read a snapshot file with ``weights_only=True``.

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: the file is no fedgraphrec snapshot (the message names the file).
    """
    if not path.exists():
        raise FileNotFoundError(f"{path}: no model file")
    try:
        data = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as exc:  # a truncated or foreign file; weights_only refuses any object
        raise ValueError(f"{path}: not a readable model snapshot ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a fedgraphrec model snapshot (expected format {FORMAT!r})")
    scoring = data.get("scoring")
    needed = ("users", "items") if scoring == "dot" else ("scores",) if scoring == "scores" else None
    if needed is None or any(not isinstance(data.get(k), torch.Tensor) for k in needed):
        raise ValueError(f"{path}: snapshot with scoring {scoring!r} lacks its tensors")
    return Snapshot(
        int(data["epoch"]), str(scoring), data.get("users"), data.get("items"), data.get("scores")
    )


def dense_scores(score_rows: ScoreRows, n_users: int, n_items: int, chunk: int = 256) -> torch.Tensor:
    """Every user's score row, stacked ``[n_users, n_items]`` (``chunk`` users at a time)."""
    parts = []
    with torch.no_grad():
        for start in range(0, n_users, chunk):
            idx = torch.arange(start, min(start + chunk, n_users), dtype=torch.int64)
            parts.append(score_rows(idx).detach())
    if not parts:
        return torch.empty((0, n_items))
    return torch.cat(parts)


class ModelFiles:
    """What the training loop keeps of its models: ``best.pt``, ``last.pt``, and why one is missing.

    The loop offers (:meth:`offer`) every evaluated model: a :class:`Snapshot`, a function that makes one
    from the learner's current state (built only when a file is written, and only while the learner
    has not trained since), or nothing with the reason. :meth:`write_best` is called when selection
    improves, :meth:`write_last` at checkpoints and at the end of training.

    Args:
        best: path of ``best.pt``.
        last: path of ``last.pt``.
    """

    def __init__(self, best: Path, last: Path) -> None:
        self.best, self.last = best, last
        self._epoch = -1
        self._make: Callable[[], Snapshot] | None = None
        self._made: Snapshot | None = None
        self.reason = ""
        """Why the latest evaluated model has no snapshot (empty when it has one)."""
        self.written: dict[Path, int] = {}

    def offer(self, epoch: int, model: Snapshot | Callable[[], Snapshot] | None, reason: str = "") -> None:
        """The model evaluated at ``epoch`` (``None``: it cannot be kept, for ``reason``)."""
        self._epoch, self.reason = epoch, reason if model is None else ""
        self._made = model if isinstance(model, Snapshot) else None
        self._make = model if callable(model) else None

    def _snapshot(self, current_epoch: int) -> Snapshot | None:
        if self._made is None and self._make is not None and current_epoch == self._epoch:
            self._made = self._make()  # the learner's state is still the evaluated model
        return self._made

    def write_best(self, current_epoch: int) -> None:
        """Selection improved at the latest evaluation: write ``best.pt``."""
        self._write(self.best, current_epoch)

    def write_last(self, current_epoch: int) -> None:
        """Write ``last.pt`` from the latest evaluated model (if it is still at hand)."""
        self._write(self.last, current_epoch)

    def _write(self, path: Path, current_epoch: int) -> None:
        snapshot = self._snapshot(current_epoch)
        if snapshot is not None and self.written.get(path) != snapshot.epoch:
            save_snapshot(path, snapshot)
            self.written[path] = snapshot.epoch

    def epoch_of(self, path: Path) -> int | None:
        """The epoch of the snapshot at ``path`` (this process's write, else the file's tag)."""
        if path in self.written:
            return self.written[path]
        try:
            return load_snapshot(path).epoch
        except (FileNotFoundError, ValueError):
            return None

    def summary(self, selected_epoch: int | None, last_epoch: int | None) -> dict[str, Any]:
        """``summary.json``'s ``model_files`` (``selected``/``last`` file names) and ``model_note``."""
        files: dict[str, str] = {}
        if selected_epoch is not None and self.epoch_of(self.best) == selected_epoch:
            files["selected"] = self.best.name
        if last_epoch is not None and self.epoch_of(self.last) == last_epoch:
            files["last"] = self.last.name
        out: dict[str, Any] = {"model_files": files}
        if len(files) < 2:
            out["model_note"] = self.reason or (
                "no snapshot of the reported epoch's model is in the folder (a run resumed from a "
                "checkpoint older than its best epoch, or one that was not evaluated)"
            )
        return out
