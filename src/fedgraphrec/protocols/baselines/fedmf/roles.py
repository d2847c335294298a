"""Names both FedMF roles share: one stage per minibatch plus the secure sum's, and the ledger phases."""

from __future__ import annotations

from typing import Final

__all__ = ["DOWNLOAD", "GRADIENTS", "LOCAL", "session"]

LOCAL: Final = "train/local"
"""Stage: the item table down to the minibatch's users; each node's users train and keep their
item gradients for the secure sum."""
DOWNLOAD: Final = "train/download-items"
"""Phase of the whole-table download (a user's download does not reveal which items it needs)."""
GRADIENTS: Final = "train/item-gradients"
"""Phase prefix of the secure sum of the users' dense item-gradient vectors."""


def session(step: int) -> str:
    """The secure-aggregation session label of minibatch ``step``."""
    return f"fedmf/step/{step}"
