"""The one interface every federated protocol implements: a server program and a client program.

A protocol is two role programs that talk only through a
:class:`~fedgraphrec.runtime.transport.Transport` (as Flower's SecAgg+ workflow and mod do):

* :class:`ServerProgram` — the server role. It holds only what the server may hold (public
  settings, routing, item tables where the protocol gives it one), runs the set-up rounds, one
  training step (a minibatch of triples, :attr:`~ServerProgram.schedule` ``"minibatch"``) or one
  communication round (``"round"``) at a time, and the prediction rounds. Every stage is one
  :meth:`Transport.round <fedgraphrec.runtime.transport.Transport.round>`.
* :class:`ClientProgram` — the client role for a *shard* of clients hosted by one node: tensors
  indexed by the shard's clients, so the in-process engine with one shard runs the whole population
  at centralized speed and a Flower deployment runs one shard per SuperNode with the same code. Its
  mutable state is one typed dataclass (:attr:`ClientProgram.state`); :meth:`ClientProgram.handle`
  dispatches a stage to the method ``stage_<name>`` (``"setup/keys"`` → ``stage_setup_keys``).

A :class:`ProtocolSpec` names the two programs and how to build them from a run's settings; the
training loop (``fedgraphrec.training``) and the Flower engine (``fedgraphrec.engines.flower``)
drive every protocol through it, so no protocol has a loop of its own.

Each protocol's package keeps the names both roles share — phase names, part names, message kinds
— in ``roles.py`` (as Flower keeps SecAgg+'s ``Stage`` and ``Key`` in one module), the programs in
``server.py`` and ``client.py``, and its typed settings in ``settings.py``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, TypeVar

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.evaluation.federated import split_sums
from fedgraphrec.runtime.expect import Expect, Expectation, StageFlow
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part
from fedgraphrec.runtime.transport import Transport

__all__ = [
    "EVALUATE_ITEMS",
    "EVALUATE_STAGE",
    "ClientProgram",
    "EvalSplits",
    "NodeData",
    "ProtocolSpec",
    "ServerProgram",
    "StepStats",
    "shard_of",
    "stage_method",
]

S = TypeVar("S")
EVALUATE_STAGE = "evaluate"
"""The federated evaluation stage (:meth:`ServerProgram.evaluate`); it follows the prediction stages."""
EVALUATE_ITEMS = Expect("evaluate/items", kind="item_embedding", shape="broadcast", optional=True)
"""What a node may receive in ``evaluate`` (:meth:`ServerProgram.evaluation_parts`): the final items."""
Schedule = Literal["minibatch", "round"]


@dataclass(frozen=True)
class StepStats:
    """What one training step (minibatch or round) reports: the loss, split, and who took part."""

    loss: float
    bpr: float
    reg: float
    clients: int = 0
    clients_lost: int = 0
    clients_recovered: int = 0


@dataclass(frozen=True)
class EvalSplits:
    """Held-out rows a node scores its clients on: per split, the target and what to mask."""

    targets: dict[str, sp.csr_matrix]
    exclude: dict[str, list[sp.csr_matrix]]


@dataclass(frozen=True)
class NodeData:
    """What a node knows from outside the protocol.

    In a deployment each client brings its own interactions; the simulation engines hand a node the
    dataset and the run's initial tables (drawn once from the public ``init`` stream, LP-GCN spec
    §11.19), and the client program keeps only its own clients' rows of them at set-up.

    Attributes:
        train: binary user × item training matrix (a client program reads its clients' rows only).
        tables: the run's initial tables by the oracle's names (``user_emb``, ``item_emb``, ...).
        eval: held-out splits for federated evaluation (``None``: the node cannot evaluate).
    """

    train: sp.csr_matrix
    tables: Mapping[str, torch.Tensor]
    eval: EvalSplits | None = None


def shard_of(n_clients: int, nodes: list[int]) -> dict[int, np.ndarray]:
    """Clients ``u`` assigned to ``nodes[u mod len(nodes)]`` (sorted node ids: a reproducible sharding)."""
    if not nodes:
        raise ValueError("there are no nodes to host the clients")
    ids = np.arange(n_clients, dtype=np.int64)
    return {node: ids[k :: len(nodes)] for k, node in enumerate(sorted(nodes))}


def stage_method(stage: str) -> str:
    """The client method that handles ``stage``: ``"setup/keys"`` → ``"stage_setup_keys"``."""
    return "stage_" + stage.replace("/", "_").replace("-", "_")


class ClientProgram(ABC, Generic[S]):
    """The client role for a shard of clients (module docstring).

    Subclasses set :attr:`state` (a dataclass of arrays, tensors and scalars) in :meth:`init_state`
    or in their first stage, and implement one ``stage_<name>(step, request) -> Message`` per stage.

    Args:
        settings: the run's public settings (the protocol's settings dataclass).
        clients: the global ids of the clients this node hosts (sorted).
        data: what the node knows from outside the protocol (:class:`NodeData`).
    """

    state: S
    occurrence: int = 0
    """How many times the current stage ran before in this step (set by the node, e.g. a layer)."""

    def __init__(self, settings: Any, clients: np.ndarray, data: NodeData | None) -> None:
        self.settings = settings
        self.clients = np.asarray(clients, dtype=np.int64)
        self.data = data
        self.init_state()

    def init_state(self) -> None:
        """Build the shard's own state once the common fields are set (called by ``__init__``).

        Every client program takes the same constructor arguments, so a protocol states here only
        what its shard keeps (its rows of the data and of the initial tables, :attr:`state`).
        """

    def node_data(self, needs: str) -> NodeData:
        """:attr:`data`, which this protocol's node cannot do without (``needs`` says why)."""
        if self.data is None:
            raise ValueError(needs)
        return self.data

    def own_train(self, needs: str) -> sp.csr_matrix:
        """This shard's rows of the training matrix, indices sorted (``needs``: as :meth:`node_data`)."""
        rows = sp.csr_matrix(self.node_data(needs).train[self.clients])
        rows.sort_indices()
        return rows

    def initial_rows(self, name: str) -> torch.Tensor:
        """A private copy of this shard's rows of the initial table ``name`` (e.g. ``user_emb``)."""
        return (
            self.node_data(f"{name}: this node has no initial tables")
            .tables[name][torch.from_numpy(self.clients)]
            .detach()
            .clone()
        )

    def positions(self, ids: Any) -> np.ndarray:
        """Positions in :attr:`clients` of the global ids ``ids`` the server named.

        Raises:
            ValueError: one of them is not hosted here.
        """
        ids = np.asarray(ids, dtype=np.int64)
        pos = np.searchsorted(self.clients, ids)
        if len(ids) and (pos.max() >= len(self.clients) or not np.array_equal(self.clients[pos], ids)):
            raise ValueError("the server named users this node does not host")
        return pos

    def handle(self, stage: str, step: int, request: Message) -> Message:
        """Answer one request: dispatch to ``stage_<name>``.

        Raises:
            ValueError: the protocol has no such stage.
        """
        method: Callable[[int, Message], Message] | None = getattr(self, stage_method(stage), None)
        if method is None:
            raise ValueError(f"{type(self).__name__}: unknown stage {stage!r}")
        return method(step, request)

    def group_key(self) -> SharedKey | None:
        """The clients' shared key :math:`S`, once agreed (protocols without one return ``None``)."""
        return None

    # ------------------------------------------------------------------ what the node accepts
    def stage_flow(self) -> StageFlow | None:
        """The order of this program's stages, which the node enforces (``None``: it refuses all)."""
        return None

    def expect(self, stage: str) -> Expectation | None:
        """The parts expected in ``stage``, from the program's own state (``None``: refused)."""
        return None

    def begin_stage(self, stage: str, occurrence: int) -> Expectation | None:
        """Called by the node before ``stage``: records :attr:`occurrence`, returns :meth:`expect`."""
        self.occurrence = occurrence
        return self.expect(stage)

    def owned_rows(self) -> dict[str, tuple[np.ndarray, torch.Tensor]]:
        """The parameter rows this shard owns, by the oracle's table names: ``(row ids, rows)``.

        In-process only (verification against the oracle and checkpoints read it directly); it is
        not a message.
        """
        return {}

    # ------------------------------------------------------------------ evaluation
    def prediction(self) -> tuple[np.ndarray, torch.Tensor, torch.Tensor | None]:
        """The shard's final user representations and, if the node holds it, the final item table.

        Returns ``(client ids, user rows, item table or None)``; valid after the protocol's
        prediction stages.
        """
        raise NotImplementedError(f"{type(self).__name__} does not expose predictions")

    def scorer(self, request: Message) -> Callable[[torch.Tensor], torch.Tensor] | None:
        """For models that do not score by a dot product (NeuMF): this shard's scoring function.

        Given what the server sends for evaluation (:meth:`ServerProgram.evaluation_parts`),
        returns ``score(rows)`` mapping positions in :attr:`clients` to their scores over every
        item; ``None`` (default): the shard scores ``U V^T`` from :meth:`prediction`.
        """
        return None

    def stage_evaluate(self, step: int, request: Message) -> Message:
        """Federated evaluation: score this shard's clients, return metric sums and user counts.

        The request carries the final item table (part ``items``) when the server holds it; a
        node that computed it itself uses its own. A program with a :meth:`scorer` scores through
        it instead. The reply's fields hold, per split and metric, the sum over this shard's
        evaluated users and their number, so the server's mean equals the centralized evaluator's.
        """
        if self.data is None or self.data.eval is None:
            raise RuntimeError("this node has no held-out data to evaluate on")
        ks = tuple(int(k) for k in request.fields["ks"])
        targets, exclude = self.data.eval.targets, self.data.eval.exclude
        score = self.scorer(request)
        if score is not None:
            return Message(fields=split_sums(targets, exclude, self.clients, ks, score=score))
        users, U, V = self.prediction()
        if "items" in request:
            V = torch.as_tensor(request["items"].value)
        if V is None:
            raise RuntimeError("evaluate: no final item table on this node and none in the request")
        return Message(fields=split_sums(targets, exclude, users, ks, embeddings=(U.float(), V.float())))


class ServerProgram(ABC):
    """The server role (module docstring).

    Args:
        settings: the run's public settings.
        transport: the rounds to the nodes.
        n_clients: size of the client population.
        n_items: size of the item catalogue.
        tables: the initial tables the server itself owns (by the oracle's names); initial tables
            are drawn from the public ``init`` stream, so this is no secret.
    """

    schedule: ClassVar[Schedule] = "minibatch"
    """``"minibatch"``: the loop feeds triples to :meth:`train_step`; ``"round"``: it calls
    :meth:`train_round` once per epoch."""

    def __init__(
        self,
        settings: Any,
        transport: Transport,
        n_clients: int,
        n_items: int,
        tables: Mapping[str, torch.Tensor] | None = None,
    ) -> None:
        self.settings = settings
        self.transport = transport
        self.n_clients = n_clients
        self.n_items = n_items
        self.tables = dict(tables or {})
        self.shards = shard_of(n_clients, transport.nodes)
        self.init_state()

    def init_state(self) -> None:  # noqa: B027 (optional hook: servers that hold nothing of their own)
        """Build the server's own state once the common fields are set (called by ``__init__``).

        Every server takes the same constructor arguments, so a protocol states here only what it
        holds beyond them (its item tables, optimizer state, counters) instead of repeating the
        constructor.
        """

    def own_table(self, name: str) -> torch.Tensor:
        """A private copy of the initial table ``name`` (the server updates it in place)."""
        return self.tables[name].detach().clone()

    @property
    def nodes(self) -> list[int]:
        """The node ids, sorted."""
        return self.transport.nodes

    def by_node(self, users: np.ndarray) -> dict[int, np.ndarray]:
        """``users`` grouped by the node that hosts them, in node order; nodes with none are left out."""
        out = {}
        for node, hosted in self.shards.items():
            mine = users[np.isin(users, hosted)]
            if len(mine):
                out[node] = mine
        return out

    @abstractmethod
    def setup(self) -> None:
        """The set-up rounds (keys, tokens, routing, initial rows)."""

    def train_step(self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> StepStats:
        """One minibatch of triples (minibatch protocols)."""
        raise TypeError(f"{type(self).__name__} trains by rounds: call train_round")

    def train_round(self, round_index: int) -> StepStats:
        """One communication round (round protocols)."""
        raise TypeError(f"{type(self).__name__} trains by minibatches: call train_step")

    def predict(self) -> None:  # noqa: B027 (optional hook: protocols without prediction stages)
        """The prediction stages, after which every node holds its clients' final representations."""

    def items_for_evaluation(self) -> torch.Tensor | None:
        """The final item table when the server holds it (sent to nodes for evaluation), else ``None``."""
        return None

    def evaluation_parts(self) -> dict[str, Part]:
        """What the server sends every node for evaluation: by default the final item table.

        Protocols whose clients score through :meth:`ClientProgram.scorer` send what it needs.
        """
        items = self.items_for_evaluation()
        if items is None:
            return {}
        return {
            "items": Part("evaluate/items", "item_embedding", "server", "client", items, shape="broadcast")
        }

    def evaluate(self, ks: list[int]) -> dict[str, dict[str, float]]:
        """Federated evaluation: every node scores its clients; the server averages the sums.

        Nodes the transport lost (protocols with dropout recovery) are not asked: the mean is over
        the clients of the nodes still online.
        """
        request = Message(dict(self.evaluation_parts()), fields={"ks": [int(k) for k in ks]})
        self.transport.begin_step(self.transport.net.step)
        live = [n for n in self.nodes if n not in self.transport.lost]
        replies = self.transport.round(EVALUATE_STAGE, dict.fromkeys(live, request))
        totals: dict[str, float] = {}
        for reply in replies.values():
            for key, value in reply.fields.items():
                totals[key] = totals.get(key, 0.0) + float(value)
        out: dict[str, dict[str, float]] = {}
        for key, value in totals.items():
            split, _, metric = key.partition("/")
            if metric != "users":
                out.setdefault(split, {})[metric] = value / max(totals.get(f"{split}/users", 0.0), 1.0)
        return out

    def owned_rows(self) -> dict[str, tuple[np.ndarray, torch.Tensor]]:
        """The parameter rows the server owns (as :meth:`ClientProgram.owned_rows`)."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """The server's own state, for checkpoints."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:  # noqa: B027 (stateless servers)
        """Restore :meth:`state_dict`."""


@dataclass(frozen=True)
class ProtocolSpec:
    """A protocol's programs (its settings class is in :mod:`fedgraphrec.protocols.registry`).

    Both programs are built with the run's settings object (the protocol's frozen settings
    dataclass, resolved for the run).

    Attributes:
        name: the protocol's name (``lpgcn``, ``gnn4fr``, ...), bound into every sealed message.
        server: the server program class.
        client: the client program class.
        server_tables: the oracle tables whose initial values the server owns (e.g. FedMF's items).
        lossless: the protocol trains exactly the centralized oracle (``--verify`` applies).
    """

    name: str
    server: type[ServerProgram]
    client: type[ClientProgram[Any]]
    server_tables: tuple[str, ...] = ()
    lossless: bool = False
