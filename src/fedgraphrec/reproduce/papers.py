"""The papers' numbers, budgets and tuned settings, read from data files (``papers/<paper>.toml``).

The library holds no results: what a paper printed (its table cells), the budgets our reproduction
runs with (epochs, seeds, sample sizes) and the learning rates tuned for them live in one TOML file
per paper under ``fedgraphrec/reproduce/papers/`` (shipped with the package). The reproduce tables
and figures (:mod:`~fedgraphrec.reproduce.tables`, :mod:`~fedgraphrec.reproduce.paper_figures`,
:mod:`~fedgraphrec.reproduce.formula_tables`) read them through :func:`paper`, a typed view whose
every accessor checks the value's type and names the file and key when it is missing or wrong, so a
typo in a data file is a clear error at import, not a silent ``KeyError`` deep in a run.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

__all__ = ["PaperDataError", "Section", "paper", "paper_names"]

_FOLDER = "papers"


class PaperDataError(ValueError):
    """A paper data file is missing, malformed, or lacks a key (or has one of the wrong type)."""


@dataclass(frozen=True)
class Section:
    """A table of a paper data file; ``where`` names it (``papers/lpgcn.toml: t4.paper``)."""

    where: str
    data: Mapping[str, Any]

    def _path(self, key: str) -> str:
        file, _, prefix = self.where.partition(": ")
        return f"{file}: {prefix + '.' if prefix else ''}{key}"

    def _get(self, key: str) -> Any:
        if key not in self.data:
            raise PaperDataError(f"{self._path(key)}: missing (keys here: {', '.join(self.data) or 'none'})")
        return self.data[key]

    def _wrong(self, key: str, expected: str) -> PaperDataError:
        return PaperDataError(f"{self._path(key)}: expected {expected}, got {self.data[key]!r}")

    def has(self, key: str) -> bool:
        """Whether ``key`` is present."""
        return key in self.data

    def names(self) -> tuple[str, ...]:
        """The keys, in file order (a table's rows keep the paper's order)."""
        return tuple(self.data)

    def section(self, key: str) -> Section:
        """The sub-table ``key``."""
        value = self._get(key)
        if not isinstance(value, dict):
            raise self._wrong(key, "a table")
        return Section(self._path(key), value)

    def text(self, key: str) -> str:
        """The string ``key``."""
        value = self._get(key)
        if not isinstance(value, str):
            raise self._wrong(key, "a string")
        return value

    def number(self, key: str) -> float:
        """The number ``key`` (an integer in the file is read as a float)."""
        value = self._get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._wrong(key, "a number")
        return float(value)

    def integer(self, key: str) -> int:
        """The integer ``key``."""
        value = self._get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._wrong(key, "an integer")
        return value

    def texts(self, key: str) -> tuple[str, ...]:
        """The array of strings ``key``."""
        value = self._get(key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._wrong(key, "an array of strings")
        return tuple(value)

    def numbers(self, key: str) -> tuple[float, ...]:
        """The array of numbers ``key``."""
        value = self._get(key)
        if not isinstance(value, list) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in value
        ):
            raise self._wrong(key, "an array of numbers")
        return tuple(float(v) for v in value)

    def integers(self, key: str) -> tuple[int, ...]:
        """The array of integers ``key``."""
        value = self._get(key)
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise self._wrong(key, "an array of integers")
        return tuple(value)


def paper_names() -> tuple[str, ...]:
    """The paper data files shipped with the package (``lpgcn``, ``fedgrec``, …), sorted."""
    folder = resources.files("fedgraphrec.reproduce").joinpath(_FOLDER)
    return tuple(sorted(p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml")))


@functools.cache
def paper(name: str) -> Section:
    """The data file ``papers/<name>.toml`` as a :class:`Section` (read once).

    Raises:
        PaperDataError: no such file, or it is not valid TOML.
    """
    where = f"{_FOLDER}/{name}.toml"
    file = resources.files("fedgraphrec.reproduce").joinpath(_FOLDER, f"{name}.toml")
    if not file.is_file():
        raise PaperDataError(f"{where}: no such paper data file; available: {', '.join(paper_names())}")
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise PaperDataError(f"{where}: not valid TOML ({e})") from None
    return Section(f"{where}: ", data)
