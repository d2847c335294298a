"""Fixtures for the data-layer tests.

* Every test gets a private user cache (``XDG_CACHE_HOME`` under ``tmp_path``), so nothing is written
  to the real cache, and the network function is replaced by one that fails the test: downloads
  must be mocked explicitly.
* ``datasets_root`` skips a test unless ``FEDGRAPHREC_DATA`` points at the real datasets.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from fedgraphrec.data import download


@pytest.fixture(autouse=True)
def _isolated_cache_and_no_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))

    def no_network(url: str, dest: Path, timeout: float = 60.0) -> None:
        pytest.fail(f"a test tried to download {url}; mock fedgraphrec.data.download.fetch_url")

    monkeypatch.setattr(download, "fetch_url", no_network)


@pytest.fixture(scope="session")
def datasets_root() -> Path:
    env = os.environ.get("FEDGRAPHREC_DATA")
    if not env:
        pytest.skip("FEDGRAPHREC_DATA is not set; the real-dataset tests need it (e.g. ../shared/datasets)")
    root = Path(env)
    if not root.is_dir():
        pytest.skip(f"FEDGRAPHREC_DATA={env} is not a folder")
    return root


@pytest.fixture
def dataset_folder(datasets_root: Path) -> Callable[[str], Path]:
    """Returns the folder of a real dataset, skipping the test if it is absent."""

    def get(name: str) -> Path:
        folder = datasets_root / name
        if not folder.is_dir():
            pytest.skip(f"dataset folder {folder} is missing")
        return folder

    return get


@pytest.fixture
def write() -> Callable[..., Path]:
    """``write(path, text, gz=False)``: write a text file (optionally gzipped), creating folders."""

    def _write(path: Path, text: str, gz: bool = False) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode("utf-8")
        path.write_bytes(gzip.compress(data) if gz else data)
        return path

    return _write
