r"""P-GCN (Hu et al., 2023): lossless forward, incomplete backward, secure aggregation.

The baseline LP-GCN improves on (``specs/lpgcn.md`` §9.5, Table 1 row "P-GCN": lossless forward,
lossy backward). The backbone is LightGCN+ (users built from the item table ``W``, Eq. 6); the
server holds ``V`` and ``W``, each user its own items.

**Forward** (:meth:`.server.PGCNServer.forward`). Exactly LightGCN+'s, computed through the users
as P-GCN's embedding exchange does, with FedGRec's secure message passing (``specs/fedgrec.md``
Eqs. 6–9): at set-up the item degrees :math:`|\mathcal U_i|` are a secure sum of the users' item
indicators. Per layer ``k`` the users download the *whole* table :math:`V^{(k)}` (and ``W`` at
``k = 0``: a whole table hides which rows a user needs), each builds :math:`U^{(0)}_u` (Eq. 6) and
:math:`U^{(k+1)}_u = \sum_{i\in\mathcal I_u} c_{ui} V^{(k)}_i` from its own items, and uploads
:math:`c_{ui} U^{(k)}_u` at the rows of its items under secure aggregation, whose sum is
:math:`V^{(k+1)} = \hat R^\top U^{(k)}`. The layers equal LightGCN+'s up to the fixed-point
resolution of the secure sums (``frac_bits``). Every user takes part in every forward (the item
layers need every user's edges); the users with triples also download :math:`V^{(L)}`.

**Cost.** Until this port the forward was computed centrally and its traffic was not booked ([D]
then: the ledger counted only the gradient uploads, under-stating P-GCN's cost). It is booked now:
per minibatch every user downloads :math:`L` whole tables of ``N·d`` values (``W`` and
:math:`V^{(0..L-2)}`; the minibatch's users also :math:`V^{(L-1)}` and :math:`V^{(L)}`) and uploads
:math:`L` masked ``N·d`` ring vectors, plus the set-up's degree sum and one forward per evaluation.
Measured on ML-100K (942 users, 1,408 items, 44,140 training pairs; ``L = 3``, ``d = 64``, batch
2048, float32, one epoch with its evaluation): 134.1 MB per client per epoch, of which the old
ledger booked 25.8 MB (the gradient sums, byte for byte the same now): the cost was under-stated
5.2-fold.

**Backward.** What P-GCN cannot do is route gradients through other clients' nodes. Client ``u``
backpropagates its own loss :math:`\mathcal L_u` only through its local star — its user node and
the edges to its own items — so every gradient path that passes through another user's node is
dropped ([G] the paper gives no formula; this is the reading "gradient paths through other clients'
nodes dropped" of the issue). With :math:`c_{ui}` the LightGCN weights, direct gradients
:math:`D^{(l)} = \alpha_l\,\partial\mathcal L_u/\partial e` and edge-level item adjoints
:math:`g_{ui}`, client ``u`` runs (:func:`.local.star_backward`)

.. math::
    g^{(L)}_u = D^{(L)}_u,\quad g^{(L)}_{ui} = D^{(L)}_{i(u)},\qquad
    g^{(l)}_u = D^{(l)}_u + \sum_{i\in\mathcal I_u} c_{ui}\, g^{(l+1)}_{ui},\quad
    g^{(l)}_{ui} = D^{(l)}_{i(u)} + c_{ui}\, g^{(l+1)}_u,

where :math:`D_{i(u)}` is the part of :math:`\mathcal L_u`'s direct gradient on item ``i``. Its
layer-0 results give its gradient rows: :math:`\nabla V_i \mathrel{+}= g^{(0)}_{ui}` (plus the direct
layer-0 gradient of its negatives, which are not in its star) and, through Eq. 6,
:math:`\nabla W_i \mathrel{+}= (g^{(0)}_u + \lambda\text{-term})/\sqrt{|\mathcal I_u|}` for
``i`` in :math:`\mathcal I_u`. Summed over clients, the centralized recursion (§2.4) differs only by
the terms :math:`\sum_{v\ne u} c_{vi}\,G_v` that cross another user.

**Aggregation.** Each client uploads its ``V`` and ``W`` gradient rows as one dense ``2·N·d`` vector
through secure aggregation (lossless up to fixed point); the server applies Adam to ``V`` and ``W``.
With ``n_layers = 0`` there is nothing to drop and P-GCN is exactly centralized BPR on LightGCN+'s
layer-0 tables.

**Parties.** :mod:`.roles` lists the stages; :mod:`.server` (``V``, ``W``, Adam), :mod:`.client` (a
shard of users with the secure-aggregation stages of :mod:`fedgraphrec.protocols.secagg` mixed in),
:mod:`.local` (the star backward), :mod:`.expect` (what a node accepts: its stage order, every part it
expects, the secure sum that comes next; layers are the node's own count), :mod:`.settings`.
"""

from __future__ import annotations

from fedgraphrec.protocols.base import ProtocolSpec
from fedgraphrec.protocols.baselines.pgcn.client import PGCNClient
from fedgraphrec.protocols.baselines.pgcn.server import PGCNServer

__all__ = ["SPEC"]

SPEC = ProtocolSpec(
    name="pgcn",
    server=PGCNServer,
    client=PGCNClient,
    server_tables=("item_emb", "item_w"),
)
"""P-GCN's party programs (registered in :mod:`fedgraphrec.protocols.registry`)."""
