"""A server that asks clients for weaker secure-aggregation parameters than they require.

Secure aggregation's parameters travel in the server's requests (``Message.fields`` of the stages
``secagg/advertise``, ``secagg/share``, ``secagg/mask``, ``secagg/unmask``; see
:func:`fedgraphrec.protocols.secagg.server.secure_sum`). A client holds them to its own settings
(:mod:`fedgraphrec.protocols.secagg.policy`) and must refuse each lie below with
:class:`~fedgraphrec.crypto.errors.IntegrityError`:

- ``lowered-threshold`` — ``threshold = 2`` at the advertise stage (``t = 2`` of ``n``: the server
  could rebuild a client's secrets from the shares of one accomplice);
- ``small-roster`` — ``n_clients = 2`` (and ``threshold = 2``) at the advertise stage: a "sum" too
  small to hide an input;
- ``threshold-changed`` — ``threshold − 1`` at the mask stage, after the advertise stage fixed it;
- ``unprotected`` — ``real = False`` at the advertise stage (only a lie when the run is ``real``).

:class:`SecAggLie` alters the requests of one :meth:`Transport.round
<fedgraphrec.runtime.transport.Transport.round>` call in place; an audit calls
:meth:`SecAggLie.apply` on the requests before they are sent (e.g. from a transport subclass).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fedgraphrec.protocols.secagg.roles import ADVERTISE, MASK
from fedgraphrec.runtime.message import Message

__all__ = ["SECAGG_LIES", "SecAggLie"]

SECAGG_LIES = ("lowered-threshold", "small-roster", "threshold-changed", "unprotected")
"""The lies, in report order."""

_STAGE = {
    "lowered-threshold": ADVERTISE,
    "small-roster": ADVERTISE,
    "threshold-changed": MASK,
    "unprotected": ADVERTISE,
}


@dataclass
class SecAggLie:
    """One lie told in every request of its stage, in the first secure sum (or every one: ``once=False``).

    Attributes:
        lie: one of :data:`SECAGG_LIES`.
        once: lie in the first secure sum only.
        fired: how many requests were altered.
        rounds: how many rounds of its stage it lied in.
    """

    lie: str
    once: bool = True
    fired: int = 0
    rounds: int = 0

    def __post_init__(self) -> None:
        if self.lie not in SECAGG_LIES:
            raise ValueError(f"lie must be one of {SECAGG_LIES}, got {self.lie!r}")

    @property
    def stage(self) -> str:
        """The stage whose requests carry the lie."""
        return _STAGE[self.lie]

    def apply(self, stage: str, requests: Mapping[int, Message]) -> None:
        """Alter ``requests`` (node → request of ``stage``) in place, when the lie is told at ``stage``."""
        if stage != self.stage or (self.once and self.rounds):
            return
        self.rounds += 1
        for request in requests.values():
            f = request.fields
            if self.lie == "lowered-threshold":
                f["threshold"] = 2
            elif self.lie == "small-roster":
                f["n_clients"], f["threshold"] = 2, 2
            elif self.lie == "threshold-changed":
                f["threshold"] = int(f["threshold"]) - 1
            elif f.get("real"):  # unprotected: a lie only where the sum is real
                f["real"] = False
            else:
                continue
            self.fired += 1
