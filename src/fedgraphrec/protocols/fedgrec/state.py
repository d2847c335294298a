"""What a FedGRec node keeps for its users between messages (:class:`FedGRecState`).

Its own module because both the client program (:mod:`.client`, which updates it) and the node's
expectations (:mod:`.expect`, which read it to decide what the node accepts) need it, and neither
may import the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from fedgraphrec.protocols.fedgrec.local import PendingUpload
from fedgraphrec.protocols.fedgrec.sampling import RoundSample
from fedgraphrec.protocols.secagg.client import SecAggState
from fedgraphrec.runtime.state import empty_ids

__all__ = ["FedGRecState"]


@dataclass
class FedGRecState:
    """What the node keeps for its users between messages.

    Attributes:
        user: ``(K+1, n, d)``: every user's ``e_u^0`` and stored latents ``e_u^1..e_u^K``.
        deg_t: every item's degree ``|N_t|`` (the broadcast result of Eq. 9).
        sample: the current round's draws for this node's sampled users.
        pending: Step 4's input of the current round (until the secure sum that includes it).
        round: the current round (Step 4's secure sum must be this round's).
        final: the users' representations after the prediction stage.
        secagg: the open secure-aggregation session.
    """

    user: torch.Tensor
    deg_t: np.ndarray = field(default_factory=empty_ids)
    sample: RoundSample | None = None
    pending: PendingUpload | None = None
    round: int = -1
    final: torch.Tensor = field(default_factory=lambda: torch.zeros(0))
    secagg: SecAggState = field(default_factory=SecAggState)
