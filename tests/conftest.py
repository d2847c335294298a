"""Suite-wide fixtures."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _checkpoint_key_file(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Checkpoints of real-crypto runs encrypt their keys under a user key file: a temporary one here.

    Without this, the first such test would create the user's own ``~/.config/fedgraphrec/checkpoint.key``.
    """
    monkeypatch.setenv(
        "FEDGRAPHREC_CHECKPOINT_KEY_FILE", str(tmp_path_factory.getbasetemp() / "checkpoint.key")
    )
