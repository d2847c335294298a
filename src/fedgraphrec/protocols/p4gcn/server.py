"""The P4GCN coordinator: the server program that drives Algorithm 1 between the two organisations.

Why a coordinator at all: P4GCN's parties are two organisations (the recommender ``P1`` and the
social platform ``P2``, :mod:`.roles`), and in a deployment each runs on its own node; Flower's
SuperNodes talk only through the ServerApp, so the ServerApp carries their messages. The
coordinator holds no data and no key. It drives the schedule (which iteration runs when: set-up,
then ``batches_per_epoch`` iterations per epoch, then the evaluation release) and relays each
organisation's message to the other, so it sees exactly what a relay sees: the plaintext batch ids
(message 1, public per spec §1.4), the public plan (batch counts, ``K``) and HE ciphertexts under
``P1``'s key, which it cannot read. It adds nothing of its own; each organisation checks what it
receives against its own state (:mod:`.recommender_program`, :mod:`.social_program`).

Every message is booked once on the ledger, as the paper counts traffic between the two
organisations (``ct · (N d + 4 Σ_t |B_t| d)`` ciphertext bytes): on its first hop (organisation →
coordinator, labelled with the receiving organisation); the relay hop is marked
:data:`~fedgraphrec.runtime.part.BOOKED_ONCE` (:func:`~.wire.relay`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fedgraphrec.protocols.base import ServerProgram, StepStats
from fedgraphrec.protocols.p4gcn.roles import (
    ORGANISATIONS,
    RECOMMENDER,
    SOCIAL,
    ST_BACKWARD,
    ST_EVALUATE,
    ST_FORWARD,
    ST_HELLO,
    ST_IDS,
    ST_KEYS,
    ST_LOCAL,
    ST_RELEASE,
    ST_REPORT,
    ST_RESYNC,
    ST_ROWS,
    ST_SETUP,
    ST_UPDATE,
)
from fedgraphrec.protocols.p4gcn.wire import relay
from fedgraphrec.runtime.message import Message

__all__ = ["P4GCNServer"]


class P4GCNServer(ServerProgram):
    """The coordinator (module docstring); one :meth:`train_round` is one epoch of iterations.

    Built like every server program (``settings, transport, n_clients, n_items``); ``n_clients`` is
    the two organisations. Which node is which organisation is each node's answer to the hello (its
    own configuration); the plan (number of batches, ``K``) is ``P1``'s answer at set-up.
    """

    schedule = "round"

    def init_state(self) -> None:
        """The plan arrives at set-up; until then nothing ran."""
        self.plan: dict[str, Any] = {}
        self.node_of: dict[str, int] = {}  # organisation -> node id (from the hello)
        self.ship_context = False
        """Ask ``P1`` for its public HE context for ``P2`` (organisations in separate processes)."""
        self.done = 0  # iterations run
        self.step = 0  # the protocol step of the last round

    def _round(self, stage: str, org: str, request: Message | None = None) -> Message:
        node = self.node_of[org]
        return self.transport.round(stage, {node: request or Message()})[node]

    def _begin(self) -> None:
        self.step += 1
        self.transport.begin_step(self.step)

    def setup(self) -> None:
        """Set-up (step 1): who is who, then ``P1``'s plan and ``[X]``, relayed to ``P2`` with the plan.

        Raises:
            ValueError: the nodes are not exactly one recommender and one social platform.
        """
        self._begin()
        hello = self.transport.round(ST_HELLO, {n: Message() for n in self.nodes})
        named = {str(r.fields.get("organisation")): n for n, r in hello.items()}
        if sorted(named) != sorted(ORGANISATIONS) or len(hello) != 2:
            said = sorted(str(r.fields.get("organisation")) for r in hello.values())
            raise ValueError(
                f"p4gcn needs one {RECOMMENDER} node and one {SOCIAL} node; the nodes are {said}"
            )
        self.node_of = named
        reply = self._round(ST_KEYS, RECOMMENDER, Message(fields={"context": self.ship_context}))
        self.plan = dict(reply.fields)
        parts = {name: relay(part) for name, part in reply.parts.items()}
        self._round(ST_SETUP, SOCIAL, Message(parts, fields=self.plan))

    @property
    def batches_per_epoch(self) -> int:
        """Iterations per epoch (``P1``'s public plan)."""
        return int(self.plan["batches_per_epoch"])

    def iteration(self) -> float:
        """One iteration, messages 1–5 (spec §4.5); returns ``P1``'s batch loss."""
        self._begin()
        ids = self._round(ST_IDS, RECOMMENDER, Message(fields={"batch": self.done}))
        rows = self._round(ST_FORWARD, SOCIAL, Message({"ids": relay(ids["ids"])}))
        local = self._round(ST_LOCAL, RECOMMENDER, Message({"rows": relay(rows["rows"])}))
        delta = self._round(ST_BACKWARD, SOCIAL, Message({"grad": relay(local["grad"])}))
        sync = self._round(ST_UPDATE, RECOMMENDER, Message({"delta": relay(delta["delta"])}))
        self._round(ST_RESYNC, SOCIAL, Message({"x": relay(sync["x"])}))
        self.done += 1
        return float(local.fields["loss"])

    def train_round(self, round_index: int) -> StepStats:
        """All iterations of epoch ``round_index`` (0-based); the loss is the mean batch MSE."""
        first = round_index * self.batches_per_epoch
        if first != self.done or first + self.batches_per_epoch > int(self.plan["batches"]):
            raise ValueError(
                f"epoch {round_index}: {self.done} iterations ran; the plan has {self.plan['batches']}"
            )
        losses = [self.iteration() for _ in range(self.batches_per_epoch)]
        return StepStats(loss=float(np.mean(losses)), bpr=0.0, reg=0.0, clients=2)

    def release(self) -> None:
        """The evaluation release (spec §4.6): every user's noisy row, chunk by chunk, ``P2 → P1``."""
        self._begin()
        n_chunks = -(-int(self.plan["n_users"]) // self.settings.eval_chunk)
        for _ in range(n_chunks):
            rows = self._round(ST_RELEASE, SOCIAL)
            self._round(ST_ROWS, RECOMMENDER, Message({"rows": relay(rows["rows"])}))

    def privacy_report(self) -> dict[str, Any]:
        """The social platform's accounting: ε spent so far, ``K``, the mean noise scale, its source."""
        return dict(self._round(ST_REPORT, SOCIAL).fields)

    def evaluate_ratings(self, splits: list[str]) -> dict[str, dict[str, float]]:
        """RMSE and MAE of each held-out split, from ``P1``'s sums (only ``P1`` holds ratings)."""
        out = {}
        for split in splits:
            f = self._round(ST_EVALUATE, RECOMMENDER, Message(fields={"split": split})).fields
            n = max(int(f["n"]), 1)
            out[split] = {"rmse": float(np.sqrt(float(f["sse"]) / n)), "mae": float(f["sae"]) / n}
        return out
