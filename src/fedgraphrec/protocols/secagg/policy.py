"""What a client requires of a secure sum, from its own settings, and the checks of each stage.

The one threshold rule lives here: :func:`check_threshold` (which fractions a configuration may
set), :func:`threshold_for` (``t`` of ``n`` clients) and :meth:`SecAggPolicy.required` (the least
``t`` a client accepts); the per-stage count check is
:func:`~fedgraphrec.crypto.secagg.wire.require`.

The server runs secure aggregation and sends the parameters of every stage (``threshold``,
``length``, the roster, ``U2``, ``U3``) in its requests. A server that lies could ask for a
threshold it can reach alone (``t = 2`` of ``n = 31``: it then holds enough shares to rebuild any
client's self-mask seed and its pairwise key), shrink the roster to one or two clients so that
the "sum" is a single input, switch a later stage to other parameters than the first, or run a
stage twice. A client therefore takes every parameter that protects it from its *own* settings
(:class:`SecAggPolicy`, built from the protocol's settings dataclass, e.g.
:class:`~fedgraphrec.protocols.settings.SecureSumSettings`) and refuses, with
:class:`~fedgraphrec.crypto.errors.IntegrityError`, a request that asks for less:

* ``t`` below ``max(ceil(fraction · n), ⌊n/2⌋ + 1)`` for the ``n`` clients it is shown (the
  ``⌊n/2⌋ + 1`` part only without ``secagg_semi_honest``), at the advertise stage for the announced
  ``n_clients`` and again at the share stage for the roster of advertised keys (the ``n`` the shares
  are really split among);
* fewer clients than ``secagg_min_clients`` in the sum or in the roster;
* an unprotected (``accounted``) stage when the client's own crypto mode is ``real``;
* a later stage whose ``threshold``, ``length``, ``n_clients``, ``frac_bits`` or phase differ from
  what the client saw at the advertise stage, a ``U2`` outside the roster or smaller than ``t``, an
  unmask request whose ``U2`` differs from the one the client masked towards;
* a stage out of order or repeated (each session runs advertise → share → mask → unmask once), or
  a session label the node already used.

The record of the open session (:class:`SessionRecord`) lives in the program's typed state as JSON
(:class:`~fedgraphrec.protocols.secagg.client.SecAggState`), so the checks hold on engines that
rebuild the program for every message.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.secagg.wire import STAGES

__all__ = ["MIN_CLIENTS", "SecAggPolicy", "SessionRecord", "check_threshold", "refuse", "threshold_for"]

MIN_CLIENTS = 3
"""Default ``secagg_min_clients``: a sum of one input is that input, and in a sum of two each
participant learns the other's input by subtracting its own; three is the smallest sum in which no
single other participant (possibly the server's accomplice) learns an input."""

_ORDER = STAGES
"""The stages of one session, in order (the names used in records and errors)."""


def _check_range(fraction: float) -> None:
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"secagg_threshold (a fraction of the clients) must be in (0, 1], got {fraction}")


def check_threshold(fraction: float, semi_honest: bool = False) -> None:
    """Refuse a secure-aggregation threshold fraction that does not hold against the assumed server.

    ``t = ceil(fraction · n)`` survivors are needed at every stage. Against a server that may act
    maliciously (the model Flower's SecAgg+ documents), ``t > n/2`` is required: otherwise the server
    can tell two halves of the clients different survivor sets and collect, for one client, both the
    shares of its self mask and those of its pairwise key, unmasking its input. The trade-off: a
    higher ``t`` tolerates fewer dropouts (at most ``n − t`` per round). ``semi_honest=True`` accepts
    ``fraction ≤ 1/2`` for an honest-but-curious server only.
    """
    _check_range(fraction)
    if fraction <= 0.5 and not semi_honest:
        raise ValueError(
            f"secagg_threshold must exceed 0.5 (t > n/2) so that secure aggregation holds against a "
            f"malicious server; got {fraction}. A higher threshold tolerates fewer dropouts (at most "
            "n - t); set secagg_semi_honest = true to accept a lower one against an honest-but-curious "
            "server only"
        )


def threshold_for(n_clients: int, fraction: float) -> int:
    """``t = max(1, ceil(fraction · n))``: the survivors secure aggregation needs among ``n`` clients."""
    _check_range(fraction)
    return max(1, math.ceil(fraction * n_clients))


def refuse(stage: str, phase: str, session: str, what: str) -> IntegrityError:
    """The error a client raises for a request that asks for less than it requires."""
    return IntegrityError(
        f"secagg {stage} ({phase}, session {session!r}): {what}; the client refused the request"
    )


def _get(settings: Any, name: str, default: Any) -> Any:
    if isinstance(settings, Mapping):
        return settings.get(name, default)
    return getattr(settings, name, default)


def _plain(secure_aggregation: Any, real: bool) -> bool:
    """Uploads in the clear only where the client's own settings opt out of secure aggregation."""
    return secure_aggregation is False or (secure_aggregation is None and not real)


@dataclass(frozen=True)
class SecAggPolicy:
    """The secure-aggregation parameters a client requires, from its own settings.

    Attributes:
        fraction: ``secagg_threshold``, the fraction of the clients ``t`` must reach.
        min_clients: ``secagg_min_clients``, the fewest clients a sum (and its roster) may have.
        semi_honest: ``secagg_semi_honest``: accept ``t ≤ n/2`` (honest-but-curious server only).
        real: the client's own crypto mode is ``real``: an unprotected stage is refused.
        plain: the client's settings allow uploads in the clear: its own ``secure_aggregation =
            false`` (a privacy-audit baseline), or, for settings without that switch, ``accounted``
            mode.
    """

    fraction: float = 0.6
    min_clients: int = MIN_CLIENTS
    semi_honest: bool = False
    real: bool = False
    plain: bool = True

    @classmethod
    def of(cls, settings: Any) -> SecAggPolicy:
        """The policy of a protocol's settings (a dataclass, or a mapping in tests); defaults otherwise."""
        return cls(
            fraction=float(_get(settings, "secagg_threshold", cls.fraction)),
            min_clients=int(_get(settings, "secagg_min_clients", cls.min_clients)),
            semi_honest=bool(_get(settings, "secagg_semi_honest", cls.semi_honest)),
            real=(real := _get(settings, "crypto", "accounted") == "real"),
            plain=_plain(_get(settings, "secure_aggregation", None), real),
        )

    def required(self, n: int) -> int:
        """The smallest threshold this client accepts among ``n`` clients."""
        t = threshold_for(max(n, 1), self.fraction)
        return t if self.semi_honest else max(t, n // 2 + 1)

    def check_size(self, stage: str, phase: str, session: str, what: str, n: int, threshold: int) -> None:
        """Refuse ``n`` clients (named ``what``) below the minimum, or a threshold below :meth:`required`."""
        if n < self.min_clients:
            raise refuse(
                stage, phase, session,
                f"{what} = {n} clients, below this client's secagg_min_clients = {self.min_clients}",
            )  # fmt: skip
        if n < threshold:
            raise refuse(stage, phase, session, f"{what} = {n} clients, below the threshold t = {threshold}")
        need = self.required(n)
        if threshold < need:
            why = "" if self.semi_honest else " and t > n/2 (secagg_semi_honest is off)"
            raise refuse(
                stage, phase, session,
                f"the server asks for threshold t = {threshold} with {what} = {n}; this client requires "
                f"t >= {need} (secagg_threshold = {self.fraction}{why})",
            )  # fmt: skip


@dataclass
class SessionRecord:
    """What a node saw of its open session, to hold every later stage to it.

    Attributes:
        session: the session label.
        stage: the last stage answered (``advertise``, ``share``, ``mask``, ``unmask``).
        fixed: the request fields fixed at the advertise stage (phase, real, threshold, length,
            n_clients, frac_bits).
        ids: this node's clients in the last stage answered.
        roster: the clients of the roster (share stage; real mode only).
        shared: ``U2`` as told at the mask stage.
    """

    session: str
    stage: str
    fixed: dict[str, Any]
    ids: list[int]
    roster: list[int] = field(default_factory=list)
    shared: list[int] = field(default_factory=list)

    FIXED = ("phase", "real", "threshold", "length", "n_clients", "frac_bits")
    """Request fields that must not change within a session."""

    def dumps(self) -> str:
        """As JSON (the state keeps strings)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def loads(cls, text: str) -> SessionRecord | None:
        """Inverse of :meth:`dumps` (``None`` for an empty record)."""
        return cls(**json.loads(text)) if text else None

    @classmethod
    def fixed_of(cls, fields: Mapping[str, Any]) -> dict[str, Any]:
        """The fields of a request that :attr:`FIXED` names (those it carries)."""
        return {k: fields[k] for k in cls.FIXED if k in fields}

    def advance(self, stage: str, fields: Mapping[str, Any], ids: Iterable[int]) -> None:
        """Check that ``stage`` follows :attr:`stage` with the same fixed fields and clients; record it.

        Raises:
            IntegrityError: the stage is out of order or repeated, a fixed field changed, or the
                request names clients of this node that did not take part in the previous stage.
        """
        phase = str(self.fixed.get("phase", "?"))
        if _ORDER.index(stage) != _ORDER.index(self.stage) + 1:
            raise refuse(
                stage, phase, self.session, f"stage {stage} after {self.stage} (out of order or repeated)"
            )
        for name, value in self.fixed_of(fields).items():
            if self.fixed.get(name) != value:
                raise refuse(
                    stage, phase, self.session,
                    f"{name} changed from {self.fixed.get(name)!r} at the advertise stage to {value!r}",
                )  # fmt: skip
        missing = [k for k in self.FIXED if k in self.fixed and k not in fields]
        if missing:
            raise refuse(stage, phase, self.session, f"the request lacks {missing}")
        ids = [int(u) for u in ids]
        extra = sorted(set(ids) - set(self.ids))
        if extra:
            raise refuse(
                stage, phase, self.session, f"clients {extra[:5]} did not answer the previous stage here"
            )
        self.stage, self.ids = stage, ids
