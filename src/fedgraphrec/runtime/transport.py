"""One round between the server and the nodes, with everything a message needs done on the way.

:class:`Transport` is the only way a protocol's server program talks to its clients: one call to
:meth:`Transport.round` sends a request :class:`~fedgraphrec.runtime.message.Message` to each node
and returns each node's reply. On the way, for every :class:`~fedgraphrec.runtime.message.Part`, it

* records the ledger entry (phase, roles, bytes of every logical message, per client);
* records the transcript entry of the receiving role (when transcripts are on);
* in ``real`` mode seals the sealed parts a node sends (:class:`NodeEndpoint`, on the node, under
  the clients' group key, bound to protocol, phase, step, sender and receiver) and opens the ones
  a node receives, checking the binding the receiver expects; the server side holds only the
  ciphertexts, and an attached :class:`~fedgraphrec.runtime.network.Adversary` (an active server,
  for integrity audits) may alter what the server forwards; a
  :class:`~fedgraphrec.runtime.network.LyingAdversary` may also relabel or replace parts, change a
  request's fields, and re-run or inject stages (:meth:`Transport._plan`), in both engines;
* refuses a protected part without its payload in ``real`` mode;
* relays a sub-protocol's own ciphertexts (``Part.presealed``: secure aggregation's shares under
  pairwise keys) as they are, never sealing them again, and books stand-ins of ``accounted`` mode
  (``Part.repeat``, ``Part.summed``) at the sizes ``real`` mode sends; those are refused in ``real``.

Two implementations carry the rounds: :class:`~fedgraphrec.runtime.local.LocalTransport` (the nodes
are objects in this process; parts are handed over without copying or encoding) and the Flower transport
(:mod:`fedgraphrec.runtime.flower.transport`: ``grid.send_and_receive``, parts as Flower records,
node state in ``context.state``). The node side is the same :class:`NodeEndpoint` in both, so a
client program cannot tell which engine runs it.

Where the parts live: this module holds the interface (:class:`Transport`, :class:`LostNodeError`);
the node side (:class:`~fedgraphrec.runtime.endpoint.NodeEndpoint`,
:class:`~fedgraphrec.runtime.endpoint.Node`, :func:`~fedgraphrec.runtime.endpoint.require_senders`)
is in :mod:`fedgraphrec.runtime.endpoint` and the in-process engine
(:class:`~fedgraphrec.runtime.local.LocalTransport`) in :mod:`fedgraphrec.runtime.local`, which builds
on this module (never the other way round: no import circle).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import torch

from fedgraphrec.runtime.ledger import Replay
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.network import LyingAdversary, Network
from fedgraphrec.runtime.part import BOOKED_ONCE, Part
from fedgraphrec.runtime.sealing import SERVER
from fedgraphrec.runtime.transcript import Received

__all__ = ["LostNodeError", "Transport"]


class LostNodeError(RuntimeError):
    """A node did not answer a round (it crashed, or the round timed out)."""

    def __init__(self, stage: str, nodes: list[int]) -> None:
        super().__init__(f"{stage}: node(s) {nodes} did not answer")
        self.stage = stage
        self.nodes = nodes


class Transport(ABC):
    """Carries rounds between a server program and the nodes; books every message (module docstring).

    Args:
        net: the server side's bookkeeping: ledger, transcripts, crypto mode, step and adversary.
    """

    def __init__(self, net: Network) -> None:
        self.net = net
        self.lost: set[int] = set()
        """Nodes that stopped answering (they are not asked again)."""
        self._booked: dict[tuple[object, ...], tuple[Replay, tuple[np.ndarray, ...]]] = {}
        """Static layouts booked before (:func:`_static_layout`): what the ledger added, and the id
        arrays the layout names by identity (kept alive here, so no other array takes their ids)."""

    @property
    @abstractmethod
    def nodes(self) -> list[int]:
        """The ids of the nodes, sorted."""

    @property
    def protocol(self) -> str:
        """Protocol name bound into sealed messages."""
        return self.net.protocol

    def begin_step(self, step: int) -> None:
        """Every message from now on belongs to protocol step ``step``."""
        self.net.begin_step(step)

    @abstractmethod
    def round(
        self, stage: str, requests: Mapping[int, Message], *, allow_loss: bool = False
    ) -> dict[int, Message]:
        """Send each node its request and return every reply, by node id.

        Args:
            stage: the stage's name (the client program's ``stage_<name>`` answers it).
            requests: one request per node (nodes left out take no part in this round).
            allow_loss: return the replies of the nodes that answered instead of raising when some
                did not (protocols with dropout recovery); the lost nodes join :attr:`lost`.

        Raises:
            LostNodeError: a node did not answer (and ``allow_loss`` is false).
            IntegrityError: a node rejected a message (tampered, replayed, re-routed or dropped).
        """

    # ------------------------------------------------------------------ the adversary's hooks
    def _lying(self) -> LyingAdversary | None:
        """The attached adversary when it lies about more than payloads (:class:`LyingAdversary`)."""
        adv = self.net.adversary
        if adv is None:  # the honest server: no structural check (a Protocol's isinstance is slow)
            return None
        known = self.__dict__.get("_lying_of")
        if known is None or known[0] is not adv:  # checked once per attached adversary
            known = self.__dict__["_lying_of"] = (adv, adv if isinstance(adv, LyingAdversary) else None)
        lying: LyingAdversary | None = known[1]
        return lying

    def _plan(self, stage: str, requests: Mapping[int, Message]) -> list[tuple[str, Mapping[int, Message]]]:
        """The rounds to deliver for the program's round: itself, unless a lying server reschedules.

        An engine's :meth:`round` delivers each in order and returns the replies of the last one.
        """
        lying = self._lying()
        if lying is None:
            return [(stage, requests)]
        return list(lying.schedule(stage, self.net.step, requests))

    # ------------------------------------------------------------------ bookkeeping
    def _sent(self, request: Message, stage: str = "", node: int = -1) -> Message:
        """Book the parts the server sends to ``node`` in ``stage``; an active server may alter them.

        An :class:`~fedgraphrec.runtime.network.Adversary` alters the payloads of sealed parts
        (``forward``); a :class:`~fedgraphrec.runtime.network.LyingAdversary` may also replace
        whole parts and the request's fields (``tamper``, ``tamper_fields``).
        """
        net = self.net
        lying = self._lying()
        parts = {}
        for name, part in request.parts.items():
            self._check_payload(part)
            if (
                net.adversary is not None
                and part.protection in ("sealed", "asymmetric")
                and net.real_for(part.phase)
            ):
                if part.presealed or part.protection == "asymmetric":  # ciphertexts travel as the value
                    altered = net.adversary.forward(part.phase, net.step, list(part.value), part.receivers)
                    part = replace(part, value=list(altered))
                else:
                    assert part.sealed is not None
                    altered = net.adversary.forward(part.phase, net.step, list(part.sealed), part.receivers)
                    part = replace(part, sealed=list(altered))
            if lying is not None:
                part = lying.tamper(stage, node, name, part, net.step)
            self._book(part)
            parts[name] = part
        fields = request.fields
        if lying is not None:
            fields = lying.tamper_fields(stage, node, dict(fields), net.step)
        return Message(parts, fields)

    def _received(self, reply: Message, stage: str = "", node: int = -1) -> None:
        """Book the parts a node sends to the server (a lying server sees them first)."""
        lying = self._lying()
        if lying is not None:
            lying.observe_reply(stage, node, reply, self.net.step)
        for part in reply.parts.values():
            self._check_payload(part)
            self._book(part)

    def _check_payload(self, part: Part) -> None:
        if self.net.crypto != "real":  # accounted mode: stand-ins and content-free parts are allowed
            return
        real = self.net.real_for(part.phase)
        if real and (part.summed or part.repeat > 1):
            raise ValueError(
                f"{part.phase}: a part standing for messages it does not carry (summed or repeated) is "
                "for accounted crypto mode only; in real mode every message carries its payload"
            )
        if real and part.protection != "plain" and part.n_messages:
            own = part.protection == "sealed" and not part.presealed
            missing = part.sealed is None if own else part.value is None
            if missing:
                raise ValueError(
                    f"{part.phase}: {part.n_messages} {part.protection} message(s) from "
                    f"{part.sender_role} to {part.receiver_role} without payloads in real crypto mode; "
                    "a protected message must carry its ciphertext, token or masked value"
                )

    def _book(self, part: Part) -> None:
        if part.meta.get(BOOKED_ONCE):  # a relay hop of a message booked on its first hop
            return
        net = self.net
        # a part laid out as one booked before (same static arrays, phase, roles, row shape): the
        # ledger adds again what it added then, without recounting (not while transcripts record)
        key = None if net.transcript.enabled else _static_layout(part)
        if key is not None:
            hit = self._booked.get(key)
            if hit is not None:
                for ids in hit[1]:
                    if ids.flags.writeable:  # no longer static: book it in full
                        break
                else:
                    if net.ledger.replay(hit[0]):
                        return
        uniform = part.uniform_size()
        booked = net.ledger.record(  # a relayed part names its original senders; the server sent this hop
            part.phase,
            part.sender_role,
            part.receiver_role,
            part.sizes() if uniform is None else uniform,
            senders=part.senders if part.sender_role != SERVER else None,
            receivers=part.receivers if part.receiver_role != SERVER else None,
            count=None if uniform is None else part.n_messages,
            repeat=part.repeat,
            step_key=part.protection == "sealed" and not part.presealed,
        )
        if key is not None and booked is not None:
            if len(self._booked) >= 512:
                self._booked.clear()
            arrays = (part.senders, part.receivers, part.counts, part._sizes)
            self._booked[key] = (booked, tuple(a for a in arrays if a is not None))
        if not net.transcript.enabled:
            return
        sizes = part.sizes()
        if part.protection == "sealed" and not part.presealed:
            # bytes as the wire has them (a batch's ciphertext is the bytearray the cipher wrote into)
            payloads = [bytes(b) if isinstance(b, bytearray) else b for b in part.sealed or []]
        elif part.value is None or part.summed:
            payloads = []
        else:
            payloads = list(part.blocks())
        net.transcript.add(
            part.receiver_role,
            Received(
                part.phase,
                part.sender_role,
                part.kind,
                part.protection != "plain",
                payloads,
                None if part.receivers is None else part.receivers.tolist(),
                None if part.senders is None else part.senders.tolist(),
                step=net.step,
                sizes=sizes.tolist(),
                protection=part.protection,
            ),
        )


def _static_layout(part: Part) -> tuple[object, ...] | None:
    """What a part's ledger entry depends on, when its messages and sizes follow from static arrays.

    Phase, roles, protection, the id arrays (by identity: a protocol sends the same read-only
    arrays every step) and either the sizes the part carries (a sealed part in transit keeps its
    plaintext's) or its layout and rows' shape and dtype. ``None`` for parts whose sizes come from
    their content (ciphertexts, blobs) or whose message count is their row count.
    """
    sizes = part._sizes
    if sizes is not None:
        layout: tuple[object, ...] = (id(sizes),)
    else:
        value = part.value
        if part.sealed is not None or type(value) is not torch.Tensor or part.shape == "blobs":
            return None
        if part.shape == "rows" and part.counts is None and part.senders is None and part.receivers is None:
            return None
        layout = (part.shape, value.shape if part.shape == "broadcast" else value.shape[1:], value.dtype)
    return (
        part.phase, part.sender_role, part.receiver_role, part.protection, part.presealed, part.summed,
        part.repeat, id(part.senders), id(part.receivers), id(part.counts), *layout,
    )  # fmt: skip
