r"""FedNCF (Perifanis & Efraimidis, "Federated Neural Collaborative Filtering", KBS 2022).

NeuMF (:class:`~fedgraphrec.models.NCF`, GMF and MLP towers) trained by rounds, as FedGRec's Table 1
runs it (spec ``fedgrec.md`` §5.5): each sampled user keeps its two user embeddings on its device,
downloads the rows of the items it queries (its positives and fresh random negatives, drawn by the
same sampler as FedGRec) and the network weights, trains a private copy of everything for ``τ``
Adam steps on binary cross-entropy (positive pairs labelled 1, sampled negatives 0), and uploads its
item-row and weight deltas through secure aggregation. The server averages: an item row by the
number of users that queried it (the count travels inside the same secure sum), the weights by the
number of users summed (FedAvg).

**Parties.** :mod:`.roles` lists the stages; :mod:`.server` holds the item tables and the weights,
:mod:`.client` a shard of users (its users' two embeddings; the secure-aggregation stages of
:mod:`fedgraphrec.protocols.secagg` mixed in), :mod:`.local` the batched local training and the
NeuMF scorer users evaluate with, :mod:`.expect` what a node accepts (its stage order, every
part it expects, its round's secure sum), :mod:`.settings`. Each user draws its negatives and local pairs
from its own streams (:mod:`~fedgraphrec.protocols.baselines.shard_sampling`), so one node and three
nodes compute the same.

The round runs batched: every user's copy of the weights is a slice of one stacked tensor, each
user's loss is its own mean, and Adam is elementwise, so one optimizer is exactly ``S`` independent
ones; the tests compare it with a user-by-user reference.
"""

from __future__ import annotations

from fedgraphrec.protocols.base import ProtocolSpec
from fedgraphrec.protocols.baselines.fedncf.client import FedNCFClient
from fedgraphrec.protocols.baselines.fedncf.server import FedNCFServer

__all__ = ["SPEC"]

SPEC = ProtocolSpec(
    name="fedncf",
    server=FedNCFServer,
    client=FedNCFClient,
    server_tables=("item_gmf", "item_mlp", "W_user", "W_item", "b0", "Ws", "bs", "h"),
)
"""FedNCF's party programs (registered in :mod:`fedgraphrec.protocols.registry`)."""
