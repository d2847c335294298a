"""The client side of secure aggregation's stages, for a protocol's client program (a node's shard).

:class:`SecureSumClient` is mixed into a :class:`~fedgraphrec.protocols.base.ClientProgram`; it
answers the four stages that :func:`~fedgraphrec.protocols.secagg.server.secure_sum` drives, for
every client of the shard at once, and asks the protocol for what only the protocol knows:

* :meth:`~SecureSumClient.secagg_input` — the inputs ``x_u`` of this shard's clients, computed on
  this node (the server never sends them);
* :meth:`~SecureSumClient.secagg_offline` — simulated dropouts (clients that go offline before
  uploading, or after);
* :meth:`~SecureSumClient.secagg_included` — called with the clients whose inputs the sum holds,
  e.g. to commit what they contributed.

In ``real`` mode every client's :class:`~fedgraphrec.crypto.secagg.client.SecAggClient` (private keys,
shares held for others) lives in the program's typed state as exported bytes
(:class:`SecAggState`), so a node that is restarted between messages resumes from its state, and
none of it ever leaves the node. In ``accounted`` mode no key is drawn and nothing is encrypted: a
node sends its shard's *sum* of the same fixed-point encodings (a ``summed`` part standing for the
masked inputs) and content-free stand-ins booked at the sizes ``real`` mode sends (the
``*_BYTES`` of :mod:`fedgraphrec.crypto.secagg.wire`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NamedTuple

import numpy as np

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.fixed_point import FixedPoint
from fedgraphrec.crypto.secagg import wire
from fedgraphrec.crypto.secagg.client import SecAggClient
from fedgraphrec.crypto.secagg.wire import (
    ADVERTISE_BYTES,
    ID_BYTES,
    SHARE_MESSAGE_BYTES,
    UNMASK_ENTRY_BYTES,
    AdvertisedKeys,
)
from fedgraphrec.protocols.secagg.policy import SecAggPolicy, SessionRecord, refuse
from fedgraphrec.protocols.secagg.roles import ADVERTISE, KINDS, MASK, PLAIN, SHARE, SUFFIX, UNMASK
from fedgraphrec.protocols.secagg.upload import (
    SparseUpload,
    encode_dense,
    encode_sum,
    flat_entries,
    plain_sizes,
)
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part
from fedgraphrec.runtime.state import SECRET

__all__ = ["SecAggState", "SecureSumClient"]


@dataclass
class SecAggState:
    """A node's open secure-aggregation session (``real`` mode; empty otherwise).

    Attributes:
        session: the session label of the open session (``""``: none; ``real`` mode).
        clients: the shard's :class:`~fedgraphrec.crypto.secagg.client.SecAggClient` objects, as JSON
            ``{client id: exported state}`` (private keys: these bytes never leave the node).
        record: the open session's :class:`~fedgraphrec.protocols.secagg.policy.SessionRecord` as
            JSON (both modes): what every later stage is held to.
        closed: the labels of the sessions this node advertised keys for, as a JSON list: a label is
            used once per run (even if its session is abandoned), so a server cannot sum the same
            inputs twice over different clients and subtract (a session's inputs follow from its label).
    """

    session: str = ""
    clients: bytes = field(default=b"", metadata=SECRET)
    record: str = ""
    closed: str = ""


def _closed(state: SecAggState) -> list[str]:
    return list(json.loads(state.closed)) if state.closed else []


def _ids(request: Message) -> np.ndarray:
    return np.asarray(request.fields["clients"], dtype=np.int64)


def _phase(request: Message, stage: str) -> str:
    return f"{request.fields['phase']}/{SUFFIX[stage]}"


def _out(request: Message, stage: str, value: Any, senders: np.ndarray, **kw: Any) -> Part:
    return Part(_phase(request, stage), KINDS[stage], "client", "server", value, senders=senders, **kw)


class _Opened(NamedTuple):
    """A later stage's request on this node's open session, as :meth:`SecureSumClient._secagg_next` read it.

    ``fields`` and ``ids`` are the request's; ``record`` is the session advanced to the stage;
    ``policy`` the node's own; ``session``, ``phase`` and ``threshold`` the session's label, its
    protocol phase and its ``t``, as fixed when it was advertised.
    """

    fields: Mapping[str, Any]
    ids: np.ndarray
    record: SessionRecord
    policy: SecAggPolicy
    session: str
    phase: str
    threshold: int


class SecureSumClient:
    """Mixin: the client stages of secure aggregation (module docstring).

    The program using it has ``clients`` (its shard's ids) and a ``state`` dataclass with a field
    ``secagg`` of type :class:`SecAggState`.
    """

    clients: np.ndarray
    state: Any

    # ------------------------------------------------------------------ the protocol's hooks
    def secagg_input(self, session: str) -> SparseUpload:
        """The inputs ``x_u`` of this shard's clients for ``session`` (covering every participant)."""
        raise NotImplementedError(f"{type(self).__name__} has no secure-aggregation input")

    def secagg_offline(self, session: str, when: Literal["before", "after"]) -> np.ndarray:
        """Clients of this shard that go offline ``before`` uploading or ``after`` (simulation)."""
        return np.zeros(0, dtype=np.int64)

    def secagg_included(self, session: str, included: np.ndarray) -> None:
        """Called at the unmask stage with this shard's clients whose inputs are in the sum."""

    def secagg_check(self, stage: str, step: int, request: Message) -> None:
        """Called first by every stage with its request; here nothing is checked.

        :class:`~fedgraphrec.protocols.secagg.expect.CheckedSecureSumClient` checks the request's
        fields against the node's own values here, before the stage reads them.
        """

    def secagg_policy(self) -> SecAggPolicy:
        """What this client requires of a secure sum, from its own settings (never from a request)."""
        return SecAggPolicy.of(getattr(self, "settings", None))

    # ------------------------------------------------------------------ session state
    def _secagg_load(self, session: str) -> dict[int, SecAggClient]:
        st: SecAggState = self.state.secagg
        if st.session != session:
            raise IntegrityError(f"secure aggregation: no open session {session!r} on this node")
        return {int(u): SecAggClient.restore(blob.encode()) for u, blob in json.loads(st.clients).items()}

    def _secagg_save(self, session: str, clients: dict[int, SecAggClient]) -> None:
        exported = {str(u): c.export_state().decode() for u, c in clients.items()}
        self.state.secagg = replace(self.state.secagg, session=session, clients=json.dumps(exported).encode())

    def _secagg_keep(self, record: SessionRecord) -> None:
        self.state.secagg = replace(self.state.secagg, record=record.dumps())

    def _secagg_open(self, request: Message, ids: np.ndarray) -> tuple[SessionRecord, SecAggPolicy]:
        """Advertise stage: check the request against this client's own policy; the new record."""
        f, policy = request.fields, self.secagg_policy()
        session, phase = str(f["session"]), str(f.get("phase", "?"))
        st: SecAggState = self.state.secagg
        if session in _closed(st):
            raise refuse(wire.ADVERTISE, phase, session, "this session label was already used on this node")
        if not np.isin(ids, self.clients).all() or len(np.unique(ids)) != len(ids):
            raise refuse(wire.ADVERTISE, phase, session, "the request names clients this node does not host")
        if policy.real and not f["real"]:
            raise refuse(
                wire.ADVERTISE, phase, session,
                "the server asks for an unprotected (accounted) secure sum; "
                "this client runs in real crypto mode",
            )  # fmt: skip
        n = int(f["n_clients"])
        if n < len(ids):
            raise refuse(
                wire.ADVERTISE, phase, session, f"n_clients = {n} is fewer than this node's {len(ids)}"
            )
        policy.check_size(wire.ADVERTISE, phase, session, "n_clients", n, int(f["threshold"]))
        return SessionRecord(session, wire.ADVERTISE, SessionRecord.fixed_of(f), ids.tolist()), policy

    def _secagg_next(self, stage: str, request: Message) -> _Opened:
        """A later stage: the open record, advanced to ``stage`` (same session, parameters, clients)."""
        f, ids = request.fields, _ids(request)
        session = str(f["session"])
        record = SessionRecord.loads(self.state.secagg.record)
        if record is None or record.session != session:
            phase = str(f.get("phase", "?"))
            raise refuse(stage, phase, session, "no such session is open on this node (advertise first)")
        record.advance(stage, f, ids.tolist())
        phase, t = str(record.fixed.get("phase")), int(record.fixed["threshold"])
        return _Opened(f, ids, record, self.secagg_policy(), session, phase, t)

    def _secagg_ids_in(self, record: SessionRecord, stage: str, what: str, ids: list[int]) -> None:
        """Refuse a list of clients with repeats or with this node's clients (``record.ids``) missing."""
        if len(set(ids)) != len(ids):
            raise refuse(
                stage, record.fixed.get("phase", "?"), record.session, f"{what} lists a client twice"
            )
        if not set(record.ids) <= set(ids):
            raise refuse(
                stage, record.fixed.get("phase", "?"), record.session,
                f"{what} leaves out this node's clients {sorted(set(record.ids) - set(ids))[:5]}",
            )  # fmt: skip

    # ------------------------------------------------------------------ stage 0
    def stage_secagg_advertise(self, step: int, request: Message) -> Message:
        """Stage 0: every participant's two public keys (``real``: fresh X25519 pairs)."""
        self.secagg_check(ADVERTISE, step, request)
        f, ids = request.fields, _ids(request)
        session = str(f["session"])
        record, _ = self._secagg_open(request, ids)
        # the label is spent from now on, even if the session is abandoned after the inputs went up
        self.state.secagg = SecAggState(closed=json.dumps([*_closed(self.state.secagg), session]))
        self._secagg_keep(record)
        if not f["real"]:
            sizes = np.full(len(ids), ADVERTISE_BYTES, dtype=np.int64)
            return Message({"adverts": _out(request, ADVERTISE, None, ids, shape="blobs").with_sizes(sizes)})
        made = {
            int(u): SecAggClient(int(u), int(f["threshold"]), int(f["length"]), session.encode())
            for u in ids.tolist()
        }
        self._secagg_save(session, made)
        blobs = [made[u].advertise().to_bytes() for u in ids.tolist()]
        return Message({"adverts": _out(request, ADVERTISE, blobs, ids, shape="blobs")})

    # ------------------------------------------------------------------ stage 1
    def stage_secagg_share(self, step: int, request: Message) -> Message:
        """Stage 1: each participant's Shamir shares, encrypted to their holders (presealed)."""
        self.secagg_check(SHARE, step, request)
        f, ids, record, policy, session, phase, t = self._secagg_next(wire.SHARE, request)
        n_roster = int(f["n_advertised"])
        if n_roster > int(record.fixed["n_clients"]):
            raise refuse(wire.SHARE, phase, session, f"a roster of {n_roster} clients, more than n_clients")
        policy.check_size(wire.SHARE, phase, session, "the roster", n_roster, t)
        if n_roster < 2:
            self._secagg_keep(record)
            return Message()
        if not f["real"]:
            self._secagg_keep(record)
            part = _out(
                request, SHARE, None, ids, shape="blobs", protection="sealed", presealed=True,
                seal_to_role="client", repeat=n_roster - 1,
            )  # fmt: skip
            return Message(
                {"shares": part.with_sizes(np.full(len(ids), SHARE_MESSAGE_BYTES, dtype=np.int64))}
            )
        blob = request["roster"].value[0]
        if len(blob) != n_roster * ADVERTISE_BYTES:
            raise refuse(
                wire.SHARE, phase, session, f"the roster holds {len(blob)} bytes, not {n_roster} keys"
            )
        entries = [
            AdvertisedKeys.from_bytes(blob[k : k + ADVERTISE_BYTES])
            for k in range(0, len(blob), ADVERTISE_BYTES)
        ]
        roster = {a.client: a for a in entries}
        self._secagg_ids_in(record, wire.SHARE, "the roster", [a.client for a in entries])
        clients = self._secagg_load(session)
        for u in ids.tolist():
            if roster[u] != clients[u].advertise():
                raise refuse(wire.SHARE, phase, session, f"the roster carries other keys for client {u}")
        record.roster = sorted(roster)
        blobs: list[bytes] = []
        senders: list[int] = []
        to: list[int] = []
        for u in ids.tolist():
            for v, message in clients[u].share_keys(roster).items():
                blobs.append(message)
                senders.append(u)
                to.append(v)
        self._secagg_save(session, {u: clients[u] for u in ids.tolist()})
        self._secagg_keep(record)
        part = _out(
            request, SHARE, blobs, np.asarray(senders, dtype=np.int64), shape="blobs", protection="sealed",
            presealed=True, seal_to_role="client", seal_to=np.asarray(to, dtype=np.int64),
        )  # fmt: skip
        return Message({"shares": part})

    # ------------------------------------------------------------------ stage 2
    def stage_secagg_mask(self, step: int, request: Message) -> Message:
        """Stage 2: receive the shares; upload ``x_u`` plus the self and pairwise masks."""
        self.secagg_check(MASK, step, request)
        f, ids, record, policy, session, phase, t = self._secagg_next(wire.MASK, request)
        shared = [int(v) for v in f["shared"]]
        self._secagg_ids_in(record, wire.MASK, "U2", shared)
        if record.roster and not set(shared) <= set(record.roster):
            raise refuse(wire.MASK, phase, session, "U2 names clients outside the roster")
        policy.check_size(wire.MASK, phase, session, "U2", len(shared), t)
        record.shared = shared
        upload = self.secagg_input(session)
        length = int(f["length"])
        if upload.length != length:
            raise refuse(
                wire.MASK, phase, session, f"length = {length}, but this client's input has {upload.length}"
            )
        fp = FixedPoint(int(f["frac_bits"]))
        phase = _phase(request, MASK)
        fp.check_sum(int(f["n_clients"]), upload.max_abs(), phase)
        offline = self.secagg_offline(session, "before")
        keep = np.isin(upload.clients, ids) & ~np.isin(upload.clients, offline)
        uploaders = upload.clients[keep]
        sizes = np.full(len(uploaders), 8 * length, dtype=np.int64)
        if not f["real"]:
            self._secagg_keep(record)
            if not len(uploaders):
                return Message()
            total = encode_sum(upload, fp, keep, phase)
            part = _out(request, MASK, total, uploaders, protection="masked", summed=True)
            return Message({"masked": part.with_sizes(sizes)})
        clients = self._secagg_load(session)
        if "shares" in request:
            shares = request["shares"]
            inbox: dict[int, dict[int, bytes]] = defaultdict(dict)
            assert shares.senders is not None and shares.receivers is not None
            for u, v, blob in zip(
                shares.senders.tolist(), shares.receivers.tolist(), shares.value, strict=True
            ):
                if v not in clients:
                    raise refuse(
                        wire.MASK, phase, session, f"a share for client {v}, not in this session here"
                    )
                if blob is not None:  # a withheld share: the holder notices below (masked_input)
                    inbox[v][u] = blob
            for v, messages in inbox.items():
                clients[v].receive_shares(messages)
        dense = encode_dense(upload, fp, phase)
        at = zip(np.flatnonzero(keep).tolist(), uploaders.tolist(), strict=True)
        rows = [clients[u].masked_input(dense[i], shared) for i, u in at]
        self._secagg_save(session, clients)
        self._secagg_keep(record)
        if not rows:
            return Message()
        part = _out(request, MASK, np.stack(rows), uploaders, protection="masked")
        return Message({"masked": part.with_sizes(sizes)})

    # ------------------------------------------------------------------ stage 3
    def stage_secagg_unmask(self, step: int, request: Message) -> Message:
        """Stage 3: shares of the survivors' self-mask seeds and of the dropped clients' keys."""
        self.secagg_check(UNMASK, step, request)
        f, ids, record, policy, session, phase, t = self._secagg_next(wire.UNMASK, request)
        shared = [int(v) for v in f["shared"]]
        if shared != record.shared:
            raise refuse(wire.UNMASK, phase, session, "U2 differs from the U2 of the mask stage")
        survivors = [int(v) for v in f["survivors"]]
        self._secagg_ids_in(record, wire.UNMASK, "U3", survivors)
        if not set(survivors) <= set(shared):
            raise refuse(wire.UNMASK, phase, session, "U3 names clients outside U2")
        policy.check_size(wire.UNMASK, phase, session, "U3", len(survivors), t)
        self.secagg_included(session, ids)
        responders = ids[~np.isin(ids, self.secagg_offline(session, "after"))]
        closed = SecAggState(closed=self.state.secagg.closed)
        if not f["real"]:
            self.state.secagg = closed
            sizes = np.full(len(responders), UNMASK_ENTRY_BYTES * len(shared), dtype=np.int64)
            return Message(
                {"reveal": _out(request, UNMASK, None, responders, shape="blobs").with_sizes(sizes)}
            )
        clients = self._secagg_load(session)
        blobs = []
        for u in responders.tolist():
            revealed = clients[u].unmask(survivors, shared)
            blobs.append(b"".join(int(v).to_bytes(ID_BYTES, "little") + revealed[v] for v in shared))
        self.state.secagg = closed
        return Message({"reveal": _out(request, UNMASK, blobs, responders, shape="blobs")})

    # ------------------------------------------------------------------ the unprotected baseline
    def stage_secagg_plain(self, step: int, request: Message) -> Message:
        """Baseline without protection: every client's nonzero entries in the clear.

        One logical message per client: rows ``(flat index, value)`` in float64, booked as a
        4-byte index and 4-byte floats per row of its input, as a sparse upload would be sent.
        """
        self.secagg_check(PLAIN, step, request)
        session, ids = str(request.fields["session"]), _ids(request)
        if not self.secagg_policy().plain:
            raise refuse(
                "plain", str(request.fields.get("phase", "?")), session,
                "the server asks for the inputs in the clear; "
                "this client's settings require secure aggregation",
            )  # fmt: skip
        upload = self.secagg_input(session)
        offline = self.secagg_offline(session, "before")
        keep = np.isin(upload.clients, ids) & ~np.isin(upload.clients, offline)
        pos, idx, val = flat_entries(upload, keep)
        counts = np.bincount(pos, minlength=len(upload.clients))[keep]
        value = np.stack([idx.astype(np.float64), val], axis=1)
        part = _out(request, PLAIN, value, upload.clients[keep], counts=counts)
        return Message({"upload": part.with_sizes(plain_sizes(upload)[keep])})
