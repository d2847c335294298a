"""A toy ring protocol for engine tests: every client seals its row to its successor each step.

The server forwards the ciphertexts; every client moves its row half-way towards its predecessor's.
The server holds the item table (unchanged), so evaluation and prediction work as for a real
protocol. :data:`ENTRY` registers it (``protocol = "ring"`` once a test put it in
``fedgraphrec.protocols.registry.REGISTRY``), so it runs through the training loop, in process and on
Flower.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.protocols.base import (
    EVALUATE_ITEMS,
    ClientProgram,
    NodeData,
    ProtocolSpec,
    ServerProgram,
    StepStats,
)
from fedgraphrec.protocols.registry import ProtocolEntry
from fedgraphrec.protocols.settings import MinibatchSettings, ModelSettings, SecureSumSettings
from fedgraphrec.runtime.endpoint import require_senders
from fedgraphrec.runtime.expect import Expect, Expectation, StageFlow, flow
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part

NAME = "ring"
REF = "tests.ring_protocol:ENTRY"


FLOW = flow(
    first=["setup"],
    after={"setup": ["send"], "send": ["receive"], "receive": ["send", "evaluate"], "evaluate": ["send"]},
    new_step=["send"],
)
"""Set-up once, then per step: send, receive (and evaluation after a step)."""


@dataclass
class RingState:
    rows: torch.Tensor
    key: bytes | None = None
    got: torch.Tensor = field(default_factory=lambda: torch.zeros(0))


class RingClient(ClientProgram[RingState]):
    def __init__(self, settings: Any, clients: np.ndarray, data: NodeData | None) -> None:
        super().__init__(settings, clients, data)
        assert data is not None
        table = data.tables["user_emb"]
        self.n = int(table.shape[0])
        self.state = RingState(rows=table[torch.from_numpy(self.clients)].clone())

    def group_key(self) -> SharedKey | None:
        return None if self.state.key is None else SharedKey.from_bytes(self.state.key)

    def owned_rows(self) -> dict[str, tuple[np.ndarray, torch.Tensor]]:
        return {"user_emb": (self.clients, self.state.rows)}

    def prediction(self) -> tuple[np.ndarray, torch.Tensor, torch.Tensor | None]:
        return self.clients, self.state.rows, None

    def stage_flow(self) -> StageFlow:
        return FLOW

    def expect(self, stage: str) -> Expectation:
        if stage == "evaluate":
            return {"items": EVALUATE_ITEMS}
        if stage != "receive":
            return {}
        dtype = self.state.rows.dtype
        return {"rows": Expect("ring/rows", "sealed", kind="user_embedding", dtype=dtype, from_role="client")}

    def stage_setup(self, step: int, request: Message) -> Message:
        self.state.key = bytes(request.fields["key"]) if request.fields.get("key") else None
        return Message()

    def stage_send(self, step: int, request: Message) -> Message:
        succ = (self.clients + 1) % self.n
        part = Part(
            "ring/rows", "user_embedding", "client", "server", self.state.rows, protection="sealed",
            senders=self.clients, seal_to_role="client", seal_to=succ,
        )  # fmt: skip
        return Message({"rows": part})

    def stage_receive(self, step: int, request: Message) -> Message:
        part = request["rows"]
        require_senders(part, (part.receivers - 1) % self.n, "ring predecessors")
        order = np.argsort(part.receivers)
        self.state.got = torch.as_tensor(part.value)[torch.from_numpy(order)]
        if self.state.got.shape == self.state.rows.shape:
            diff = self.state.got - self.state.rows
            self.state.rows = self.state.rows + 0.5 * diff
            return Message(fields={"loss": float((diff * diff).sum())})
        return Message()


class RingServer(ServerProgram):
    def setup(self) -> None:
        key = SharedKey.generate().to_bytes() if self.transport.net.real else b""
        # the toy hands out the key in the clear; real protocols wrap it per client (common.py)
        self.transport.round("setup", {n: Message(fields={"key": key}) for n in self.nodes})
        self.steps = 0

    def step(self, step: int) -> float:
        self.transport.begin_step(step)
        ups = self.transport.round("send", {n: Message() for n in self.nodes})
        parts = [ups[n]["rows"] for n in self.nodes]
        requests = {}
        for node, clients in self.shards.items():
            picks = []
            for p in parts:
                dest = p.seal_to if p.seal_to is not None else np.zeros(0, dtype=np.int64)
                picks.append((p, np.flatnonzero(np.isin(dest, clients))))
            fwd = [p.forward(k, p.seal_to[k]) for p, k in picks if len(k)]
            requests[node] = Message({"rows": Part.concat(fwd)})
        got = self.transport.round("receive", requests)
        return sum(float(r.fields.get("loss", 0.0)) for r in got.values())

    def train_step(self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> StepStats:
        loss = self.step(self.steps)
        self.steps += 1
        return StepStats(loss, loss, 0.0)

    def items_for_evaluation(self) -> torch.Tensor | None:
        return self.tables["item_emb"]

    def owned_rows(self) -> dict[str, tuple[np.ndarray, torch.Tensor]]:
        items = self.tables["item_emb"]
        return {"item_emb": (np.arange(items.shape[0]), items)}

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.steps = int(state["steps"])


SPEC = ProtocolSpec(NAME, RingServer, RingClient, server_tables=("item_emb",))


@dataclass(frozen=True)
class RingSettings(ModelSettings, MinibatchSettings, SecureSumSettings):
    """The toy's settings: a backbone, minibatches, and the protective settings a node checks.

    Attributes:
        ldp_scale: a local-DP noise scale (the toy adds none; a node's hello check reads it).
    """

    ldp_scale: float = 0.001


ENTRY = ProtocolEntry(NAME, RingSettings, "ranking", "toy ring (tests)", SPEC)
"""The toy's registry entry."""
