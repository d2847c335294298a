"""GNN4FR's programs over the in-process transport, from a train matrix and initial tables.

The training loop uses :class:`~fedgraphrec.training.protocol_learner.ProtocolLearner`; attacks,
audits, tests and benchmarks that start from a bare train matrix build the same programs here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.protocols.base import NodeData, shard_of
from fedgraphrec.protocols.gnn4fr.client import GNN4FRClient
from fedgraphrec.protocols.gnn4fr.server import GNN4FRServer
from fedgraphrec.protocols.gnn4fr.settings import GNN4FRSettings
from fedgraphrec.runtime.local import LocalTransport
from fedgraphrec.runtime.network import Adversary, CryptoMode, Network

__all__ = ["LocalGNN4FR", "local_gnn4fr"]


@dataclass
class LocalGNN4FR:
    """A GNN4FR run in this process: the server, the nodes' programs and the network."""

    server: GNN4FRServer
    nodes: dict[int, GNN4FRClient]
    net: Network

    def tables(self) -> dict[str, torch.Tensor]:
        """Current user and item tables, assembled from their owners' rows."""
        out: dict[str, torch.Tensor] = {}
        owners: list[GNN4FRServer | GNN4FRClient] = [self.server, *self.nodes.values()]
        for owner in owners:
            for name, (ids, rows) in owner.owned_rows().items():
                if name not in out:
                    n = self.server.n_clients if name == "user_emb" else self.server.n_items
                    out[name] = torch.zeros((n, rows.shape[1]), dtype=rows.dtype)
                out[name][torch.from_numpy(np.asarray(ids))] = rows
        return out

    def predict(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Algorithm 6: final user rows and the item table the clients assembled (node 0's)."""
        self.server.predict()
        U = torch.zeros((self.server.n_clients, 0))
        V: torch.Tensor | None = None
        for program in self.nodes.values():
            ids, rows, items = program.prediction()
            if U.shape[1] != rows.shape[1]:
                U = rows.new_zeros((self.server.n_clients, rows.shape[1]))
            U[torch.from_numpy(ids)] = rows
            V = items if V is None else V
        assert V is not None
        return U, V


def local_gnn4fr(
    train: sp.csr_matrix,
    user0: torch.Tensor,
    item0: torch.Tensor,
    settings: GNN4FRSettings,
    *,
    nodes: int = 1,
    crypto: CryptoMode = "accounted",
    transcripts: bool = False,
    adversary: Adversary | None = None,
) -> LocalGNN4FR:
    """Build and set up GNN4FR over ``nodes`` in-process nodes (clients ``u`` on node ``u mod nodes``)."""
    train = sp.csr_matrix(train, dtype=np.float32)
    n, m = train.shape
    net = Network(n, crypto=crypto, transcripts=transcripts, protocol="gnn4fr")
    net.adversary = adversary
    data = NodeData(train, {"user_emb": user0, "item_emb": item0})
    settings = replace(settings, crypto=crypto)  # each node's own configuration says the mode
    programs = {k: GNN4FRClient(settings, ids, data) for k, ids in shard_of(n, list(range(nodes))).items()}
    server = GNN4FRServer(settings, LocalTransport(net, programs), n, m)
    server.setup()
    return LocalGNN4FR(server, programs, net)
