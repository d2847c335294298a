"""The training loop's learner with its nodes on Flower SuperNodes.

:class:`FlowerLearner` is :class:`~fedgraphrec.training.protocol_learner.ProtocolLearner` with one
difference in where the nodes are — :meth:`FlowerLearner.connect` builds a
:class:`~fedgraphrec.runtime.flower.transport.FlowerTransport` over the ServerApp's grid instead of
client programs in this process — and one in how it evaluates: the nodes score their own clients
(:meth:`FlowerLearner.evaluate_federated`, which the loop uses when a learner has it), since the
ServerApp never holds a client's representation. Everything else (the server program, the step or
round, the ledger, transcripts) is the in-process learner's code. After the last epoch
:meth:`FlowerLearner.recommend_on_nodes` has every node write its own users' recommendations on its
own disk (:mod:`.node_output`); the ServerApp gets counts.

What the ServerApp process holds: the server program's state, the ledger, and the transcript of what
it sent and received (``real`` mode: ciphertexts for sealed parts). It also loads the dataset (the
sampler's triples are replayed by the server; see :mod:`.node` for the simulation shortcuts).

Differences in what the run folder reports: the ledger also books the federated evaluation rounds
(``evaluate/*`` phases, which the in-process run evaluates centrally without messages), and the
sealing/opening CPU time is spent on the SuperNodes, so the ServerApp's ledger charges none to
clients. A Flower run does not resume from a checkpoint and does not ``--verify``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch
from flwr.serverapp import Grid

from fedgraphrec.data.types import Interactions
from fedgraphrec.engines.flower.node import EXPORT_STAGE
from fedgraphrec.engines.flower.node_output import RECOMMEND_STAGE
from fedgraphrec.protocols.base import shard_of
from fedgraphrec.runtime.flower.records import Traffic
from fedgraphrec.runtime.flower.transport import ROUND_TIMEOUT_S, FlowerTransport
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.transport import Transport
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.protocol_learner import ProtocolLearner

__all__ = ["FlowerLearner", "flower_summary"]


class FlowerLearner(ProtocolLearner):
    """A protocol's server program in the ServerApp, its client programs on the SuperNodes.

    Args:
        cfg: the run configuration (sent to every node with its first message).
        data: the dataset (the ServerApp's copy: sizes, the sampler, the server's initial tables).
        grid: the ServerApp's grid.
        nodes: the SuperNode ids (clients ``u`` go to the ``u mod n``-th, by sorted id).
        timeout: bound on one round, in seconds.
    """

    def __init__(
        self,
        cfg: TrainConfig,
        data: Interactions,
        grid: Grid,
        nodes: list[int],
        timeout: float = ROUND_TIMEOUT_S,
    ) -> None:
        if cfg.verify:
            raise ValueError(
                "--verify compares every table with the oracle in one process; run it in-process"
            )
        self.grid = grid
        self.node_ids = sorted(int(n) for n in nodes)
        self.timeout = timeout
        self.traffic = Traffic()
        self.node_outputs: dict[str, int] | None = None
        """What the nodes reported of their end-of-training recommendations (:meth:`recommend_on_nodes`)."""
        super().__init__(cfg, data)

    def connect(
        self, cfg: TrainConfig, data: Interactions, tables: Mapping[str, torch.Tensor], nodes: int
    ) -> Transport:
        """A :class:`FlowerTransport` to the SuperNodes; each one's hello names its clients.

        Under secure init the hello also carries the run's 32-byte table key (``init_key``, hex) drawn
        from :func:`os.urandom` in this process: every node derives the same initial tables from it
        (``node._node_data``) and nothing in the run folder regenerates them. Simulation-only shortcut,
        stated in SECURITY.md: the ServerApp drew the key, so the *server* process knows the initial
        tables (as it knows the dataset every node loads); a deployment would have the clients draw
        the rows they own (or agree the key among themselves) and the server draw its own. It keeps
        one table for every protocol, including those that replicate item rows on several nodes
        (GNN4FR), so in-process and Flower runs stay the same protocol.
        """
        shards = shard_of(data.train.shape[0], self.node_ids)
        config = json.dumps(cfg.to_dict(), sort_keys=True)
        secret = {"init_key": self.init_key.hex()} if self.init_key is not None else {}
        hello = {n: {"config": config, "clients": ids.tolist(), **secret} for n, ids in shards.items()}
        return self.transport_class(self.net, self.grid, self.node_ids, hello, self.timeout, self.traffic)

    transport_class: type[FlowerTransport] = FlowerTransport
    """The Flower transport :meth:`connect` builds (the loopback engine carries records in process)."""

    def evaluate_federated(self, ks: list[int]) -> dict[str, dict[str, float]]:
        """The prediction stages, then every node scores its clients (the server averages)."""
        self.server.predict()
        return self.server.evaluate(ks)

    def recommend_on_nodes(self) -> dict[str, int]:
        """The run's last stage: every node writes its own users' recommendations, on its own disk.

        Call it after the last epoch's evaluation (the nodes then hold the final representations).
        The request carries what the evaluation request carries (the final items, where the server
        holds them) and nothing else: each node's folder, list length and whether it writes come
        from the node's own configuration (:mod:`.node_output`). The replies hold counts only.

        Returns:
            ``nodes`` asked, ``nodes_written`` (nodes whose operator configured an output folder),
            ``users`` with a list (summed over nodes), ``nodes_failed`` (nodes that could not write
            their folder; each logs why); also kept in :attr:`node_outputs`.

        Raises:
            RuntimeError: a node's reply carried anything but counts.
        """
        request = Message(dict(self.server.evaluation_parts()))
        self.transport.begin_step(self.net.step)
        live = [n for n in self.node_ids if n not in self.transport.lost]
        replies = self.transport.round(RECOMMEND_STAGE, dict.fromkeys(live, request), allow_loss=True)
        for node, reply in replies.items():
            if reply.parts:
                raise RuntimeError(
                    f"{RECOMMEND_STAGE}: node {node} replied with rows; it must reply counts only"
                )
        self.node_outputs = {
            "nodes": len(replies),
            "nodes_written": sum(int(r.fields.get("written", 0)) for r in replies.values()),
            "users": sum(int(r.fields.get("users", 0)) for r in replies.values()),
            "nodes_failed": sum(int(r.fields.get("failed", 0)) for r in replies.values()),
        }
        return self.node_outputs

    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Every client's final representation, fetched in the clear — tests only (privacy-breaking).

        Works only with nodes whose ClientApp allows it (``make_client_app(allow_export=True)``).
        """
        self.server.predict()
        replies = self.transport.round(EXPORT_STAGE, {n: Message() for n in self.node_ids})
        items = self.server.items_for_evaluation()
        ids: list[np.ndarray] = []
        rows: list[torch.Tensor] = []
        for reply in replies.values():
            part = reply["users"]
            assert part.senders is not None
            ids.append(part.senders)
            rows.append(torch.as_tensor(part.value))
            if items is None and "items" in reply:
                items = torch.as_tensor(reply["items"].value)
        if items is None:
            raise RuntimeError(f"{self.spec.name}: neither the server nor a node holds the final item table")
        stacked = torch.cat(rows)
        users = torch.empty_like(stacked)
        users[torch.from_numpy(np.concatenate(ids))] = stacked
        return users, items

    def tables(self) -> dict[str, torch.Tensor]:
        """Only the server's rows: the clients' stay on the SuperNodes."""
        out: dict[str, torch.Tensor] = {}
        for name, (ids, rows) in self.server.owned_rows().items():
            table = torch.empty((int(ids.max()) + 1 if len(ids) else 0, *rows.shape[1:]), dtype=rows.dtype)
            table[torch.from_numpy(ids)] = rows
            out[name] = table
        return out

    def run_summary(self) -> dict[str, Any]:
        """What the loop adds to ``summary.json``: Flower's measured traffic and per-round latency."""
        summary = flower_summary(self.traffic, len(self.node_ids), self.transport.lost)
        if self.node_outputs is not None:  # counts only: the lists are on the nodes' own disks
            summary["flower"]["node_recommendations"] = dict(self.node_outputs)
        return summary


def flower_summary(traffic: Traffic, nodes: int, lost: Iterable[int] = ()) -> dict[str, Any]:
    """``summary.json``'s ``engine`` and ``flower`` entries: node counts, traffic, round latency."""
    seconds = [r.seconds for r in traffic.rounds]
    flower = {
        "nodes": nodes,
        "lost_nodes": sorted(int(n) for n in lost),
        "traffic": traffic.summary(),
        "round_seconds": {
            "mean": float(np.mean(seconds)) if seconds else 0.0,
            "p50": float(np.percentile(seconds, 50)) if seconds else 0.0,
            "max": float(max(seconds, default=0.0)),
        },
    }
    return {"engine": "flower", "flower": flower}

    def state_dict(self) -> dict[str, Any]:
        """The server's state and the ledger (the nodes' state stays on the SuperNodes)."""
        return {
            "server": self.server.state_dict(),
            "ledger": self.net.ledger.state_dict(),
            "step": self.net.step,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """A Flower run does not resume: its nodes' state lived on the SuperNodes of that run."""
        raise ValueError("a Flower run cannot be resumed; its clients' state lived on the SuperNodes")
