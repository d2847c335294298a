"""A lying server for the baselines' node tests: it rewrites a stage's requests before the nodes see them.

The in-process transport hands each request to the node's public handler
(:meth:`~fedgraphrec.runtime.endpoint.NodeEndpoint.handle`); wrapping its ``round`` lets a test
change what the server sends in any stage — from set-up on (:func:`learner` with ``lie``) or for a
while (:func:`lying`) — exactly as a server that lies about everything it sends could.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, cast

from fedgraphrec.runtime.local import LocalTransport
from fedgraphrec.runtime.message import Message
from fedgraphrec.training.data import prepare_interactions
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.protocol_learner import ProtocolLearner

Requests = dict[int, Message]
Lie = Callable[[Requests], Requests]
Tamper = Callable[[int, Message], Message]


def install(transport: Any, stage: str, lie: Lie) -> Callable[[], None]:
    """The server rewrites every round of ``stage`` with ``lie(requests)``; returns the undo."""
    honest = transport.round

    def round_(name: str, requests: Any, **kw: Any) -> dict[int, Message]:
        return honest(name, lie(dict(requests)) if name == stage else requests, **kw)

    transport.round = round_

    def undo() -> None:
        transport.round = honest

    return undo


def learner(
    protocol: str, settings: list[str], lie: tuple[str, Lie] | None = None, **values: Any
) -> ProtocolLearner:
    """Two nodes, ``real`` crypto, synthetic data; ``lie``: a stage the server lies about from set-up on."""
    cfg = load_config(
        None, [], shared=settings, protocol=protocol, dataset="synthetic", crypto="real", **values
    )

    class Lying(ProtocolLearner):
        def connect(self, *args: Any, **kw: Any) -> Any:
            transport = super().connect(*args, **kw)
            if lie is not None:
                install(transport, *lie)
            return transport

    return Lying(cfg, prepare_interactions(cfg), nodes=2)


def local(run: ProtocolLearner) -> LocalTransport:
    """The learner's in-process transport (its nodes' endpoints and programs)."""
    return cast(LocalTransport, run.transport)


@contextmanager
def lying(run: ProtocolLearner, stage: str, tamper: Tamper) -> Iterator[None]:
    """While open, the server rewrites every request of ``stage`` with ``tamper(node, request)``."""
    undo = install(run.transport, stage, lambda reqs: {n: tamper(n, m) for n, m in reqs.items()})
    try:
        yield
    finally:
        undo()


def with_part(name: str, **changes: Any) -> Tamper:
    """A tamper that changes part ``name``'s attributes (``phase=...``, ``protection=...``)."""
    return lambda node, msg: Message({**msg.parts, name: replace(msg[name], **changes)}, msg.fields)


def with_fields(**changes: Any) -> Tamper:
    """A tamper that changes request fields."""
    return lambda node, msg: Message(dict(msg.parts), {**msg.fields, **changes})
