"""FedGRec: federated graph recommendation with lazy latent embeddings (spec ``fedgrec.md``).

Algorithm 1 as two party programs: :class:`~.server.FedGRecServer` (the warm-up, lines 2–9, is
:meth:`~.server.FedGRecServer.warm_up`; a training round, lines 10–24, is
:meth:`~.server.FedGRecServer.train_round` with Steps 1–4 named) and :class:`~.client.FedGRecClient`
(a node's users: the warm-up's inputs, Steps 1–3 batched over its sampled users in :mod:`.local`,
its side of Step 4's secure sum, :mod:`fedgraphrec.protocols.secagg`). Step 1's draws are in
:mod:`.sampling`; ``roles.py`` names the stages. FedeRank (``K = 0``) and FCF (``K = 0`` with FCF's
squared error) run the same programs.
"""

from fedgraphrec.protocols.base import ProtocolSpec
from fedgraphrec.protocols.fedgrec.client import FedGRecClient
from fedgraphrec.protocols.fedgrec.server import FedGRecServer

__all__ = ["FCF", "FEDERANK", "SPEC"]

SPEC = ProtocolSpec("fedgrec", FedGRecServer, FedGRecClient, ("item_emb",))
"""FedGRec-K (:class:`FedGRecSettings`)."""
FEDERANK = ProtocolSpec("federank", FedGRecServer, FedGRecClient, ("item_emb",))
"""FedeRank: FedGRec with ``K = 0`` (federated BPR-MF; :class:`FedeRankSettings`)."""
FCF = ProtocolSpec("fcf", FedGRecServer, FedGRecClient, ("item_emb",))
"""FCF: ``K = 0`` with FCF's confidence-weighted squared error (:class:`FCFSettings`)."""
