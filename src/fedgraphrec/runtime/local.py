"""The in-process engine: :class:`LocalTransport` carries rounds to client programs in this process.

It implements :class:`~fedgraphrec.runtime.transport.Transport` by handing each request to the
node's :class:`~fedgraphrec.runtime.endpoint.NodeEndpoint` directly (no copy, no encoding), so the
whole protocol, sealing included, runs in one process; it is what training and the tests use. The
Flower engine is the other implementation (:mod:`fedgraphrec.runtime.flower.transport`).
:mod:`fedgraphrec.runtime.transport` re-exports :class:`LocalTransport` for existing callers.
"""

from __future__ import annotations

from collections.abc import Mapping

from fedgraphrec.runtime.endpoint import Node, NodeEndpoint
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.network import Network
from fedgraphrec.runtime.transport import LostNodeError, Transport

__all__ = ["LocalTransport"]


class LocalTransport(Transport):
    """The in-process engine: the nodes are client programs in this process.

    Parts are handed to the nodes as they are (no copy, no encoding); in ``real`` mode sealed parts
    are sealed and opened for real by each node's :class:`NodeEndpoint`.

    Args:
        net: ledger, transcripts, crypto mode and adversary.
        nodes: the client programs, by node id.
    """

    def __init__(self, net: Network, nodes: Mapping[int, Node]) -> None:
        super().__init__(net)
        self.programs = dict(sorted(nodes.items()))
        self.endpoints = {
            k: NodeEndpoint(
                net.protocol, net.crypto, charge=net.ledger.charge_crypto, batch=len(self.programs) == 1
            )
            for k in self.programs
        }

    @property
    def nodes(self) -> list[int]:
        """The ids of the nodes, sorted."""
        return list(self.programs)

    def round(
        self, stage: str, requests: Mapping[int, Message], *, allow_loss: bool = False
    ) -> dict[int, Message]:
        """Deliver every request and collect every reply, in node order.

        A node in :attr:`lost` (a test may add one to simulate a crash) does not answer. A lying
        server's schedule (:meth:`Transport._plan`) may deliver other rounds first; the replies are
        those of the last round delivered.
        """
        replies: dict[int, Message] = {}
        for name, asked in self._plan(stage, requests):
            replies = self._deliver(name, asked, allow_loss)
        return replies

    def _deliver(self, stage: str, requests: Mapping[int, Message], allow_loss: bool) -> dict[int, Message]:
        """One round: each request to its node's endpoint, each reply booked."""
        replies: dict[int, Message] = {}
        missing = [n for n in sorted(requests) if n not in self.programs or n in self.lost]
        if missing and not allow_loss:
            raise LostNodeError(stage, missing)
        self.lost.update(missing)
        for node in sorted(requests):
            if node in self.lost:
                continue
            delivered = self._sent(requests[node], stage, node)
            reply = self.endpoints[node].handle(self.programs[node], stage, self.net.step, delivered)
            self._received(reply, stage, node)
            replies[node] = reply
        return replies
