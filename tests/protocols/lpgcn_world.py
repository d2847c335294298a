"""LP-GCN party programs over the in-process transport, with the centralized oracle's tables."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.models.lightgcn import LightGCN, LightGCNPlus
from fedgraphrec.models.propagation import NormalizedBipartite
from fedgraphrec.protocols.base import NodeData, shard_of
from fedgraphrec.protocols.lpgcn import SPEC
from fedgraphrec.protocols.lpgcn.client import LPGCNClient
from fedgraphrec.protocols.lpgcn.server import LPGCNServer
from fedgraphrec.protocols.lpgcn.settings import LPGCNSettings
from fedgraphrec.runtime.local import LocalTransport
from fedgraphrec.runtime.network import Adversary, Network


@dataclass
class World:
    """A server program, its nodes' client programs and the network they share."""

    server: LPGCNServer
    programs: dict[int, LPGCNClient]
    net: Network
    debug: dict[int, dict[str, list[torch.Tensor]]] = field(default_factory=dict)

    def step(self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> float:
        return self.server.train_step(users, pos, neg).loss

    def tables(self) -> dict[str, torch.Tensor]:
        """Owned rows of every party, assembled by the oracle's table names."""
        parts: dict[str, list[tuple[np.ndarray, torch.Tensor]]] = {}
        for owner in [self.server, *self.programs.values()]:
            for name, (ids, rows) in owner.owned_rows().items():
                parts.setdefault(name, []).append((ids, rows))
        out = {}
        for name, pieces in parts.items():
            ids = np.concatenate([p[0] for p in pieces])
            rows = torch.cat([p[1] for p in pieces])
            table = torch.zeros((int(ids.max()) + 1, rows.shape[1]), dtype=rows.dtype)
            table[torch.from_numpy(ids)] = rows
            out[name] = table
        return out

    def recorded(self, name: str, n_rows: int) -> list[torch.Tensor]:
        """What every node recorded under ``name`` since :meth:`reset_debug`, as global tables.

        ``user_*`` records are indexed by the node's clients, ``conv_*`` by its convolution-items;
        rows nobody records (items nobody holds) stay zero.
        """
        out: list[torch.Tensor] = []
        for node, program in self.programs.items():
            ids = program.clients if name.startswith("user") else program.state.conv_items
            for k, t in enumerate(self.debug[node].get(name, [])):
                if len(out) <= k:
                    out.append(torch.zeros((n_rows, t.shape[1]), dtype=t.dtype))
                out[k][torch.from_numpy(ids)] = t
        return out

    def reset_debug(self) -> None:
        for node, program in self.programs.items():
            self.debug[node] = {}
            program.debug = self.debug[node]

    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        self.server.predict()
        users, rows, items = [], [], None
        for program in self.programs.values():
            ids, U, V = program.prediction()
            users.append(ids)
            rows.append(U)
            items = V
        U_all = torch.zeros((self.server.n_clients, rows[0].shape[1]), dtype=rows[0].dtype)
        U_all[torch.from_numpy(np.concatenate(users))] = torch.cat(rows)
        assert items is not None
        return U_all, items


def oracle(train: sp.csr_matrix, plus: bool, n_layers: int, seed: int = 2, dim: int = 4) -> Any:
    graph = NormalizedBipartite.from_train(train, dtype=torch.float64)
    gen = torch.Generator().manual_seed(seed)
    if plus:
        return LightGCNPlus(
            graph, train, dim=dim, n_layers=n_layers, init_std=0.3, generator=gen, dtype=torch.float64
        )
    return LightGCN(graph, dim=dim, n_layers=n_layers, init_std=0.3, generator=gen, dtype=torch.float64)


def world(
    train: sp.csr_matrix,
    tables: dict[str, torch.Tensor],
    nodes: int = 1,
    *,
    transcripts: bool = False,
    adversary: Adversary | None = None,
    **settings: Any,
) -> World:
    """Set-up of LP-GCN over ``nodes`` in-process nodes (clients ``u`` on node ``u mod nodes``)."""
    s = LPGCNSettings(**{"seed": 3, "lr": 0.05, "reg": 0.01, **settings})
    n, m = train.shape
    net = Network(n, crypto=s.crypto, transcripts=transcripts, protocol="lpgcn")  # type: ignore[arg-type]
    net.adversary = adversary
    data = NodeData(sp.csr_matrix(train), {k: v.detach() for k, v in tables.items()}, None)
    programs = {k: LPGCNClient(s, ids, data) for k, ids in shard_of(n, list(range(nodes))).items()}
    transport = LocalTransport(net, programs)
    server_tables = {k: v.detach() for k, v in tables.items() if k in SPEC.server_tables}
    server = LPGCNServer(s, transport, n, m, server_tables)
    server.setup()
    return World(server, programs, net)
