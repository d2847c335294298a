"""File access for the loaders: locating files, reading (optionally gzipped) bytes."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from fedgraphrec.data.errors import DataFormatError, DatasetNotFoundError

_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"


def find_file(folder: Path, *names: str) -> Path | None:
    """First of ``names`` that exists in ``folder`` (plain names are listed before ``.gz`` ones)."""
    for name in names:
        p = folder / name
        if p.is_file():
            return p
    return None


def require_file(folder: Path, *names: str) -> Path:
    """Like :func:`find_file`, but a missing file raises :class:`DatasetNotFoundError`.

    Raises:
        DatasetNotFoundError: none of ``names`` exists; the message names the expected path(s).
    """
    found = find_file(folder, *names)
    if found is None:
        expected = " or ".join(str(folder / n) for n in names)
        raise DatasetNotFoundError(f"file not found: {expected}")
    return found


def require_folder(folder: str | Path) -> Path:
    """Return ``folder`` as a Path, raising :class:`DatasetNotFoundError` if it is not a directory."""
    p = Path(folder).expanduser()
    if not p.is_dir():
        raise DatasetNotFoundError(f"dataset folder not found: {p}")
    return p


def read_bytes(path: str | Path) -> bytes:
    """The content of ``path``, transparently decompressed when it is gzipped.

    Gzip is detected by its magic bytes, not by the file name, so a mislabelled file still loads.
    A leading UTF-8 byte-order mark (written by some spreadsheet exports) is removed.

    Raises:
        DatasetNotFoundError: the file does not exist.
        DataFormatError: the file looks gzipped but cannot be decompressed.
    """
    p = Path(path)
    if not p.is_file():
        raise DatasetNotFoundError(f"file not found: {p}")
    raw = p.read_bytes()
    if raw[:2] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise DataFormatError(p, None, f"corrupt gzip data: {exc}") from exc
    return raw[len(_UTF8_BOM) :] if raw.startswith(_UTF8_BOM) else raw
