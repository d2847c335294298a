"""Secure aggregation of sparse client contributions over the old in-process ``Network``.

Kept for the protocols not yet written as party programs (FedMF, P-GCN, FedGRec); party
programs use :mod:`fedgraphrec.protocols.secagg` (the same stages as transport
rounds, the inputs computed on the nodes). Delete this module once nothing imports it.

Protocols such as FedGRec upload *dense* vectors under secure aggregation (so the server cannot see
which rows a client touched), but compute them sparsely: a client's vector is zero outside a few
rows. :class:`SparseUpload` keeps contributions as blocks of rows ``(client, start index, values)``,
and :func:`secure_aggregate` returns the exact fixed-point sum over the clients that uploaded:

* crypto mode ``real`` densifies each client's vector, encodes it and runs the four-stage protocol
  of :mod:`fedgraphrec.crypto.secagg` (pairwise masks, Shamir-shared seeds, dropout recovery);
* crypto mode ``accounted`` adds the same fixed-point encodings directly, so both modes give
  bit-identical sums, and records the same bytes through :func:`~fedgraphrec.crypto.secagg.secagg_traffic`.

Both modes refuse, with :class:`~fedgraphrec.crypto.secagg_wire.SecAggAbortError`, when fewer clients than the
threshold are left.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fedgraphrec.crypto.fixed_point import FixedPoint
from fedgraphrec.crypto.secagg import SecAggResult, StageTraffic, secagg_traffic, secure_sum
from fedgraphrec.crypto.secagg_wire import SecAggAbortError
from fedgraphrec.protocols.secagg.upload import (
    SparseUpload,
    check_threshold,
    encode_fixed,
    flat_index,
    threshold_for,
)
from fedgraphrec.runtime import Network
from fedgraphrec.runtime.network import Protection

__all__ = [
    "AggregateResult",
    "SecureSum",
    "SparseUpload",
    "check_threshold",
    "plain_aggregate",
    "secure_aggregate",
    "threshold_for",
]


SecureSum = Callable[..., SecAggResult]
"""Runs the four stages for ``inputs`` (signature of :func:`~fedgraphrec.crypto.secagg.secure_sum`).

The in-process default is :func:`~fedgraphrec.crypto.secagg.secure_sum`; an engine that crosses
processes (``fedgraphrec.runtime.flower``) passes one that runs each stage on the nodes hosting the
clients. Its result names who actually took part, which may include clients that really went offline.
"""


@dataclass(frozen=True)
class AggregateResult:
    """The decoded sum and who is in it."""

    total: torch.Tensor  # float64, shape (length,)
    included: np.ndarray  # client ids whose inputs are summed
    dropped: np.ndarray  # dropped before uploading (not summed)
    unresponsive: np.ndarray  # dropped after uploading (summed)


_PROTECTION: dict[str, Protection] = {
    "advertise-keys": "plain",  # public keys
    "share-keys": "sealed",  # Shamir shares, AES-GCM between two clients
    "masked-input": "masked",  # x_u plus masks that cancel only in the sum
    "unmask": "plain",  # the shares the protocol reveals to the server by design
}


def _record(net: Network, phase: str, traffic: Sequence[StageTraffic], result: SecAggResult | None) -> None:
    """Put each stage's messages in the ledger (``repeat`` avoids an n² array for the share stage).

    With a ``real`` run's ``result``, the protected stages carry what was actually sent: each
    client's sealed share messages (one bundle per sender, and per recipient on the way down) and
    the masked inputs.
    """
    for t in traffic:
        if not t.clients or not t.messages_each:
            continue
        ids = np.asarray(t.clients, dtype=np.int64)
        payloads: list[Any] | None = None
        if result is not None and t.stage == "share-keys":
            if t.sender == "client":
                payloads = [[result.shares[u][v] for v in sorted(result.shares[u])] for u in t.clients]
            else:
                payloads = [
                    [result.shares[u][v] for u in sorted(result.shares) if u != v and v in result.shares[u]]
                    for v in t.clients
                ]
        elif result is not None and t.stage == "masked-input":
            payloads = [result.masked_inputs[u] for u in t.clients]
        net.transmit(
            f"{phase}/secagg-{t.stage}",
            t.sender,
            t.receiver,
            t.bytes_each,
            count=len(ids),
            repeat=t.messages_each,
            kind=f"secagg-{t.stage}",
            protection=_PROTECTION[t.stage],
            payloads=payloads,
            senders=ids if t.sender == "client" else None,
            receivers=ids if t.receiver == "client" else None,
        )


def secure_aggregate(
    net: Network,
    phase: str,
    upload: SparseUpload,
    *,
    threshold: int,
    fp: FixedPoint,
    label: bytes,
    drop_before: np.ndarray | None = None,
    drop_after: np.ndarray | None = None,
    summer: SecureSum | None = None,
) -> AggregateResult:
    """Exact fixed-point ``Σ`` of the uploaded vectors of ``upload.clients`` minus ``drop_before``.

    Args:
        net: the protocol's network (ledger, crypto mode, transcripts).
        phase: ledger phase prefix, e.g. ``"train/upload"``.
        upload: the contributions.
        threshold: ``t`` of the secure aggregation.
        fp: fixed-point encoding of the values.
        label: session label (unique per round and purpose).
        drop_before: client ids that go offline before uploading (not summed).
        drop_after: client ids that go offline after uploading, before unmasking (summed).
        summer: who runs the ``real`` protocol (default: in-process :func:`secure_sum`); clients it
            reports as dropped or unresponsive are treated as such.

    Raises:
        SecAggAbortError: fewer than ``threshold`` clients upload or answer the unmask request.
    """
    clients = np.asarray(upload.clients, dtype=np.int64)
    before = np.intersect1d(clients, drop_before if drop_before is not None else [])
    after = np.intersect1d(clients, drop_after if drop_after is not None else [])
    device = upload.blocks[0][2].device if upload.blocks else torch.device("cpu")
    keep_pos = torch.from_numpy(~np.isin(clients, before)).to(device)
    top = max((float(v.abs().max()) for _, _, v in upload.blocks if v.numel()), default=0.0)
    fp.check_sum(len(clients), top, phase)
    included = clients[keep_pos.numpy()]
    if net.real:
        dense = torch.zeros((len(clients), upload.length), dtype=torch.int64)
        for pos, start, values in ((p.cpu(), st.cpu(), v.cpu()) for p, st, v in upload.blocks):
            idx = pos[:, None] * upload.length + flat_index(start, values.shape[1]).view(len(start), -1)
            dense.view(-1).index_add_(0, idx.reshape(-1), encode_fixed(values, fp, phase).reshape(-1))
        inputs = {int(u): dense[i].numpy().view(np.uint64).copy() for i, u in enumerate(clients)}
        run: SecureSum = secure_sum if summer is None else summer
        result = run(
            inputs,
            threshold,
            label=label,
            drop_before_input=[int(u) for u in before],
            drop_after_input=[int(u) for u in after],
            keep_uploads=True,
        )
        total = torch.from_numpy(result.total.view(np.int64).copy()).to(device)
        traffic = result.traffic
        real_result: SecAggResult | None = result
        included = np.asarray(result.included, dtype=np.int64)
        before = np.asarray(result.dropped, dtype=np.int64)
        after = np.asarray(result.unresponsive, dtype=np.int64)
    else:
        survivors = included
        responders = np.setdiff1d(survivors, after)
        for count, stage in (
            (len(clients), "advertise-keys"),
            (len(survivors), "masked-input"),
            (len(responders), "unmask"),
        ):
            if count < threshold:
                raise SecAggAbortError(
                    f"secure aggregation aborted at stage {stage}: only {count} clients left, "
                    f"below the threshold {threshold}"
                )
        total = torch.zeros(upload.length, dtype=torch.int64, device=device)
        for pos, start, values in upload.blocks:
            keep = keep_pos[pos]
            enc = encode_fixed(values[keep], fp, phase)
            total.index_add_(0, flat_index(start[keep], values.shape[1]), enc.reshape(-1))
        traffic = secagg_traffic(
            clients.tolist(), clients.tolist(), survivors.tolist(), responders.tolist(), upload.length
        )
        real_result = None
    _record(net, phase, traffic, real_result)
    decoded = torch.ldexp(
        total.to(torch.float64), torch.tensor(-fp.frac_bits, dtype=torch.float64, device=device)
    )
    return AggregateResult(decoded, included, before, after)


def plain_aggregate(
    net: Network, phase: str, upload: SparseUpload, *, drop_before: np.ndarray | None = None
) -> AggregateResult:
    """The unprotected baseline: every client sends its rows in the clear and the server adds them.

    For privacy audits (protection off): the server's transcript holds each client's own rows
    (``kind="plain-upload"``, one ``[(starts, values), ...]`` list per client, one pair per block),
    the ledger counts a sparse encoding (4-byte index + 4-byte floats per row), and the sum is exact
    in float64 (no fixed point). Clients in ``drop_before`` send nothing.
    """
    clients = np.asarray(upload.clients, dtype=np.int64)
    before = np.intersect1d(clients, drop_before if drop_before is not None else [])
    keep = ~np.isin(clients, before)
    device = upload.blocks[0][2].device if upload.blocks else torch.device("cpu")
    total = torch.zeros(upload.length, dtype=torch.float64, device=device)
    sizes = np.zeros(len(clients), dtype=np.int64)
    keep_t = torch.from_numpy(keep).to(device)
    for pos, start, values in upload.blocks:
        rows = keep_t[pos]
        total.index_add_(
            0, flat_index(start[rows], values.shape[1]), values[rows].to(torch.float64).reshape(-1)
        )
        sizes += np.bincount(pos.cpu().numpy(), minlength=len(clients)) * (4 + 4 * values.shape[1])
    payloads = None
    if net.transcript.enabled:  # each client's own rows: one stable sort per block, then split
        per_block = []
        for pos, start, values in upload.blocks:
            p = pos.cpu().numpy()
            order = np.argsort(p, kind="stable")
            cuts = np.cumsum(np.bincount(p, minlength=len(clients)))[:-1]
            per_block.append(
                list(
                    zip(
                        np.split(start.cpu().numpy()[order], cuts),
                        np.split(values.cpu().numpy()[order], cuts),
                        strict=True,
                    )
                )
            )
        payloads = [[blocks[i] for blocks in per_block] for i in np.flatnonzero(keep)]
    net.transmit(
        f"{phase}/plain-upload",
        "client",
        "server",
        sizes[keep],
        kind="plain-upload",
        protected=False,
        payloads=payloads,
        senders=clients[keep],
    )
    return AggregateResult(total, clients[keep], before, np.zeros(0, dtype=np.int64))
