r"""The LP-GCN server program (spec ``lpgcn.md`` §1.3): relays, routes, synchronises; owns little.

Stages, in order (:class:`~fedgraphrec.protocols.lpgcn.server_setup.SetupRounds` and
:class:`~fedgraphrec.protocols.lpgcn.server_train.TrainingRounds`):

1. set-up — Algorithm 2 (public keys to the key-client, wrapped :math:`S` back, item tokens up),
   the items nobody holds, Algorithm 3 (greedy cover, convolution-item assignment), verification
   questions and sealed answers, neighbours' degrees, items' real degrees;
2. per minibatch — layer 0, Algorithm 4 (``L`` layers), Algorithms 5/9 (loss, negatives by token),
   Eqs. 16-17 (aggregate), Algorithm 6 (``L`` layers), Algorithm 7's update of :math:`W`
   (LightGCN+), and Adam on the rows it owns;
3. prediction (§4.6) — a forward pass, then every final item embedding to every client.

Notes:
    What the server holds: public keys, item tokens and its token graph, the assignment and
    routing, every item embedding and item gradient synchronised through it (item-level data is
    non-sensitive in the paper's threat model, §1.4), :math:`W` (LightGCN+) and the rows of items
    nobody holds. User rows and user gradients only pass through it sealed under :math:`S`,
    verification answers sealed to the asking convolution-client.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from fedgraphrec.protocols.lpgcn.server_train import TrainingRounds

__all__ = ["LPGCNServer"]


class LPGCNServer(TrainingRounds):
    """The LP-GCN server role over a transport (module docstring)."""

    def owned_rows(self) -> dict[str, tuple[np.ndarray, torch.Tensor]]:
        """Rows of the items nobody holds (V, and W for LightGCN+): the server's own parameters.

        The rest of W is indexed by column, which the server cannot turn into item ids; the
        convolution-clients report those rows.
        """
        out = {"item_emb": (self.unheld_ids, self.own_rows)}
        if self.settings.plus:
            out["item_w"] = (self.unheld_ids, self.W[self.n_held :])
        return out

    def state_dict(self) -> dict[str, Any]:
        """Everything the server learnt at set-up and owns (a resumed run restores it as it was)."""
        return {
            k: v
            for k, v in vars(self).items()
            if k not in ("transport", "settings", "tables", "_routes", "_empty")  # links and caches
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        vars(self).update(state)
