"""Errors raised by the data layer."""

from __future__ import annotations

from pathlib import Path


class DataError(Exception):
    """Base class for every data-layer failure (missing dataset, bad file, bad split)."""


class DatasetNotFoundError(DataError):
    """A dataset name or folder could not be resolved to files on disk."""


class DataFormatError(DataError, ValueError):
    """A data file is malformed; the message names the file and, when known, the 1-based line.

    Args:
        path: the offending file.
        line: 1-based line number, or ``None`` when the problem is not tied to one line.
        message: what is wrong, phrased for the user ("expected 3 columns, got 2").
    """

    def __init__(self, path: str | Path, line: int | None, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.reason = message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")
