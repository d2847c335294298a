"""GNN4FR: lossless federated LightGCN by sub-graph expansion (spec ``gnn4fr.md``), as party programs.

Where the spec's algorithms live: Algorithm 2 (initialize) and 3 (expand the local sub-graph):
:meth:`.server_setup.SetupServer.setup` with the client stages ``setup/*`` of :mod:`.client_setup`
and :mod:`.graph`;
Algorithm 4 (forward): ``GNN4FRClient.stage_step_forward``; the loss: ``stage_step_negatives`` and
``stage_step_loss``; Algorithm 5 (backward): ``stage_step_gradients`` / ``stage_step_backward``
(the transposed backward, default) and :mod:`.paper` (Algorithm 5 and the secret-shared aggregation
as printed, ``paper_literal = true``); Algorithm 6 (predict): ``GNN4FRServer.predict`` with
``stage_predict_items`` / ``stage_predict_deliver``. Names both roles share are in :mod:`.roles`.
"""

from fedgraphrec.protocols.base import ProtocolSpec
from fedgraphrec.protocols.gnn4fr.client import GNN4FRClient
from fedgraphrec.protocols.gnn4fr.server import GNN4FRServer

__all__ = ["SPEC"]

SPEC = ProtocolSpec(
    name="gnn4fr",
    server=GNN4FRServer,
    client=GNN4FRClient,
    lossless=True,
)
"""GNN4FR's programs (registered in :mod:`fedgraphrec.protocols.registry`)."""
