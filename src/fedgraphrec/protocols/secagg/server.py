"""The server side of secure aggregation: four transport rounds, dropout recovery, the exact sum.

:func:`secure_sum` runs Bonawitz et al.'s protocol (:mod:`fedgraphrec.crypto.secagg.wire`) over a
:class:`~fedgraphrec.runtime.transport.Transport`, one round per stage, the client side answering
on the nodes (:class:`~fedgraphrec.protocols.secagg.client.SecureSumClient`):

0. ``secagg/advertise`` — each participant's two public keys; ``U1`` = the clients whose node answered.
1. ``secagg/share`` — the roster down; each client's Shamir shares up, encrypted under pairwise
   keys (presealed: the transport relays them unchanged); ``U2`` = the clients whose node answered.
2. ``secagg/mask`` — each share forwarded to its holder, with ``U2``; the masked inputs up.
   ``U3`` = the clients whose masked input arrived.
3. ``secagg/unmask`` — ``U3`` down; the shares that remove the survivors' self masks and the masks
   towards dropped clients up. The server rebuilds the seeds and obtains ``Σ_{u∈U3} x_u`` exactly.

A node that stops answering (every round uses ``allow_loss``) loses its clients from that stage on:
before the masked-input stage they are *dropped* (not summed; their pairwise masks are removed
through the others' shares), afterwards *unresponsive* (summed; their self masks are rebuilt from
the others' shares). Every stage needs ``t`` clients, or
:class:`~fedgraphrec.crypto.secagg.wire.SecAggAbortError`.

In ``accounted`` mode the same rounds carry no keys: each node sends its shard's sum of the same
fixed-point encodings, and every stage books exactly the bytes ``real`` mode sends (the ``*_BYTES``
of :mod:`fedgraphrec.crypto.secagg.wire`), so both modes give identical sums and ledgers: the ledger's
booked bytes are the one byte count of secure aggregation.
:func:`plain_sum` is the unprotected baseline (uploads in the clear) for privacy audits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fedgraphrec.crypto.secagg import wire
from fedgraphrec.crypto.secagg.server import SecAggServer
from fedgraphrec.crypto.secagg.wire import (
    ADVERTISE_BYTES,
    ID_BYTES,
    SHARE_MESSAGE_BYTES,
    UNMASK_ENTRY_BYTES,
    AdvertisedKeys,
    ids_to_bytes,
    require,
)
from fedgraphrec.protocols.secagg.roles import ADVERTISE, KINDS, MASK, PLAIN, SHARE, SUFFIX, UNMASK
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part
from fedgraphrec.runtime.transport import Transport

__all__ = ["SumResult", "plain_sum", "secure_sum"]


@dataclass(frozen=True)
class SumResult:
    """The decoded sum and who is in it.

    Attributes:
        total: ``Σ x_u`` over :attr:`included`, float64 of shape ``(length,)``.
        included: client ids whose inputs are summed (``U3``).
        dropped: participants whose inputs are not in the sum (offline before uploading).
        unresponsive: included clients that went offline after uploading (recovered).
    """

    total: torch.Tensor
    included: np.ndarray
    dropped: np.ndarray
    unresponsive: np.ndarray


def _split(ids: np.ndarray, hosted: Mapping[int, np.ndarray], alive: list[int]) -> dict[int, np.ndarray]:
    """``ids`` by the live node that hosts them (nodes without any left out)."""
    out = {}
    for node in alive:
        mine = ids[np.isin(ids, hosted[node])]
        if len(mine):
            out[node] = mine
    return out


def _senders(replies: Mapping[int, Message], name: str) -> np.ndarray:
    got = [r[name].senders for r in replies.values() if name in r]
    return np.sort(np.concatenate([g for g in got if g is not None] or [np.zeros(0, np.int64)]))


def _down(phase: str, stage: str, receivers: np.ndarray, blob: bytes | None, size: int) -> Part:
    """One copy of ``blob`` for each receiver (``None``: a content-free stand-in, accounted mode)."""
    value = None if blob is None else [blob] * len(receivers)
    part = Part(f"{phase}/{SUFFIX[stage]}", KINDS[stage], "server", "client", value, shape="blobs",
                receivers=receivers)  # fmt: skip
    return part.with_sizes(np.full(len(receivers), size, dtype=np.int64))


def secure_sum(
    transport: Transport,
    *,
    phase: str,
    session: str,
    participants: Mapping[int, np.ndarray],
    length: int,
    threshold: int,
    frac_bits: int,
    device: torch.device | str = "cpu",
) -> SumResult:
    """``Σ x_u`` over the participants whose masked inputs arrive (module docstring).

    Args:
        transport: the rounds to the nodes (its crypto mode decides ``real`` or ``accounted``).
        phase: ledger phase prefix of the stages' messages (e.g. ``"train/upload"``).
        session: the session label, unique per aggregation (bound into every key and mask).
        participants: node id → the clients it hosts that take part.
        length: ring elements per input.
        threshold: ``t``, the clients needed at every stage.
        frac_bits: fixed-point fractional bits of the encoding.
        device: where the decoded sum goes.

    Raises:
        SecAggAbortError: fewer than ``threshold`` clients are left at some stage.
    """
    real = transport.net.real_for(phase)
    hosted = {n: np.sort(np.asarray(ids, dtype=np.int64)) for n, ids in participants.items() if len(ids)}
    everyone = np.sort(np.concatenate(list(hosted.values()) or [np.zeros(0, np.int64)]))
    base: dict[str, Any] = {
        "session": session,
        "phase": phase,
        "real": real,
        "threshold": int(threshold),
        "length": int(length),
        "frac_bits": int(frac_bits),
        "n_clients": len(everyone),
    }

    def live() -> list[int]:
        return [n for n in sorted(hosted) if n not in transport.lost]

    def fields(ids: np.ndarray, **extra: Any) -> dict[str, Any]:
        return {**base, "clients": ids.tolist(), **extra}

    require(len(everyone), threshold, wire.ADVERTISE)
    # ---- stage 0: advertise keys
    replies = transport.round(ADVERTISE, {n: Message(fields=fields(ids)) for n, ids in hosted.items()},
                              allow_loss=True)  # fmt: skip
    u1 = np.sort(np.concatenate([hosted[n] for n in replies] or [np.zeros(0, np.int64)]))
    require(len(u1), threshold, wire.ADVERTISE)
    server = SecAggServer(threshold, length, session.encode())
    roster_blob = None
    if real:
        adverts = [AdvertisedKeys.from_bytes(b) for r in replies.values() for b in r["adverts"].value]
        roster = server.collect_keys(adverts)
        roster_blob = b"".join(roster[v].to_bytes() for v in sorted(roster))
    # ---- stage 1: roster down, shares up
    requests = {
        n: Message(
            {"roster": _down(phase, ADVERTISE, ids, roster_blob, ADVERTISE_BYTES * len(u1))},
            fields(ids, n_advertised=len(u1)),
        )
        for n, ids in _split(u1, hosted, live()).items()
    }
    replies = transport.round(SHARE, requests, allow_loss=True)
    u2 = np.sort(np.concatenate([requests[n].fields["clients"] for n in replies] or [[]]).astype(np.int64))
    require(len(u2), threshold, wire.SHARE)
    shares: Part | None = None
    if real:
        got = [r["shares"] for r in replies.values() if "shares" in r]
        shares = Part.concat(got) if got else None
        outgoing: dict[int, dict[int, bytes]] = {int(u): {} for u in u2}
        if shares is not None:
            assert shares.senders is not None and shares.seal_to is not None
            for u, v, blob in zip(
                shares.senders.tolist(), shares.seal_to.tolist(), shares.value, strict=True
            ):
                outgoing[u][v] = blob
        server.route_shares(outgoing)
    # ---- stage 2: shares forwarded to their holders, masked inputs up
    requests = {}
    for n, ids in _split(u2, hosted, live()).items():
        msg = Message(fields=fields(ids, shared=u2.tolist()))
        if shares is not None:
            assert shares.senders is not None and shares.seal_to is not None
            pick = np.flatnonzero(np.isin(shares.senders, u2) & np.isin(shares.seal_to, ids))
            if len(pick):
                msg.add("shares", shares.forward(pick, shares.seal_to[pick], "client"))
        elif not real and len(u2) > 1:
            stand_in = Part(f"{phase}/{SUFFIX[SHARE]}", KINDS[SHARE], "server", "client", None, shape="blobs",
                            protection="sealed", presealed=True, receivers=ids, seal_to_role="client",
                            from_role="client", repeat=len(u2) - 1)  # fmt: skip
            msg.add("shares", stand_in.with_sizes(np.full(len(ids), SHARE_MESSAGE_BYTES, dtype=np.int64)))
        requests[n] = msg
    replies = transport.round(MASK, requests, allow_loss=True)
    u3 = _senders(replies, "masked")
    require(len(u3), threshold, wire.MASK)
    masked = [r["masked"] for r in replies.values() if "masked" in r]
    total: torch.Tensor | None = None
    if real:
        uploads: dict[int, np.ndarray] = {}
        for p in masked:
            assert p.senders is not None
            uploads.update(zip(p.senders.tolist(), list(p.value), strict=True))
        server.collect_masked(uploads)
    else:
        for p in masked:
            value = torch.as_tensor(p.value)
            total = value.clone() if total is None else total.add_(value.to(total.device))
    # ---- stage 3: survivors down, revealed shares up
    survivors = ids_to_bytes(u3) if real else None
    requests = {
        n: Message(
            {"survivors": _down(phase, UNMASK, ids, survivors, ID_BYTES * len(u3))},
            fields(ids, survivors=u3.tolist(), shared=u2.tolist()),
        )
        for n, ids in _split(u3, hosted, live()).items()
    }
    replies = transport.round(UNMASK, requests, allow_loss=True)
    u4 = _senders(replies, "reveal")
    require(len(u4), threshold, wire.UNMASK)
    if real:
        entry = UNMASK_ENTRY_BYTES
        responses: dict[int, dict[int, bytes]] = {}
        for r in replies.values():
            p = r["reveal"]
            assert p.senders is not None
            for h, blob in zip(p.senders.tolist(), p.value, strict=True):
                responses[h] = {
                    int.from_bytes(blob[k : k + ID_BYTES], "little"): blob[k + ID_BYTES : k + entry]
                    for k in range(0, len(blob), entry)
                }
        total = torch.from_numpy(server.unmask(responses).view(np.int64).copy())
    assert total is not None
    total = total.to(device)
    decoded = torch.ldexp(
        total.to(torch.float64), torch.tensor(-frac_bits, dtype=torch.float64, device=device)
    )
    return SumResult(decoded, u3, np.setdiff1d(everyone, u3), np.setdiff1d(u3, u4))


def plain_sum(
    transport: Transport,
    *,
    phase: str,
    session: str,
    participants: Mapping[int, np.ndarray],
    length: int,
    device: torch.device | str = "cpu",
) -> SumResult:
    """The unprotected baseline: every client sends its rows in the clear; the server adds them.

    For privacy audits (protection off): the server's transcript holds each client's own entries
    (``kind="plain-upload"``, rows ``(flat index, value)``); the sum is exact in float64 (no fixed
    point). Clients that go offline before uploading send nothing.
    """
    hosted = {n: np.sort(np.asarray(ids, dtype=np.int64)) for n, ids in participants.items() if len(ids)}
    everyone = np.sort(np.concatenate(list(hosted.values()) or [np.zeros(0, np.int64)]))
    base = {"session": session, "phase": phase}
    requests = {n: Message(fields={**base, "clients": ids.tolist()}) for n, ids in hosted.items()}
    replies = transport.round(PLAIN, requests, allow_loss=True)
    total = torch.zeros(length, dtype=torch.float64, device=device)
    for r in replies.values():
        if "upload" in r:
            rows = torch.as_tensor(r["upload"].value).to(device)
            total.index_add_(0, rows[:, 0].long(), rows[:, 1])
    included = _senders(replies, "upload")
    return SumResult(total, included, np.setdiff1d(everyone, included), np.zeros(0, dtype=np.int64))
