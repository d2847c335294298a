"""The Flower engine in one process: real records to the real node handler, no SuperLink, no Ray.

For the integrity audit (``fedgraphrec audit integrity P --engine flower``) and tests. A
:class:`LoopbackGrid` stands in for the ServerApp's ``Grid``: every request, encoded as Flower
records by :class:`~fedgraphrec.runtime.flower.transport.FlowerTransport` exactly as on a
deployment, goes to :func:`~fedgraphrec.engines.flower.node.handle_party` — the SuperNode's public
handler — with that node's own ``RecordDict`` state, and a node's failure comes back as Flower
reports it (an error message with the exception's type and text). What differs from a deployment is
only the carriage: no gRPC, no process boundary, no Flower-computed byte counts.

:func:`loopback_learner` is an :data:`~fedgraphrec.audits.integrity_runs.LearnerFactory`: a
:class:`~fedgraphrec.engines.flower.learner.FlowerLearner` over such a grid on ``nodes`` nodes, with
the adversary attached before set-up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from flwr.app import RecordDict

from fedgraphrec.data.types import Interactions
from fedgraphrec.engines.flower.learner import FlowerLearner
from fedgraphrec.engines.flower.node import handle_party
from fedgraphrec.engines.flower.node_output import NodeOutput
from fedgraphrec.runtime.flower.transport import FlowerTransport
from fedgraphrec.runtime.network import Adversary
from fedgraphrec.runtime.transport import Transport
from fedgraphrec.training.config import TrainConfig

__all__ = ["LoopbackGrid", "LoopbackLearner", "loopback_learner"]


@dataclass
class _Metadata:
    dst_node_id: int
    src_node_id: int = 0


@dataclass
class _Error:
    reason: str
    code: int = 0


@dataclass
class _Message:
    """The part of Flower's ``Message`` the transport reads (Flower's needs a run context)."""

    content: Any
    metadata: _Metadata
    error: _Error | None = None

    def has_error(self) -> bool:
        return self.error is not None

    def has_content(self) -> bool:
        return self.error is None


class LoopbackGrid:
    """Nodes as ``RecordDict`` states answered by the real node handler, in this process.

    Args:
        nodes: the node ids.
        outputs: per node id, where it writes its users' recommendations at the end of training
            (its operator's choice; a node without one writes nothing).
    """

    def __init__(self, nodes: list[int], outputs: Mapping[int, NodeOutput] | None = None) -> None:
        self.states = {int(n): RecordDict() for n in nodes}
        self.outputs = {int(n): o for n, o in (outputs or {}).items()}

    def get_node_ids(self) -> list[int]:
        """The node ids."""
        return list(self.states)

    def send_and_receive(self, messages: list[_Message], timeout: float | None = None) -> list[_Message]:
        """Every message to its node's handler; a failure as Flower reports it (type and text)."""
        out = []
        for m in messages:
            node = m.metadata.dst_node_id
            try:
                own = self.outputs.get(node)  # a node nobody configured writes nothing
                state = self.states[node]
                reply = (
                    handle_party(m.content, state)
                    if own is None
                    else handle_party(m.content, state, output=own)
                )
            except Exception as exc:  # Flower turns a ClientApp's exception into an error reply
                out.append(_Message(None, _Metadata(0, node), _Error(f"{type(exc)}:<'{exc}'>")))
                continue
            out.append(_Message(reply, _Metadata(0, node)))
        return out


class _LoopbackTransport(FlowerTransport):
    measure = staticmethod(lambda m: 0)
    make_message = staticmethod(lambda content, node, group: _Message(content, _Metadata(node)))  # type: ignore[assignment]


class LoopbackLearner(FlowerLearner):
    """A :class:`FlowerLearner` over a :class:`LoopbackGrid` (node ids ``1..nodes``), an adversary attached.

    ``outputs``: per node id, where that node writes its users' recommendations (:class:`NodeOutput`).
    """

    def __init__(
        self,
        cfg: TrainConfig,
        data: Interactions,
        nodes: int = 2,
        adversary: Adversary | None = None,
        outputs: Mapping[int, NodeOutput] | None = None,
    ) -> None:
        self.adversary = adversary
        ids = list(range(1, nodes + 1))
        super().__init__(cfg, data, LoopbackGrid(ids, outputs), ids)  # type: ignore[arg-type]

    transport_class = _LoopbackTransport

    def connect(
        self, cfg: TrainConfig, data: Interactions, tables: Mapping[str, torch.Tensor], nodes: int
    ) -> Transport:
        """The Flower transport to the loopback grid (the run's hello to every node), the adversary on."""
        self.net.adversary = self.adversary
        return super().connect(cfg, data, tables, nodes)


def loopback_learner(cfg: TrainConfig, data: Interactions, adversary: Adversary | None) -> LoopbackLearner:
    """The integrity audit's learner factory for the Flower engine (two nodes)."""
    return LoopbackLearner(cfg, data, 2, adversary)
