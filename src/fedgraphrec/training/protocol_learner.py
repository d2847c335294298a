"""The one learner every federated protocol trains through: its programs over a transport.

:class:`ProtocolLearner` builds a protocol's :class:`~fedgraphrec.protocols.base.ServerProgram` and
one :class:`~fedgraphrec.protocols.base.ClientProgram` per node (one node by default: the whole
population as one shard, at centralized speed) over a
:class:`~fedgraphrec.runtime.local.LocalTransport`, and gives the training loop what it needs:
a minibatch step or a round, evaluation embeddings, the ledger, checkpoints and — for lossless
protocols with ``verify`` — the largest deviation from the centralized oracle trained in lockstep.
Only :meth:`ProtocolLearner.connect` knows where the nodes are: the Flower engine's learner
(``fedgraphrec.engines.flower.learner``) overrides it (and the evaluation path) and shares the rest.

Protocols are looked up by name in :mod:`fedgraphrec.protocols.registry`; their programs are built
with the run's settings object (:meth:`~fedgraphrec.training.config.TrainConfig.program_settings`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.data.types import Interactions
from fedgraphrec.protocols.base import (
    ClientProgram,
    EvalSplits,
    NodeData,
    ProtocolSpec,
    ServerProgram,
    shard_of,
)
from fedgraphrec.protocols.registry import ProtocolEntry, lookup
from fedgraphrec.runtime.expect import FlowState
from fedgraphrec.runtime.ledger import Ledger
from fedgraphrec.runtime.local import LocalTransport
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.network import Adversary, Network
from fedgraphrec.runtime.state import secret_fields, state_from_arrays, state_to_arrays
from fedgraphrec.runtime.transport import Transport
from fedgraphrec.training.central import CentralLearner
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.learner_base import BatchStats, build_model, secure_init

__all__ = [
    "ProtocolLearner",
    "eval_splits",
    "init_key",
    "initial_tables",
    "node_data",
    "protocol_spec",
]


def protocol_spec(name: str, extra: Mapping[str, ProtocolEntry] | None = None) -> ProtocolSpec:
    """The party programs of the protocol registered as ``name`` (also among ``extra``).

    Raises:
        KeyError: no protocol of that name runs as party programs.
    """
    entry = lookup(name, extra)
    if entry.programs is None:
        raise KeyError(f"protocol {name!r} does not run as party programs")
    return entry.programs


def eval_splits(data: Interactions) -> EvalSplits:
    """The held-out splits a node evaluates on (``test`` masks train and valid; ``valid`` masks train)."""
    targets: dict[str, sp.csr_matrix] = {"test": data.test}
    exclude: dict[str, list[sp.csr_matrix]] = {
        "test": [data.train] + ([data.valid] if data.valid is not None else [])
    }
    if data.valid is not None:
        targets["valid"] = data.valid
        exclude["valid"] = [data.train]
    return EvalSplits(targets, exclude)


def initial_tables(
    cfg: TrainConfig, data: Interactions, init_key: bytes | None = None
) -> dict[str, torch.Tensor]:
    """The run's initial tables by the oracle's names.

    Seeded runs draw them from the public ``init`` stream; under secure init
    (:func:`~fedgraphrec.training.learner_base.secure_init`) the embedding tables come from a ChaCha20
    stream keyed by ``init_key`` (the same 32 secret bytes give the same tables on every node).
    """
    return {k: v.detach().clone() for k, v in build_model(cfg, data, init_key).named_parameters()}


def init_key(cfg: TrainConfig) -> bytes | None:
    """A fresh 32-byte key for the run's initial tables from :func:`os.urandom`, or ``None`` (seeded)."""
    return os.urandom(32) if secure_init(cfg) else None


def node_data(
    cfg: TrainConfig,
    data: Interactions,
    tables: Mapping[str, torch.Tensor] | None = None,
    init_key: bytes | None = None,
) -> NodeData:
    """What a node knows from outside the protocol: the data, the initial tables, the held-out splits."""
    tables = initial_tables(cfg, data, init_key) if tables is None else tables
    return NodeData(sp.csr_matrix(data.train), tables, eval_splits(data))


class ProtocolLearner:
    """A protocol's party programs, in process, as a learner of the training loop (module docstring).

    Args:
        cfg: the run configuration (``cfg.protocol`` names the protocol).
        data: the dataset.
        nodes: how many nodes host the clients (shards ``u mod nodes``); 1 runs everybody as one shard.
        adversary: an active server that may alter the sealed messages it forwards (integrity audits).
    """

    def __init__(
        self, cfg: TrainConfig, data: Interactions, nodes: int = 1, adversary: Adversary | None = None
    ) -> None:
        self.spec = protocol_spec(cfg.protocol)
        self.init_key = init_key(cfg)  # secure init: every party's tables from one secret key
        tables = initial_tables(cfg, data, self.init_key)
        self.oracle: Any = None
        if cfg.verify:
            if not self.spec.lossless:
                raise ValueError(f"{cfg.protocol} is not lossless; --verify does not apply")
            self.oracle = CentralLearner(cfg, data)
            with torch.no_grad():  # the oracle starts from the protocol's tables (secure_init draws fresh)
                for name, param in self.oracle.model.named_parameters():
                    param.copy_(tables[name])
        self.max_deviation = 0.0
        self.settings = cfg.program_settings()
        n_users, n_items = data.train.shape
        self.net = Network(
            n_users,
            crypto="real" if cfg.crypto == "real" else "accounted",
            transcripts=cfg.transcripts,
            protocol=self.spec.name,
        )
        self.net.adversary = adversary
        self.programs: dict[int, ClientProgram[Any]] = {}
        self.transport = self.connect(cfg, data, tables, nodes)
        server_tables = {  # a name also covers its dotted children ("Ws" covers "Ws.0", "Ws.1", ...)
            k: v
            for k, v in tables.items()
            if any(k == n or k.startswith(n + ".") for n in self.spec.server_tables)
        }
        self.server: ServerProgram = self.spec.server(
            self.settings, self.transport, n_users, n_items, server_tables
        )
        self.server.setup()
        scores_itself = self.spec.client.scorer is not ClientProgram.scorer  # e.g. NeuMF
        self.score_users = self._score_users if scores_itself and self.programs else None
        self.last_round: dict[str, int] = {}
        if self.server.schedule == "round":
            self.train_round = self._train_round

    def connect(
        self, cfg: TrainConfig, data: Interactions, tables: Mapping[str, torch.Tensor], nodes: int
    ) -> Transport:
        """The transport to the nodes: ``nodes`` client programs in this process (shards ``u mod nodes``)."""
        shared = node_data(cfg, data, tables)
        shards = shard_of(data.train.shape[0], list(range(nodes)))
        self.programs = {k: self.spec.client(self.settings, ids, shared) for k, ids in shards.items()}
        return LocalTransport(self.net, self.programs)

    # ------------------------------------------------------------------ the loop's interface
    @property
    def ledger(self) -> Ledger | None:
        """The communication ledger."""
        return self.net.ledger

    @property
    def protocol(self) -> ServerProgram:
        """The server program (what the loop checkpoints and reports on)."""
        return self.server

    def train_batch(self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> BatchStats:
        """One minibatch (and the oracle's, when verifying)."""
        stats = self.server.train_step(users, pos, neg)
        if self.oracle is not None:
            self.oracle.train_batch(users, pos, neg)
            reference = self.oracle.parameters_for_verification()
            for name, fed in self.tables().items():
                ref = reference[name]
                dev = ((fed - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
                self.max_deviation = max(self.max_deviation, dev)
        return BatchStats(stats.loss, stats.bpr, stats.reg)

    def _train_round(self, round_index: int) -> BatchStats:
        stats = self.server.train_round(round_index)
        self.last_round = {
            "clients": stats.clients,
            "clients_lost": stats.clients_lost,
            "clients_recovered": stats.clients_recovered,
        }
        return BatchStats(stats.loss, stats.bpr, stats.reg)

    def pop_deviation(self) -> float | None:
        """Largest deviation from the oracle since the last call (``None`` when not verifying)."""
        if self.oracle is None:
            return None
        dev, self.max_deviation = self.max_deviation, 0.0
        return dev

    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Final user and item representations: the prediction stages, then every shard's rows."""
        self.server.predict()
        users: list[np.ndarray] = []
        rows: list[torch.Tensor] = []
        items = self.server.items_for_evaluation()
        for program in self.programs.values():
            ids, U, V = program.prediction()
            users.append(ids)
            rows.append(U)
            if items is None:
                items = V
        if items is None:
            raise RuntimeError(f"{self.spec.name}: neither the server nor a node holds the final item table")
        order = torch.from_numpy(np.concatenate(users))
        stacked = torch.cat(rows)
        U_all = torch.empty_like(stacked)
        U_all[order] = stacked
        return U_all, items

    @torch.no_grad()
    def _score_users(self, users: torch.Tensor) -> torch.Tensor:
        """Scores of ``users`` over every item, each from its node's scorer (NeuMF-like protocols)."""
        request = Message(dict(self.server.evaluation_parts()))
        ids = users.numpy()
        out: torch.Tensor | None = None
        for program in self.programs.values():
            score = program.scorer(request)
            assert score is not None
            mine = np.flatnonzero(np.isin(ids, program.clients))
            if not len(mine):
                continue
            rows = score(torch.from_numpy(np.searchsorted(program.clients, ids[mine])))
            if out is None:
                out = torch.empty(len(ids), rows.shape[1], dtype=rows.dtype)
            out[torch.from_numpy(mine)] = rows
        assert out is not None
        return out

    def tables(self) -> dict[str, torch.Tensor]:
        """The current parameters by the oracle's names, assembled from their owners' rows."""
        parts: dict[str, list[tuple[np.ndarray, torch.Tensor]]] = {}
        owners: list[ServerProgram | ClientProgram[Any]] = [self.server, *self.programs.values()]
        for owner in owners:
            for name, (ids, rows) in owner.owned_rows().items():
                parts.setdefault(name, []).append((ids, rows))
        out: dict[str, torch.Tensor] = {}
        for name, pieces in parts.items():
            ids = np.concatenate([p[0] for p in pieces])
            rows = torch.cat([p[1] for p in pieces])
            table = torch.empty((int(ids.max()) + 1 if len(ids) else 0, *rows.shape[1:]), dtype=rows.dtype)
            table[torch.from_numpy(ids)] = rows
            out[name] = table
        return out

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Every node's state, the server's, the ledger (and the oracle's).

        The nodes' key material (their state fields marked :data:`~fedgraphrec.runtime.state.SECRET`)
        is kept apart under ``"secrets"``, which the checkpoint encrypts under the user's key.
        """
        nodes: dict[int, dict[str, np.ndarray]] = {}
        secrets: dict[int, dict[str, np.ndarray]] = {}
        for k, p in self.programs.items():
            arrays = state_to_arrays(p.state)
            hidden = [name for name in secret_fields(type(p.state)) if name in arrays]
            secrets[k] = {name: arrays.pop(name) for name in hidden}
            nodes[k] = arrays
        state: dict[str, Any] = {
            "nodes": nodes,
            "secrets": secrets,
            "server": self.server.state_dict(),
            "ledger": self.net.ledger.state_dict(),
            "step": self.net.step,
        }
        if isinstance(self.transport, LocalTransport):  # where each node is in its stage order
            state["flows"] = {k: e.flow.to_record() for k, e in self.transport.endpoints.items()}
        if self.oracle is not None:
            state["oracle"] = self.oracle.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (set-up has run again; its keys are replaced by the saved ones)."""
        secrets = state.get("secrets", {})
        for k, program in self.programs.items():
            arrays = {**state["nodes"][k], **secrets.get(k, {})}
            program.state = state_from_arrays(type(program.state), arrays)
        self.server.load_state_dict(state["server"])
        self.net.ledger.load_state_dict(state["ledger"])
        self.net.begin_step(int(state["step"]))
        if isinstance(self.transport, LocalTransport):
            for k, endpoint in self.transport.endpoints.items():
                endpoint.flow = FlowState.from_record(state.get("flows", {}).get(k, {}))
        if self.oracle is not None and "oracle" in state:
            self.oracle.load_state_dict(state["oracle"])
