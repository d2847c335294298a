r"""The Flower engine: protocols' client roles on SuperNodes, the server role in a ``ServerApp``.

Needs the optional extra ``fedgraphrec[flower]`` (``flwr==1.41.0``). Importing this package without
it raises ``ImportError`` naming the extra. What crosses processes:

* :mod:`.records` — Flower's own byte count of a message and the latency of every round;
* :mod:`.parts` — a round's :class:`~fedgraphrec.runtime.message.Message` as a ``RecordDict`` and back
  (the one codec of party-program messages);
* :mod:`.transport` — :class:`~.transport.FlowerTransport`, the ServerApp's
  :class:`~fedgraphrec.runtime.transport.Transport` over a grid (secure aggregation's stages run
  over it like any protocol's: :mod:`fedgraphrec.protocols.secagg`).
"""

from __future__ import annotations

try:
    import flwr  # noqa: F401
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "the Flower engine needs the optional extra: pip install 'fedgraphrec[flower]'"
    ) from err
