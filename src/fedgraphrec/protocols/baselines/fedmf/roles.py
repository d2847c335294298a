"""Names both FedMF roles share: one stage per minibatch plus the secure sum's, and the ledger phases."""

from __future__ import annotations

from typing import Final

from fedgraphrec.protocols.secagg.expect import merge_edges, sum_edges, sum_repeats
from fedgraphrec.runtime.expect import StageFlow, flow

__all__ = ["DOWNLOAD", "EVALUATE", "FLOW", "GRADIENTS", "LOCAL", "session"]

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


EVALUATE: Final = "evaluate"
"""The generic evaluation stage (the item table down; each node scores its users)."""

FLOW: StageFlow = flow(
    first=[LOCAL, EVALUATE],  # evaluation may come first (the initial evaluation)
    after=merge_edges(
        {LOCAL: [LOCAL, EVALUATE], EVALUATE: [LOCAL]},  # a node with no user in the minibatch sums nothing
        sum_edges([LOCAL], [LOCAL, EVALUATE]),
    ),
    new_step=[LOCAL],
    repeats=sum_repeats(1),
)
"""A node's stage order: per minibatch (one step) ``train/local``, then the secure sum of the item
gradients when some of its users are in the minibatch; an evaluation after any step, once."""
