"""Secure aggregation across processes: clients' keys on their SuperNodes, the server on the ServerApp.

Each SuperNode hosts a shard of clients. For one aggregation the server drives up to four
``grid.send_and_receive`` rounds (one message per node per round, all of the node's clients batched
in it), mirroring :func:`fedgraphrec.crypto.secagg.secure_sum` stage by stage:

``advertise`` → public keys (:meth:`FlowerSecureSum.prepare` does this for many upcoming sessions in
one round, so an aggregation then costs three rounds); ``share`` → encrypted Shamir shares, which the
server forwards;
``mask`` → masked inputs; ``unmask`` → shares revealing self masks of survivors and pairwise seeds of
clients that dropped. Every :class:`~fedgraphrec.crypto.secagg.SecAggClient` (private keys, shares
held for others) lives in the node's ``context.state`` between rounds and never leaves the node.

A node that does not answer a round (crashed, disconnected, past ``timeout``) loses its clients for
that stage on: before ``mask`` they are dropped (not summed, their pairwise masks recovered through
the others' shares), afterwards they are unresponsive (summed, self masks recovered). The sum is
exact either way, as long as the threshold holds.

Limit of this engine today: the inputs ``x_u`` are computed by the protocol in the ServerApp and
sent to the node with the ``mask`` request (the protocols' client arithmetic is batched over all
users in one process); the node adds the masks. The ledger does not count those input bytes; the
traffic summary reports them apart (``input_bytes``).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np
from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid

from fedgraphrec.crypto.secagg import (
    AdvertisedKeys,
    SecAggClient,
    SecAggResult,
    SecAggServer,
    secagg_traffic,
)
from fedgraphrec.runtime.flower.records import Traffic, message_bytes, pack, unpack

__all__ = ["MESSAGE_TYPE", "FlowerSecureSum", "client_app", "handle_secagg", "secagg_query"]

MESSAGE_TYPE = "query.secagg"
_ID = 4


def _state_key(label: bytes) -> str:
    return "secagg." + label.hex()


def _load(state: RecordDict, label: bytes) -> dict[int, SecAggClient]:
    record = state.config_records.get(_state_key(label))
    if record is None:
        raise ValueError(f"no secure-aggregation session {label!r} on this node")
    return {int(u): SecAggClient.restore(bytes(blob)) for u, blob in record.items()}  # type: ignore[arg-type, unused-ignore]


def _save(state: RecordDict, label: bytes, clients: Mapping[int, SecAggClient]) -> None:
    state[_state_key(label)] = ConfigRecord({str(u): c.export_state() for u, c in clients.items()})


def _id(v: int) -> bytes:
    return int(v).to_bytes(_ID, "little")


def handle_secagg(
    fields: Mapping[str, Any], vectors: Mapping[int, np.ndarray], state: RecordDict
) -> tuple[dict[str, Any], dict[int, np.ndarray]]:
    """The node's side of one stage for all the clients it hosts; returns the reply's fields and vectors.

    Args:
        fields: the request (``op``, ``label`` and the stage's data).
        vectors: the clients' inputs (``mask`` stage only).
        state: the node's persistent state (``context.state``), where the clients' secrets live.
    """
    op, label = str(fields["op"]), bytes(fields["label"])
    if op == "advertise":  # one or more sessions: session i is labels[i], clients.i, threshold.i, length.i
        reply: dict[str, Any] = {}
        for i, session in enumerate(fields["labels"]):
            t, length = int(fields[f"threshold.{i}"]), int(fields[f"length.{i}"])
            made = {int(u): SecAggClient(int(u), t, length, bytes(session)) for u in fields[f"clients.{i}"]}
            _save(state, bytes(session), made)
            reply[f"adverts.{i}"] = [c.advertise().to_bytes() for c in made.values()]
        return reply, {}
    clients = _load(state, label)
    if op == "share":
        roster = {a.client: a for a in map(AdvertisedKeys.from_bytes, fields["roster"])}
        out: dict[str, Any] = {}
        for u, c in clients.items():
            if u in roster:
                out[f"out.{u}"] = list(c.share_keys(roster).values()) or [b""]
        _save(state, label, {u: c for u, c in clients.items() if u in roster})
        return out, {}
    shared = [int(v) for v in fields["shared"]]
    if op == "mask":
        masked = {}
        for u, c in clients.items():
            inbox = {int.from_bytes(m[:_ID], "little"): m[_ID:] for m in fields.get(f"in.{u}", [])}
            c.receive_shares({v: m for v, m in inbox.items() if m})
            if u in vectors:
                masked[u] = c.masked_input(vectors[u], shared)
        _save(state, label, clients)
        return {"n": len(masked)}, masked
    if op == "unmask":
        survivors = [int(v) for v in fields["survivors"]]
        answer = {int(u) for u in fields["clients"]}
        out = {}
        for u, c in clients.items():
            if u in answer:
                out[f"shares.{u}"] = [_id(v) + s for v, s in c.unmask(survivors, shared).items()]
        del state[_state_key(label)]
        return out, {}
    raise ValueError(f"unknown secure-aggregation op {op!r}")


client_app = ClientApp()


@client_app.query("secagg")
def _query(msg: Message, context: Context) -> Message:
    """Answer one stage.

    For fault tests, ``node_config["crash-at"] = "<label>|<op>"`` kills this SuperNode's whole process
    group when that request arrives (start the SuperNode in a session of its own).
    """
    fields, vectors = unpack(msg.content)
    crash = str(context.node_config.get("crash-at", ""))
    if crash and crash == f"{bytes(fields['label']).decode()}|{fields['op']}":
        os.killpg(os.getpgrp(), signal.SIGKILL)  # the SuperNode's process group (start it in its own)
    out, masked = handle_secagg(fields, vectors, context.state)
    return Message(pack(out, masked), reply_to=msg)


secagg_query = _query
"""The ``query.secagg`` handler, for ClientApps that serve more than secure aggregation."""


def _request(content: RecordDict, node: int, group: str) -> Message:
    """A request to SuperNode ``node``; the group id (the session label) names the round in logs."""
    return Message(content, dst_node_id=node, message_type=MESSAGE_TYPE, group_id=group)


class FlowerSecureSum:
    """:data:`~fedgraphrec.protocols.secure_aggregation.SecureSum` over a Flower grid.

    Args:
        grid: the ServerApp's grid.
        nodes: SuperNode ids; client ``u`` lives on ``nodes[u % len(nodes)]``.
        timeout: seconds to wait for the replies of one round (``None``: wait for all).
        traffic: where to record each round's latency and bytes.
    """

    def __init__(
        self,
        grid: Grid,
        nodes: Sequence[int],
        *,
        timeout: float | None = None,
        traffic: Traffic | None = None,
    ) -> None:
        if not nodes:
            raise ValueError("nodes: at least one SuperNode is needed")
        self.grid = grid
        self.nodes = list(nodes)
        self.timeout = timeout
        self.traffic = traffic if traffic is not None else Traffic()
        self.input_bytes = 0
        self.dropped: dict[bytes, tuple[int, ...]] = {}
        self.lost_nodes: set[int] = set()
        self.measure = message_bytes
        self.make_message = _request
        self._pending: dict[bytes, tuple[tuple[tuple[int, ...], int, int], list[bytes]]] = {}

    def node_of(self, client: int) -> int:
        """The SuperNode hosting ``client``."""
        return self.nodes[client % len(self.nodes)]

    def _round(
        self, op: str, label: bytes, requests: Mapping[int, tuple[dict[str, Any], dict[int, np.ndarray]]]
    ) -> dict[int, tuple[dict[str, Any], dict[int, np.ndarray]]]:
        """One ``send_and_receive`` round; the replies of the nodes that answered, by node id."""
        sent = []
        for node, (fields, vectors) in requests.items():
            if node in self.lost_nodes:
                continue
            content = pack({"op": op, "label": label, **fields}, vectors)
            sent.append(self.make_message(content, node, label.decode()))
        start = self.traffic.start()
        got = list(self.grid.send_and_receive(sent, timeout=self.timeout))
        self.traffic.record(op, label.decode(), sent, got, start, self.measure)
        replies = {}
        for m in got:
            if m.has_content():
                replies[m.metadata.src_node_id] = unpack(m.content)
        self.lost_nodes.update(m.metadata.dst_node_id for m in sent if m.metadata.dst_node_id not in replies)
        return replies

    def _advertise(self, sessions: Sequence[tuple[bytes, Sequence[int], int, int]], label: bytes) -> None:
        """One ``advertise`` round for ``sessions``; their adverts wait in ``_pending``."""
        requests: dict[int, tuple[dict[str, Any], dict[int, np.ndarray]]] = {}
        for session, clients, threshold, length in sessions:
            spec = (tuple(sorted(int(u) for u in clients)), int(threshold), int(length))
            self._pending[session] = (spec, [])
            for node, cs in self._by_node(spec[0]).items():
                fields = requests.setdefault(node, ({"labels": []}, {}))[0]
                i = len(fields["labels"])
                fields["labels"].append(session)
                fields.update({f"clients.{i}": cs, f"threshold.{i}": spec[1], f"length.{i}": spec[2]})
        replies = self._round("advertise", label, requests)
        for node, (fields, _) in replies.items():
            for i, session in enumerate(requests[node][0]["labels"]):
                self._pending[session][1].extend(fields[f"adverts.{i}"])

    def prepare(self, sessions: Sequence[tuple[bytes, Sequence[int], int, int]]) -> None:
        """Advertise keys for upcoming sessions ``(label, clients, threshold, length)`` in one round.

        Each such session later starts at the ``share`` stage, saving a round trip; a session whose
        clients, threshold or length turn out different advertises afresh, so a wrong guess costs
        time, never correctness. Keys are still fresh per session (the label is bound into them).
        """
        if sessions:
            self._advertise(sessions, b"prepare")

    def _by_node(self, clients: Collection[int]) -> dict[int, list[int]]:
        shards: dict[int, list[int]] = {}
        for u in sorted(clients):
            shards.setdefault(self.node_of(u), []).append(u)
        return shards

    def __call__(
        self,
        inputs: Mapping[int, np.ndarray],
        threshold: int,
        *,
        label: bytes = b"",
        drop_before_input: Collection[int] = (),
        drop_after_input: Collection[int] = (),
        keep_uploads: bool = False,
    ) -> SecAggResult:
        """The four stages over the grid; ``drop_*`` are the protocol's simulated dropouts."""
        if not inputs:
            raise ValueError("inputs: secure aggregation needs at least one client")
        (length,) = {len(v) for v in inputs.values()}
        ids = sorted(int(u) for u in inputs)
        server = SecAggServer(threshold, length, label)
        pending = self._pending.pop(label, None)
        if pending is None or pending[0] != (tuple(ids), threshold, length):
            self._advertise([(label, ids, threshold, length)], label)
            pending = self._pending.pop(label)
        adverts = [AdvertisedKeys.from_bytes(b) for b in pending[1]]
        roster = server.collect_keys(adverts)
        roster_msg = [a.to_bytes() for a in roster.values()]
        replies = self._round(
            "share", label, {n: ({"roster": roster_msg}, {}) for n in self._by_node(roster)}
        )
        outgoing: dict[int, dict[int, bytes]] = {}
        for fields, _ in replies.values():
            for key, messages in fields.items():
                if key.startswith("out."):
                    outgoing[int(key[4:])] = {int.from_bytes(m[:_ID], "little"): m for m in messages if m}
        inbox = server.route_shares(outgoing)
        shared = list(server.shared)
        before = set(drop_before_input)
        requests = {}
        for node, cs in self._by_node(shared).items():
            fields = {
                "shared": shared,
                **{f"in.{v}": [_id(u) + m for u, m in inbox[v].items()] or [b""] for v in cs},
            }
            vectors = {u: inputs[u] for u in cs if u not in before}
            self.input_bytes += sum(8 * len(v) for v in vectors.values())
            requests[node] = (fields, vectors)
        replies = self._round("mask", label, requests)
        uploads = {u: y for _, vs in replies.values() for u, y in vs.items()}
        survivors = server.collect_masked(uploads)
        after = set(drop_after_input)
        requests = {
            n: (
                {
                    "shared": shared,
                    "survivors": list(survivors),
                    "clients": [u for u in cs if u not in after],
                },
                {},
            )
            for n, cs in self._by_node(survivors).items()
        }
        replies = self._round("unmask", label, requests)
        responses: dict[int, dict[int, bytes]] = {}
        for fields, _ in replies.values():
            for key, shares in fields.items():
                if key.startswith("shares."):
                    responses[int(key[7:])] = {int.from_bytes(s[:_ID], "little"): s[_ID:] for s in shares}
        total = server.unmask(responses)
        dropped = tuple(sorted(set(ids) - set(survivors)))
        self.dropped[label] = dropped
        return SecAggResult(
            total=total,
            included=survivors,
            dropped=dropped,
            unresponsive=tuple(sorted(set(survivors) - set(responses))),
            traffic=secagg_traffic(sorted(roster), shared, survivors, sorted(responses), length),
            masked_inputs=uploads if keep_uploads else {},
            shares=outgoing,
        )
