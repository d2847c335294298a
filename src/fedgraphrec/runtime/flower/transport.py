"""The transport over a Flower ``Grid``: one ``send_and_receive`` per round, one message per node.

:class:`FlowerTransport` is the ServerApp's :class:`~fedgraphrec.runtime.transport.Transport`. For a
round it books what the server sends (ledger, transcripts, an attached adversary's alterations:
:meth:`Transport._sent <fedgraphrec.runtime.transport.Transport._sent>`), encodes each node's request
as Flower records (:mod:`.parts`) with the header ``protocol``/``stage``/``step``, sends them all with
one bounded ``grid.send_and_receive``, decodes the replies and books them. The ServerApp's
:class:`~fedgraphrec.runtime.network.Network` therefore has the ledger and the transcript of what the
server process received — in ``real`` mode only ciphertexts for sealed parts, as the SuperNodes seal
and open them (the node side, :class:`~fedgraphrec.runtime.endpoint.NodeEndpoint`, is the same code
as the in-process engine's).

The first message to each node also carries its *hello* (``"hello"`` record: the run configuration
and the clients it hosts), which the node keeps in its ``context.state``. An attached
:class:`~fedgraphrec.runtime.network.LyingAdversary` (integrity audits) may re-run or inject rounds,
attach a hello of its own to any request, and alter the encoded records before they are sent.

A node that does not answer within the timeout is lost: :class:`LostNodeError`, or, with
``allow_loss``, dropped (:attr:`lost`). A node that fails answers with Flower's error message; an
integrity failure (tampered, replayed, re-routed message: an ``IntegrityError`` or a subclass, such
as a secure-aggregation share's ``DecryptionError``) is raised here as
:class:`~fedgraphrec.crypto.IntegrityError`, anything else as ``RuntimeError`` with the node's
reason. Flower's own serialised bytes and each round's latency go to :attr:`traffic`
(:class:`~.records.Traffic`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flwr.app import ConfigRecord, RecordDict
from flwr.app import Message as FlowerMessage
from flwr.common.constant import ErrorCode
from flwr.serverapp import Grid

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.runtime.flower.parts import decode_message, encode_message
from fedgraphrec.runtime.flower.records import Traffic, message_bytes
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.network import Network
from fedgraphrec.runtime.transport import LostNodeError, Transport

__all__ = ["MESSAGE_TYPE", "ROUND_TIMEOUT_S", "FlowerTransport", "NodeError"]

MESSAGE_TYPE = "query.party"
"""The ClientApp query every party-program round is sent to."""

ROUND_TIMEOUT_S = 600.0
"""Default bound on one round (a round is never waited for forever)."""


class NodeError(RuntimeError):
    """A node's program failed on a request (its reason is Flower's error message)."""


def _request(content: RecordDict, node: int, group: str) -> FlowerMessage:
    return FlowerMessage(content, dst_node_id=node, message_type=MESSAGE_TYPE, group_id=group)


class FlowerTransport(Transport):
    """Rounds over a Flower grid (module docstring).

    ``measure`` (Flower's size of a message) and ``make_message`` (a request to a node) are class
    attributes, so a test can drive the transport over a stand-in grid without Flower's run context.

    Args:
        net: the ServerApp's ledger, transcripts, crypto mode and adversary.
        grid: the ServerApp's grid.
        nodes: the SuperNode ids taking part (sorted here: the sharding is by rank).
        hello: per node, what its first message carries (ConfigRecord values), e.g. the run
            configuration and the ids of the clients it hosts.
        timeout: seconds to wait for the replies of one round.
        traffic: where to record each round's latency and Flower's byte counts.
    """

    measure: Callable[[FlowerMessage], int] = staticmethod(message_bytes)
    make_message: Callable[[RecordDict, int, str], FlowerMessage] = staticmethod(_request)

    def __init__(
        self,
        net: Network,
        grid: Grid,
        nodes: list[int],
        hello: Mapping[int, Mapping[str, Any]] | None = None,
        timeout: float = ROUND_TIMEOUT_S,
        traffic: Traffic | None = None,
    ) -> None:
        super().__init__(net)
        if timeout <= 0:
            raise ValueError(f"timeout must be positive (rounds are bounded), got {timeout}")
        self.grid = grid
        self._nodes = sorted(int(n) for n in nodes)
        self.hello = {int(k): dict(v) for k, v in (hello or {}).items()}
        self.timeout = timeout
        self.traffic = traffic if traffic is not None else Traffic()
        self.greeted: set[int] = set()

    @property
    def nodes(self) -> list[int]:
        """The ids of the nodes, sorted."""
        return list(self._nodes)

    def round(
        self, stage: str, requests: Mapping[int, Message], *, allow_loss: bool = False
    ) -> dict[int, Message]:
        """Send each node its request in one ``send_and_receive``; replies by node id, in node order.

        Raises:
            LostNodeError: a node did not answer in time (and ``allow_loss`` is false).
            IntegrityError: a node rejected a message.
            NodeError: a node failed otherwise.
        """
        replies: dict[int, Message] = {}
        for name, asked in self._plan(stage, requests):  # a lying server may reschedule
            replies = self._deliver(name, asked, allow_loss)
        return replies

    def _deliver(self, stage: str, requests: Mapping[int, Message], allow_loss: bool) -> dict[int, Message]:
        """One ``send_and_receive``: every request encoded, every reply decoded and booked."""
        missing = [n for n in sorted(requests) if n not in self._nodes or n in self.lost]
        if missing and not allow_loss:
            raise LostNodeError(stage, missing)
        self.lost.update(missing)
        header = {"protocol": self.protocol, "stage": stage, "step": self.net.step}
        group = f"{stage}@{self.net.step}"
        sent: list[FlowerMessage] = []
        asked: list[int] = []
        lying = self._lying()
        for node in sorted(requests):
            if node in self.lost:
                continue
            content = encode_message(self._sent(requests[node], stage, node), header)
            hello: Mapping[str, Any] | None = None
            if node not in self.greeted and node in self.hello:
                hello = self.hello[node]
            if lying is not None:
                hello = lying.hello(stage, node, self.net.step, hello, self.hello.get(node))
                content = lying.tamper_records(stage, node, content, self.net.step)
            if hello is not None:
                content["hello"] = ConfigRecord(dict(hello))
            sent.append(self.make_message(content, node, group))
            asked.append(node)
        start = self.traffic.start()
        got = list(self.grid.send_and_receive(sent, timeout=self.timeout)) if sent else []
        self.traffic.record(stage, group, sent, got, start, self.measure)
        replies: dict[int, Message] = {}
        for m in got:
            node = int(m.metadata.src_node_id)
            if m.has_error() and getattr(m.error, "code", None) == ErrorCode.NODE_UNAVAILABLE:
                continue  # the SuperNode is gone (no heartbeat): it did not answer, it is lost
            if m.has_error():
                reason = str(m.error.reason)
                if _integrity_failure(reason):
                    raise IntegrityError(f"{stage}: node {node} rejected a message: {_last_line(reason)}")
                raise NodeError(f"{stage}: node {node} failed: {reason}")
            _, replies[node] = decode_message(m.content)
            self.greeted.add(node)
        lost = [n for n in asked if n not in replies]
        if lost and not allow_loss:
            raise LostNodeError(stage, lost)
        self.lost.update(lost)
        out = {}
        for node in sorted(replies):
            self._received(replies[node], stage, node)
            out[node] = replies[node]
        return out


def _integrity_names() -> set[str]:
    """Names of :class:`IntegrityError` and its subclasses (e.g. a share's ``DecryptionError``)."""
    names, todo = set(), [IntegrityError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return names


def _integrity_failure(reason: str) -> bool:
    """Whether a node's error reason is an :class:`IntegrityError` (or a subclass of it)."""
    return any(name in reason for name in _integrity_names())


def _last_line(reason: str) -> str:
    """The exception line of a node's error reason (Flower wraps the traceback around it)."""
    names = _integrity_names()
    lines = [ln for ln in reason.strip("'>\n ").splitlines() if any(n in ln for n in names)]
    return lines[-1].strip() if lines else reason
