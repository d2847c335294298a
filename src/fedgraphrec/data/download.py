"""Downloading public datasets into the user cache, with checksum verification.

Only MovieLens-100K has a stable official URL among the datasets used here; the others come from
research repositories and must be provided through ``FEDGRAPHREC_DATA`` or ``--data-dir``.

The checksums are SHA-256 digests of the *extracted* data files, so the check does not depend on
how the zip archive itself was packed. Tests never touch the network: they replace
:func:`fetch_url`.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path, PurePosixPath

from fedgraphrec.data.errors import DataError, DatasetNotFoundError

ML100K_URL = "https://files.grouplens.org/datasets/movielens/ml-100k.zip"
ML100K_FOLDER = "ml-100k"
ML100K_SHA256: dict[str, str] = {
    "u.data": "06416e597f82b7342361e41163890c81036900f418ad91315590814211dca490",
    "u1.base": "75f6bd99569190a25b150db875606fba1e8edd3be23a4e3a53913d812cc34df2",
    "u1.test": "dbd67d277503d4b5923f9872be376f48de070f54c0ac4aec7cee38659e3ae76d",
    "u2.base": "6c06f0b5df4b256da1a994f3ac66edc8da4d3f09bc9282df6b14d893366d703e",
    "u2.test": "4de658d1e04ed9104629509a2e2528fce833ac8e048280183f1df167632038c3",
    "u3.base": "afdc155c291c6edc41c0407e39d7462eb98d341e064f0b0a12175b80b3c4af5d",
    "u3.test": "0f548b51c78327de4c156461d3e430b7e5579fe2b5681586a59416e48fd35f6d",
    "u4.base": "219f0f4d40dfe9c5141d425f53fa91ee23ed275f14e280bbf1b50117afb064ca",
    "u4.test": "7c02ad0a1e7ab1083c8b9d4b627203a051dd7b5eab46d99fa44de33470de8db9",
    "u5.base": "a9574e59ce961eec2121627760b6e9b0974ce1637b3fe69ac32cb14a4bfab485",
    "u5.test": "351cc52e0d15b6c721466276fc24671d40936899e3d01fadeaf312915b8c5634",
    "ua.base": "67b5bcdb380c29f85d56a012ecd88612ae020f30a6730d117a334ee8203b91f2",
    "ua.test": "d0497e202417720f57a184ec8c66be2d1afa4ff41bb53787c57b28d6bf79bc42",
    "ub.base": "237254d253b6ad7de84f919d041055428646254f34ed8f562703c899430cd881",
    "ub.test": "d54a72d05730d5892062734b2bec73e976f9b713d18c828a18b968d6cce442da",
}
"""SHA-256 of the GroupLens data files (u.data and the fixed splits) as released."""

_HINT = (
    "Download it by hand from {url} and unpack it so that <folder>/ml-100k/u.data exists, then set "
    "FEDGRAPHREC_DATA=<folder> or pass --data-dir <folder>."
)


def fetch_url(url: str, dest: Path, timeout: float = 60.0) -> None:
    """Copy the resource at ``url`` to the file ``dest`` (the only function that uses the network)."""
    with urllib.request.urlopen(url, timeout=timeout) as response, dest.open("wb") as out:
        shutil.copyfileobj(response, out)


def sha256_of(path: Path) -> str:
    """Hex SHA-256 digest of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _extract_flat(archive: Path, member_dir: str, dest: Path) -> None:
    """Extract the regular files directly under ``member_dir/`` into ``dest`` (no path traversal)."""
    try:
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                parts = PurePosixPath(info.filename).parts
                if info.is_dir() or len(parts) != 2 or parts[0] != member_dir:
                    continue
                with zf.open(info) as src, (dest / parts[1]).open("wb") as out:
                    shutil.copyfileobj(src, out)
    except zipfile.BadZipFile as exc:
        raise DataError(f"the file downloaded from {ML100K_URL} is not a valid zip archive: {exc}") from exc


def verify_checksums(folder: Path, expected: dict[str, str]) -> None:
    """Raise :class:`DataError` unless every file in ``expected`` exists in ``folder`` with that digest."""
    for name, digest in expected.items():
        path = folder / name
        if not path.is_file():
            raise DataError(f"checksum check failed: {name} is missing from the downloaded archive")
        actual = sha256_of(path)
        if actual != digest:
            raise DataError(
                f"checksum mismatch for {name}: expected sha256 {digest}, got {actual}; "
                "the download is corrupt or the file was changed upstream"
            )


def download_ml100k(cache_root: Path, *, timeout: float = 60.0) -> Path:
    """Download and unpack MovieLens-100K into ``cache_root/ml-100k`` after verifying checksums.

    The archive is fetched into a temporary folder inside ``cache_root``; the dataset folder only
    appears once every checksum matched, so an interrupted or corrupt download leaves nothing behind.

    Returns:
        The dataset folder.

    Raises:
        DatasetNotFoundError: the download failed (no network, HTTP error); the message says how to
            provide the data by hand (``FEDGRAPHREC_DATA`` / ``--data-dir``).
        DataError: the archive is not a zip or a checksum does not match.
    """
    target = cache_root / ML100K_FOLDER
    cache_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".download-", dir=cache_root))
    try:
        archive = work / "ml-100k.zip"
        try:
            fetch_url(ML100K_URL, archive, timeout)
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise DatasetNotFoundError(
                f"MovieLens-100K is not available locally and downloading it from {ML100K_URL} failed "
                f"({reason}); the network may be unreachable. " + _HINT.format(url=ML100K_URL)
            ) from exc
        unpacked = work / ML100K_FOLDER
        unpacked.mkdir()
        _extract_flat(archive, ML100K_FOLDER, unpacked)
        verify_checksums(unpacked, ML100K_SHA256)
        if target.exists():
            shutil.rmtree(target)
        unpacked.replace(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target
