"""LP-GCN: lossless, privacy-preserving federated LightGCN (spec ``lpgcn.md``) as two party programs.

Where each algorithm lives:

- Algorithm 1 (minibatch body), 4 (forward), 5/9 (loss and gradients), 6 (backward), 7 (LightGCN+
  update of W) and §4.6 (prediction): the client shard's stages in
  :mod:`~fedgraphrec.protocols.lpgcn.client_train`, the server's rounds in
  :mod:`~fedgraphrec.protocols.lpgcn.server_train`;
- Algorithm 2 (initialization: keys, S, tokens, virtual items) with verification, Algorithm 3
  (server preprocessing) and Algorithm 8's set-up: :mod:`~fedgraphrec.protocols.lpgcn.client_setup`
  and :mod:`~fedgraphrec.protocols.lpgcn.server_setup`;
- virtual items, upload order, tokens: :mod:`~fedgraphrec.protocols.lpgcn.holdings`;
- greedy minimum set cover and convolution-item assignment: :mod:`~fedgraphrec.protocols.lpgcn.cover`;
- names both roles share: :mod:`~fedgraphrec.protocols.lpgcn.roles`; settings:
  :mod:`~fedgraphrec.protocols.lpgcn.settings`.

Run it with :class:`~fedgraphrec.training.ProtocolLearner` (``protocol = "lpgcn"``) in process, or
on Flower through the generic engine; :data:`SPEC` names the programs.
"""

from fedgraphrec.protocols.base import ProtocolSpec
from fedgraphrec.protocols.lpgcn.client import LPGCNClient
from fedgraphrec.protocols.lpgcn.server import LPGCNServer

__all__ = ["SPEC"]

SPEC = ProtocolSpec(
    name="lpgcn",
    server=LPGCNServer,
    client=LPGCNClient,
    server_tables=("item_emb", "item_w"),
    lossless=True,
)
"""LP-GCN's party programs (lossless: ``--verify`` compares with centralized LightGCN / LightGCN+)."""
