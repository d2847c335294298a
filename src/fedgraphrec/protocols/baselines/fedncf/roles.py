"""FedNCF's names both roles share: stages, ledger phases, part names and fields.

The stages of a run, in order:

1. ``setup`` — every node names its users with at least one item (who may be sampled).
2. per round ``train/query`` — the sampled users draw their negatives and local pairs and ask for
   the rows of the items they query.
3. per round ``train/local`` — they get the rows and the weights, run ``τ`` local Adam steps and
   keep their item-row and weight deltas for the secure sum.
4. per round the four stages of :mod:`fedgraphrec.protocols.secagg` (phase ``train/upload``):
   the server learns only the sum of the deltas and of the query counts.
"""

from __future__ import annotations

__all__ = ["F_ACTIVE", "F_CLIENTS", "F_LOSS", "F_ROUND", "F_WEIGHTS", "PH_DOWNLOAD", "PH_QUERY", "PH_UPLOAD"]

CLIENT = "client"
SERVER = "server"

ST_SETUP = "setup"
ST_QUERY = "train/query"
ST_LOCAL = "train/local"

PH_QUERY = "train/query"
PH_DOWNLOAD = "train/download"
PH_UPLOAD = "train/upload"  # prefix of the secure-aggregation stages' phases

P_QUERY = "query"
P_DOWNLOAD = "download"
P_ITEMS = "items"
P_WEIGHTS = "weights"

K_QUERY = "item-ids"
K_DOWNLOAD = "item-rows-and-weights"

F_ACTIVE = "active"
F_CLIENTS = "clients"
F_ROUND = "round"
F_LOSS = "loss_sum"
F_WEIGHTS = "weights"
