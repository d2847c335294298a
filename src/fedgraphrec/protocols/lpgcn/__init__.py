"""LP-GCN: lossless, privacy-preserving federated LightGCN (spec ``lpgcn.md``).

Where each algorithm lives:

- Algorithm 1 (training loop body), 4 (forward), 5/9 (loss and gradients), 6 (backward):
  :mod:`~fedgraphrec.protocols.lpgcn.protocol`, :class:`LPGCN` methods ``train_step``,
  ``forward_propagation``, ``loss_and_gradients``, ``backward_propagation``;
- Algorithm 2 (initialization) with verification, Algorithm 3 (server preprocessing):
  :func:`~fedgraphrec.protocols.lpgcn.setup.initialization`;
- greedy minimum set cover and convolution-item assignment: :mod:`~fedgraphrec.protocols.lpgcn.cover`;
- communication cost and utilisation (Eqs. 30-32, Fig. 13): :mod:`~fedgraphrec.protocols.lpgcn.communication`;
- the same algorithms as separate party programs (client shards on nodes, the relay server, rounds
  over a transport such as Flower): :mod:`~fedgraphrec.protocols.lpgcn.distributed` (``shard.py``:
  the client program; ``relay.py``: the server role).
"""

from fedgraphrec.protocols.common import StepRecord
from fedgraphrec.protocols.lpgcn.protocol import LPGCN

__all__ = ["LPGCN", "StepRecord"]
