"""What a node accepts in secure aggregation's stages, and where a secure sum sits in a protocol's flow.

A protocol whose client program mixes in secure aggregation declares, in its own
:class:`~fedgraphrec.runtime.expect.StageFlow`, where a secure sum may run. This module gives the
pieces it needs, so every such protocol declares the sum the same way:

* :func:`sum_edges` — the flow's edges of one *site*: "after stage X a secure sum may run
  (``advertise → share → mask → unmask``, or ``plain`` when the protocol runs without protection),
  then one of the stages Y"; :func:`merge_edges` unions a protocol's own edges with its sites';
  :func:`sum_repeats` — how many secure sums may run in one step (e.g. one per layer);
* :func:`sum_expectation` — each stage's expected parts under the sum's phase prefix, which the
  node computes from its own state: the roster (``plain`` blobs from the server), the shares
  (``sealed`` and ``presealed`` blobs the server relays from clients; absent when the node holds no
  share this time), the survivors (``plain`` blobs). The same labels in ``real`` and ``accounted``
  mode: the stand-ins of ``accounted`` mode (``repeat``, content-free) carry the labels of the real
  messages, and only the nodes' replies are ``summed``;
* :class:`CheckedSecureSumClient` — :class:`~fedgraphrec.protocols.secagg.client.SecureSumClient`
  whose stages first check the request's fields the node knows itself (phase prefix, session,
  input length, fixed-point bits, its participating clients) against the protocol's
  :class:`SumSite`, so a server cannot make a node mask the wrong input, under another session or
  phase, or for clients it does not host; and, when the node's own settings say ``crypto = real``,
  that the sum runs for real (``accounted`` mode would send the shard's sum unmasked).

The node's state machine (:class:`~fedgraphrec.runtime.expect.FlowState`) counts the runs of each
stage in a step; a protocol's :meth:`CheckedSecureSumClient.secagg_site` turns that count
(``self.occurrence``) and its own state into the sum it expects, or refuses with
:class:`~fedgraphrec.crypto.errors.IntegrityError` when no sum may run there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.secagg.wire import ADVERTISE_BYTES
from fedgraphrec.protocols.secagg.client import SecureSumClient
from fedgraphrec.protocols.secagg.policy import SecAggPolicy
from fedgraphrec.protocols.secagg.roles import ADVERTISE, KINDS, MASK, PLAIN, SHARE, SUFFIX, UNMASK
from fedgraphrec.runtime.expect import Expect, Expectation
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.sealing import SERVER

__all__ = [
    "SECURE_STAGES",
    "CheckedSecureSumClient",
    "SumSite",
    "check_sum_threshold",
    "merge_edges",
    "sum_edges",
    "sum_expectation",
    "sum_repeats",
]

SECURE_STAGES = (ADVERTISE, SHARE, MASK, UNMASK)
"""The four stages of one secure sum, in order."""


@dataclass(frozen=True)
class SumSite:
    """The secure sum a node expects to take part in now, from its own state.

    Attributes:
        prefix: the phase prefix of the sum's messages (``"train/upload"``).
        session: the session label (bound into every key and mask; ``None``: not checked, only
            when the site is asked for its prefix).
        length: ring elements per input (``None``: not checked).
        participants: this node's clients that take part (``None``: not checked); the first stage
            (``advertise`` or ``plain``) must name exactly these, later stages a subset.
        frac_bits: the fixed-point fractional bits of the protocol's settings (``None``: not checked).
    """

    prefix: str
    session: str | None = None
    length: int | None = None
    participants: np.ndarray | None = None
    frac_bits: int | None = None


def sum_edges(before: Iterable[str], then: Iterable[str], *, secure: bool = True) -> dict[str, set[str]]:
    """The flow's edges of a secure sum that may run after any stage of ``before``, then ``then``.

    ``secure`` (the protocol's own setting, never the server's word) chooses the four stages of
    secure aggregation or the unprotected ``plain`` baseline; the other variant is not in the flow,
    so a server cannot downgrade a secure sum to plain uploads. A node whose clients all went
    offline before uploading is not asked to unmask, so ``mask`` may also be followed by ``then``.
    """
    then = set(then)
    first = ADVERTISE if secure else PLAIN
    edges: dict[str, set[str]] = {b: {first} for b in before}
    if secure:
        edges.update({ADVERTISE: {SHARE}, SHARE: {MASK}, MASK: {UNMASK, *then}, UNMASK: set(then)})
    else:
        edges[PLAIN] = set(then)
    return edges


def merge_edges(*maps: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    """The union of flow edges (a protocol's own and its secure-sum sites')."""
    out: dict[str, set[str]] = {}
    for edges in maps:
        for stage, nxt in edges.items():
            out.setdefault(stage, set()).update(nxt)
    return out


def sum_repeats(n: int, *, secure: bool = True) -> dict[str, int]:
    """Repeat counts for ``n`` secure sums in one step (e.g. one per layer)."""
    return {stage: n for stage in (SECURE_STAGES if secure else (PLAIN,))}


def sum_expectation(stage: str, prefix: str) -> Expectation:
    """The parts a node expects in ``stage`` of a secure sum under the phase prefix ``prefix``.

    Raises:
        ValueError: ``stage`` is not one of secure aggregation's stages.
    """
    if stage in (ADVERTISE, PLAIN):
        return {}
    if stage == SHARE:  # every advertised key, one copy per client, from the server
        return {"roster": _blobs(prefix, ADVERTISE, "plain", SERVER)}
    if stage == MASK:  # the shares other clients sealed to this node's clients, relayed unchanged
        return {"shares": _blobs(prefix, SHARE, "sealed", "client", presealed=True, optional=True)}
    if stage == UNMASK:  # U3, from the server
        return {"survivors": _blobs(prefix, UNMASK, "plain", SERVER)}
    raise ValueError(f"{stage!r} is not a stage of secure aggregation")


def _blobs(prefix: str, stage: str, protection: Any, origin: str, **kw: Any) -> Expect:
    return Expect(
        f"{prefix}/{SUFFIX[stage]}", protection, kind=KINDS[stage], shape="blobs", from_role=origin, **kw
    )


class CheckedSecureSumClient(SecureSumClient):
    """:class:`SecureSumClient` whose stages check the fields the node knows (module docstring).

    A protocol implements :meth:`secagg_site` and returns :meth:`secagg_expect` from its
    ``expect`` for secure aggregation's stages.
    """

    occurrence: int

    def secagg_site(self, stage: str, step: int | None = None) -> SumSite:
        """The sum this node expects in ``stage`` now, from its own state and ``self.occurrence``.

        ``step`` is the request's step when the fields are checked (a protocol whose session label
        names the step uses it; the node's flow has already checked it), ``None`` when only the
        expected parts are asked for.

        Raises:
            IntegrityError: no secure sum may run here (the protocol names the stage and why).
        """
        raise NotImplementedError(f"{type(self).__name__} declares no secure-sum site")

    def secagg_expect(self, stage: str) -> Expectation:
        """The expected parts of ``stage`` (:func:`sum_expectation` under :meth:`secagg_site`'s prefix)."""
        return sum_expectation(stage, self.secagg_site(stage).prefix)

    def secagg_check(self, stage: str, step: int, request: Message) -> None:
        """Check the request against the node's own values: :meth:`secagg_site`, then the threshold.

        Every stage of :class:`SecureSumClient` calls this first, before it reads the request.

        The threshold and the shares' receivers: :func:`check_sum_threshold`.

        Raises:
            IntegrityError: naming the stage and the field that differs.
        """
        self._check_site(stage, step, request)
        held = None
        if stage == SHARE and request.fields.get("real") and self.state.secagg.session:
            held = min(c.threshold for c in self._secagg_load(self.state.secagg.session).values())
        policy = SecAggPolicy.of(getattr(self, "settings", None))  # the client's own requirements
        check_sum_threshold(stage, request, policy, held)

    def _check_site(self, stage: str, step: int, request: Message) -> None:
        site = self.secagg_site(stage, step)
        f = request.fields
        where = f"secure aggregation stage {stage!r} ({site.prefix})"
        checks: list[tuple[str, Any, Any]] = [("phase", f.get("phase"), site.prefix)]
        if site.session is not None:
            checks.append(("session", f.get("session"), site.session))
        if site.length is not None and stage != PLAIN:
            checks.append(("length", f.get("length"), site.length))
        if site.frac_bits is not None and stage != PLAIN:
            checks.append(("frac_bits", f.get("frac_bits"), site.frac_bits))
        if stage != PLAIN and getattr(getattr(self, "settings", None), "crypto", None) == "real":
            checks.append(("real", f.get("real"), True))  # accounted mode uploads the shard's sum unmasked
        for name, got, want in checks:
            if got != want:
                raise IntegrityError(f"{where}: field {name!r} is {got!r}; this node expects {want!r}")
        if site.participants is None:
            return
        clients = np.asarray(f.get("clients", []), dtype=np.int64)
        own = np.asarray(site.participants, dtype=np.int64)
        if stage in (ADVERTISE, PLAIN):
            ok = np.array_equal(np.sort(clients), np.sort(own))
        else:
            ok = bool(np.isin(clients, own).all()) and len(np.unique(clients)) == len(clients)
        if not ok:
            raise IntegrityError(
                f"{where}: field 'clients' names {len(clients)} client(s) that are not this node's "
                f"{len(own)} participant(s) of the sum"
            )


def check_sum_threshold(stage: str, request: Message, policy: SecAggPolicy, held: int | None) -> None:
    """The secure sum's threshold ``t`` must be what the node's own ``policy`` requires of the sum.

    (And at ``mask``, the relayed shares must be for this node's clients in the sum, or the node
    would look up a client it does not run in the sum.)

    A server that lowered ``t`` (a field it sends) could collect, for one client, both the shares
    of its self mask and those of its pairwise key, and unmask its input (the reason for
    ``t > n/2``, :func:`~fedgraphrec.protocols.secagg.policy.check_threshold`). The node checks ``t``
    against the number of clients the server announces at ``advertise`` (at least this node's
    own), and at ``share`` against the roster it received (``real`` mode: the roster's own size)
    and against the ``t`` its clients were made with (``held``).

    Raises:
        IntegrityError: naming the stage and the field.
    """
    f = request.fields
    where = f"secure aggregation stage {stage!r}"
    if stage == MASK and "shares" in request:  # relayed shares are for this node's clients in the sum
        receivers = request["shares"].receivers
        if receivers is None or not np.isin(receivers, np.asarray(f["clients"], dtype=np.int64)).all():
            raise IntegrityError(
                f"{where}: part 'shares' names receivers that are not this node's in the sum"
            )
        return
    if stage == ADVERTISE:
        n = int(f["n_clients"])
        if n < len(f["clients"]):
            raise IntegrityError(f"{where}: field 'n_clients' is {n}, fewer than this node's own clients")
    elif stage == SHARE:
        n = int(f["n_advertised"])
        if "roster" in request and request["roster"].value is not None:
            blob = request["roster"].value[0]
            if len(blob) != n * ADVERTISE_BYTES:
                raise IntegrityError(f"{where}: field 'n_advertised' is {n}; the roster holds another number")
    else:
        return
    t, need = int(f["threshold"]), policy.required(n)  # one rule: the client's policy
    if t < need or (held is not None and held != t):
        raise IntegrityError(
            f"{where}: field 'threshold' is {t}; this node expects {need} of {n} clients"
            + ("" if held is None else f" (its clients were made with {held})")
        )
