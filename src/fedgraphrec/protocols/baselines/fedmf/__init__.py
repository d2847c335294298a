"""FedMF (Chai et al., "Secure Federated Matrix Factorization", IEEE Intelligent Systems 2020).

Matrix factorisation with the BPR loss, as LP-GCN's Table 4 runs it, as two party programs:
:class:`~.server.FedMFServer` (the item table and its Adam; one federated step per minibatch) and
:class:`~.client.FedMFClient` (a node's users: their rows, their local BPR, their item gradients
into the secure sum). The original protects the item gradients with Paillier encryption; here they
go through secure aggregation (:mod:`fedgraphrec.protocols.secagg`: pairwise masks, Shamir-shared
seeds, dropout recovery), which gives the server the same thing, the sum, at a fraction of the cost.
Lossless: training is centralized BPR-MF up to the fixed-point resolution of the sum (``--verify``).
"""

from fedgraphrec.protocols.base import ProtocolSpec
from fedgraphrec.protocols.baselines.fedmf.client import FedMFClient
from fedgraphrec.protocols.baselines.fedmf.server import FedMFServer

__all__ = ["SPEC"]


SPEC = ProtocolSpec("fedmf", FedMFServer, FedMFClient, server_tables=("item_emb",), lossless=True)
"""FedMF's programs (lossless: ``--verify`` against centralized BPR-MF)."""
