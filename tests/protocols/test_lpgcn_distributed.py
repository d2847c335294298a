"""LP-GCN as party programs (node shards + relay server) equals the in-process engine.

No Flower here: :class:`LocalTransport` runs every node's :class:`ShardClient` in this process with
arrays copied across each round, so these checks hold for any transport.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from fedgraphrec.data.synthetic import synthetic_interactions
from fedgraphrec.models.lightgcn import init_table
from fedgraphrec.protocols.lpgcn import LPGCN
from fedgraphrec.protocols.lpgcn.distributed import (
    LocalTransport,
    LostNodeError,
    RelayServer,
    ShardSettings,
    rounds_per_minibatch,
)
from fedgraphrec.seeding import torch_generator
from fedgraphrec.training.sampler import BPRSampler

N_LAYERS, DIM, ALPHA, SEED, LR, REG = 2, 4, 2, 3, 0.01, 1e-3


class _Source:
    def __init__(self, train: sp.csr_matrix, user0: torch.Tensor, item0: torch.Tensor) -> None:
        self.train, self.user0, self.item0 = train, user0, item0

    def real_items(self, users: np.ndarray) -> sp.csr_matrix:
        return self.train[users]

    def initial_rows(self, users: np.ndarray, items: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        return self.user0[torch.from_numpy(users)], self.item0[torch.from_numpy(items)]


@pytest.fixture(scope="module")
def world() -> tuple[sp.csr_matrix, torch.Tensor, torch.Tensor]:
    data = synthetic_interactions(30, 40, mean_degree=5.0, seed=0)
    gen = torch_generator(SEED, "init")
    user0 = init_table(30, DIM, 0.1, gen, torch.float64).detach()
    item0 = init_table(40, DIM, 0.1, gen, torch.float64).detach()
    return sp.csr_matrix(data.train), user0, item0


def _settings(**kw: object) -> ShardSettings:
    base: dict[str, object] = dict(
        n_layers=N_LAYERS, dim=DIM, dtype="float64", lr=LR, reg=REG, alpha=ALPHA, seed=SEED, n_items=40
    )
    return ShardSettings(**{**base, **kw})  # type: ignore[arg-type]


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def test_shards_equal_in_process_step_by_step(
    world: tuple[sp.csr_matrix, torch.Tensor, torch.Tensor],
) -> None:
    train, user0, item0 = world
    settings = _settings()
    nodes = [7, 8, 9]
    transport = LocalTransport(settings, _Source(train, user0, item0), nodes)
    server = RelayServer(transport, settings, 30, nodes)
    server.setup()
    ref = LPGCN(train, user0, item0, N_LAYERS, alpha=ALPHA, seed=SEED, lr=LR, reg=REG, crypto="real")
    batches = BPRSampler(train, SEED).batches(0, 16)
    for _ in range(3):
        users, pos, neg = next(batches)
        got = server.train_step(users.numpy(), pos.numpy(), neg.numpy())
        want = ref.train_step(users, pos, neg).loss
        assert got == pytest.approx(want, rel=1e-12)
    pred = server.predict()
    U, V = ref.final_embeddings()
    assert _rel(pred.user, U) <= 1e-10 and _rel(pred.item, V) <= 1e-10
    assert _rel(pred.user0, ref.user_emb.detach()) <= 1e-10
    assert _rel(pred.item0, ref.item_emb.detach()) <= 1e-10
    assert len(transport.ops) == 5 + 3 * rounds_per_minibatch(N_LAYERS) + N_LAYERS
    # S and user rows stay on the nodes: the server's state holds neither
    for state in transport.states.values():
        assert state["S"].tobytes() not in server.ct.tobytes()
        assert "priv" not in state  # key pairs are dropped after set-up


def test_lost_node_is_named(world: tuple[sp.csr_matrix, torch.Tensor, torch.Tensor]) -> None:
    train, user0, item0 = world
    settings = _settings()
    transport = LocalTransport(settings, _Source(train, user0, item0), [1, 2])
    server = RelayServer(transport, settings, 30, [1, 2])
    transport.dead.add(2)
    with pytest.raises(LostNodeError, match=r"\[2\].*no dropout recovery"):
        server.setup()


@pytest.mark.parametrize(
    ("field", "value"), [("n_layers", 0), ("dim", 0), ("dtype", "float16"), ("alpha", -1), ("n_items", 0)]
)
def test_bad_settings_name_the_parameter(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        _settings(**{field: value})


def test_relay_needs_nodes_and_users() -> None:
    with pytest.raises(ValueError, match="nodes"):
        RelayServer(LocalTransport(_settings(), None, []), _settings(), 3, [])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="n_users"):
        RelayServer(LocalTransport(_settings(), None, [1]), _settings(), 0, [1])  # type: ignore[arg-type]
