r"""FedPerGNN (Wu et al., Nature Communications 2022), FedGNN in FedGRec's Table 1.

Wu et al., "A federated graph neural network framework for privacy-preserving personalization".

Each user holds its embedding :math:`e_u` and its items. A **third-party server** expands every
user's local graph: users upload their item IDs as deterministic tokens under a key the clients share
and the third party does not hold (:class:`~fedgraphrec.crypto.ItemTokenizer`, computed for real in
crypto mode ``real``), together with their current embedding; the third party matches tokens and
returns, for each of a user's items, the embeddings of the *other* users who hold it, without
learning what the item is. The user's local GNN then reaches second-order neighbours:

.. math::
    \hat e_{ui} = e_i + \operatorname{mean}_{v\in\mathcal U_i\setminus\{u\}} \tilde e_v,\qquad
    h_u = e_u + \operatorname{mean}_{i\in\mathcal I_u}\hat e_{ui},\qquad \hat y_{uj} = h_u\cdot e_j,

with :math:`\tilde e_v` the embedding ``v`` last gave the third party (neighbours are constants of
the local model, which is where FedPerGNN's convolution is lossy). [D] The original uses a graph
attention layer; mean aggregation keeps the baseline a *1-hop federated GNN* with no extra weights,
and the reduction "noise off, no pseudo items" is exactly that model trained by FedAvg of item updates
(tested against a per-user autograd reference).

**A round** (FedGRec's client sampling, so budgets compare): the ``S`` sampled users
refresh their neighbour embeddings from the third party, download the rows of the items they query
(positives and fresh negatives), run ``τ`` local Adam steps on BPR (FedGNN+BPR) or squared error
(positives 1, negatives 0; FedGNN's MSE), keep their own embedding, and upload their item updates.
**Privacy mechanisms** of the original, both active by default:

* *pseudo-interacted items*: each user adds ``n_pseudo`` random items it did not query, with updates
  drawn from a Gaussian of the same per-coordinate mean and std as its real updates;
* *local DP*: every uploaded coordinate is clipped to :math:`[-\delta, \delta]` and gets Laplace noise
  of scale :math:`\lambda` (per coordinate and upload, :math:`\varepsilon = 2\delta/\lambda`).

The server sees each user's noisy rows (no secure aggregation in the original) and averages each
item's updates over the users that uploaded it.

**Randomness.** The round's users come from FedGRec's public ``("fedgrec", "clients", round)``
stream; everything a user draws itself — negatives, local pairs, pseudo items and (seeded) Laplace
noise — comes from its own streams ``("fedpergnn", <what>, round, user)``, so the numbers do not
depend on how users are spread over nodes. ``secure_noise`` draws the noise from the OS CSPRNG.

**Parties.** :mod:`.roles` lists the stages; :mod:`.server` (the server, which also hosts the
third party of :mod:`.third_party` as a separate object), :mod:`.client` (a shard of users),
:mod:`.local` (a shard's local computation), :mod:`.keys` (the token key :math:`S`, agreed as in
LP-GCN's Algorithm 2), :mod:`.expect` (what a node accepts: its stage order, every part it expects,
the fields it checks; the third party runs beside the server, not on a node), :mod:`.settings`.

``local_graph=False`` drops the third party and the neighbour term, :math:`h_u = e_u`: federated BPR-MF
with the same rounds, pseudo items and local-DP uploads (DGREC's FedRec baseline, ``specs/dgrec.md``
§8.5, without its social regulariser).
"""

from __future__ import annotations

from fedgraphrec.protocols.base import ProtocolSpec
from fedgraphrec.protocols.baselines.fedpergnn.client import FedPerGNNClient
from fedgraphrec.protocols.baselines.fedpergnn.server import FedPerGNNServer

__all__ = ["SPEC"]

SPEC = ProtocolSpec(
    name="fedpergnn",
    server=FedPerGNNServer,
    client=FedPerGNNClient,
    server_tables=("item_emb",),
)
"""FedPerGNN's party programs (registered in :mod:`fedgraphrec.protocols.registry`)."""
