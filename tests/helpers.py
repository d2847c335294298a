"""Small random bipartite graphs with the pathologies protocols must survive."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp


def random_train(n_users: int = 13, n_items: int = 17, density: float = 0.25, seed: int = 0) -> sp.csr_matrix:
    """Binary train matrix with an item nobody trained on, a one-item user and a one-user item."""
    rng = np.random.default_rng(seed)
    dense = rng.random((n_users, n_items)) < density
    dense[:, -1] = False  # item with no training users
    dense[0, :] = False
    dense[0, 0] = True  # user with one item
    dense[:, 1] = False
    dense[2, 1] = True  # item held by one user
    for u in range(1, n_users):  # every other user has >= 2 items
        if dense[u].sum() < 2:
            dense[u, 2:4] = True
    return sp.csr_matrix(dense.astype(np.float32))


def rel_err(a, b) -> float:
    """Largest absolute difference, relative to the reference's largest magnitude."""
    return (a - b).abs().max().item() / max(b.abs().max().item(), 1e-300)


def assert_forward_and_loss_match(rec, us, vs, oracle_loss, rtol: float) -> None:
    """Every layer's embeddings and the batch loss of a protocol step equal the oracle's."""
    for layer in range(len(us)):
        assert rel_err(rec.user_layers[layer], us[layer].detach()) <= rtol
        assert rel_err(rec.item_layers[layer], vs[layer].detach()) <= rtol
    assert abs(rec.loss - oracle_loss) <= rtol * abs(oracle_loss)


class ProgramsRun:
    """A protocol's party programs over the in-process transport, built from raw tables (tests)."""

    def __init__(
        self,
        spec,
        settings,
        train: sp.csr_matrix,
        tables: dict,
        nodes: int = 1,
        crypto: str = "accounted",
        transcripts: bool = False,
        adversary=None,
    ) -> None:
        from fedgraphrec.protocols.base import NodeData, shard_of
        from fedgraphrec.runtime.local import LocalTransport
        from fedgraphrec.runtime.network import Network

        n_users, n_items = train.shape
        self.net = Network(n_users, crypto=crypto, transcripts=transcripts, protocol=spec.name)
        self.net.adversary = adversary
        data = NodeData(sp.csr_matrix(train), tables)
        shards = shard_of(n_users, list(range(nodes)))
        self.programs = {k: spec.client(settings, ids, data) for k, ids in shards.items()}
        self.transport = LocalTransport(self.net, self.programs)
        server_tables = {k: tables[k] for k in spec.server_tables}
        self.server = spec.server(settings, self.transport, n_users, n_items, server_tables)
        self.server.setup()

    def gather(self, get) -> object:
        """Rows ``get(program)`` (clients along dim ``axis`` 1 for stacked tables) in client order."""
        import torch

        ids = np.concatenate([p.clients for p in self.programs.values()])
        rows = torch.cat([get(p) for p in self.programs.values()], dim=-2)
        out = torch.empty_like(rows)
        out[..., torch.from_numpy(ids), :] = rows
        return out


def count_replays(ledger: Any, patch: pytest.MonkeyPatch) -> list[bool]:
    """Every ``ledger.replay`` call's answer from now on (the transport's replays of static layouts)."""
    answers: list[bool] = []
    replay = ledger.replay

    def counted(booked: Any) -> bool:
        answers.append(replay(booked))
        return answers[-1]

    patch.setattr(ledger, "replay", counted)
    return answers
