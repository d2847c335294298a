r"""The LP-GCN client program: a shard of clients (users) on one node, all computed at once.

Set-up stages in :mod:`.client_setup` (Algorithm 2, verification, initial rows), training and
prediction stages in :mod:`.client_train` (Algorithms 1, 4, 5/9, 6, 7 and §4.6), the typed state
in :mod:`.client_state`.
"""

from __future__ import annotations

from fedgraphrec.protocols.lpgcn.client_loss import LossStages
from fedgraphrec.protocols.lpgcn.client_setup import SetupStages
from fedgraphrec.protocols.lpgcn.client_train import TrainingStages

__all__ = ["LPGCNClient"]


class LPGCNClient(SetupStages, TrainingStages, LossStages):
    """The LP-GCN client role for a shard of clients (stage methods ``stage_setup_*``, ``stage_train_*``)."""
