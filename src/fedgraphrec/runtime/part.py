"""One batch of logical messages of one phase and kind: :class:`Part`.

A :class:`Part` is what a protocol puts into a :class:`~fedgraphrec.runtime.message.Message`: who
sends and receives each logical message, how it is protected, its content in one of three shapes
(rows, broadcast, blobs), and, in transit, its ciphertexts. It counts the bytes every message has on
the wire (for the ledger) and lets the server forward a selection without copying. The shapes and
the way the transport seals and books parts are described in :mod:`fedgraphrec.runtime.message`,
which re-exports :class:`Part` and :data:`Shape` for existing callers; the row-block arithmetic it
relies on is in :mod:`~fedgraphrec.runtime.blocks`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

import numpy as np
import torch

from fedgraphrec.crypto.aead import ciphertext_size
from fedgraphrec.runtime.blobs import blob_lengths
from fedgraphrec.runtime.blocks import (
    _take,
    block_bounds,
    block_sizes,
    equal_size_of,
    equal_sizes,
    selected_rows,
)
from fedgraphrec.runtime.codec import dtype_of, encoded_size, row_layout

__all__ = ["BOOKED_ONCE", "PROTECTIONS", "Part", "Protection", "Shape"]

BOOKED_ONCE = "booked_once"
"""A :attr:`Part.meta` flag: this hop relays a message the ledger (and transcript) booked on its first
hop, so the transport does not book it again (P4GCN's coordinator, a wire between two organisations)."""

Shape = Literal["rows", "broadcast", "blobs"]
Protection = Literal["plain", "sealed", "pseudonymous", "masked", "homomorphic", "asymmetric"]
"""How a part is protected on the way (:mod:`fedgraphrec.runtime.network` says what each one means)."""
PROTECTIONS: tuple[str, ...] = get_args(Protection)


def _as_index(at: np.ndarray) -> torch.Tensor:
    """``at`` as a tensor to index with, read-only arrays included (a static route's; only read)."""
    if at.flags.writeable:
        return torch.from_numpy(at)
    with warnings.catch_warnings():  # torch warns about writes through it; an index is never written
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(at)


@dataclass
class Part:
    """One batch of logical messages of one phase and kind (:mod:`fedgraphrec.runtime.message`).

    Attributes:
        phase: the protocol phase the messages belong to (ledger and transcript name; bound into
            sealed messages).
        kind: what the payloads are (``"user_embedding"``, ``"item_gradient"``, ...).
        sender_role: role of the sending parties on this hop (``"server"`` for the server).
        receiver_role: role of the receiving parties on this hop (``"server"`` for the server).
        value: the content (rows or broadcast: a tensor or array; blobs: a sequence of byte strings,
            a list or :class:`~fedgraphrec.runtime.blobs.PackedBlobs`).
            ``None`` while a sealed part is in transit in ``real`` mode.
        shape: ``"rows"``, ``"broadcast"`` or ``"blobs"``.
        protection: ``plain``, ``sealed``, ``pseudonymous``, ``masked``, ``homomorphic`` or
            ``asymmetric``.
        senders: client id of each logical message's sender (``None``: the server sends).
        receivers: client id of each logical message's receiver (``None``: the server receives).
        counts: rows per logical message (rows shape; ``None``: one row each).
        seal_to_role: role of the parties a sealed part is finally for (it travels through the
            server): bound into each message's associated data.
        seal_to: client id each sealed message is finally for (unicast, bound into its associated
            data). ``None``: a multicast message the server fans out unchanged to several parties of
            ``seal_to_role``; it is bound to the multicast name and each receiver checks the sender.
        from_role: the role of the parties that first sent a part the server relays (``senders``
            are their ids); empty for a part sent by ``sender_role`` itself.
        bound_senders: the sender names bound into sealed messages when receivers know a message by
            what it is rather than by who sent it (default ``sender_role:id``).
        sealed: the ciphertexts of a sealed part (``real`` mode), one per logical message (a
            batched part's one ciphertext is the ``bytearray`` the cipher wrote it into).
        presealed: the blobs are already ciphertexts of a sub-protocol's own AEAD (secure
            aggregation's shares, each under the pairwise key of its sender and receiver): the
            transport relays them as they are and never seals or opens them under the group key.
            Only for ``sealed`` blobs; in ``real`` mode they must still be present, and an attached
            adversary may alter them like any sealed message the server forwards.
        repeat: each logical message stands for ``repeat`` equal messages (ledger only). For the
            content-free stand-in of an ``n²`` stage in ``accounted`` mode (every client's share
            to each of ``n - 1`` peers); refused in ``real`` mode, where every message is carried.
        summed: ``accounted`` mode only: ``value`` is the *sum* of the logical messages' contents
            (masked inputs, whose sum is all the receiver may use), standing in for the messages
            themselves; each message is booked at its own size and transcripts record no payload.
            Refused in ``real`` mode, where every masked input is carried.
        meta: small public fields of the part (ints, floats, strings).
        index: rows shape: the part's rows are ``value[index]`` (a view; ``None``: ``value`` itself);
            for a batched part in transit: which of the batch's messages these are.
        batched: in transit, ``sealed`` holds one ciphertext of every message of the part the
            node sealed (:mod:`fedgraphrec.runtime.batching`, single-node transports only).
    """

    phase: str
    kind: str
    sender_role: str
    receiver_role: str
    value: Any = None
    shape: Shape = "rows"
    protection: Protection = "plain"
    senders: np.ndarray | None = None
    receivers: np.ndarray | None = None
    counts: np.ndarray | None = None
    seal_to_role: str = ""
    seal_to: np.ndarray | None = None
    from_role: str = ""
    bound_senders: list[str] | None = None
    sealed: list[bytes | bytearray | None] | None = None
    presealed: bool = False
    repeat: int = 1
    summed: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    index: np.ndarray | None = None
    batched: bool = False
    _sizes: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.protection not in PROTECTIONS:
            raise ValueError(f"{self.kind}: protection must be one of {PROTECTIONS}, got {self.protection!r}")
        if self.shape not in ("rows", "broadcast", "blobs"):
            raise ValueError(f"{self.kind}: shape must be rows, broadcast or blobs, got {self.shape!r}")
        for name in ("senders", "receivers", "counts", "seal_to", "index"):
            ids = getattr(self, name)
            if ids is not None and not (type(ids) is np.ndarray and ids.dtype == np.int64):
                setattr(self, name, np.asarray(ids, dtype=np.int64))
        if self.shape == "broadcast" and self.protection == "sealed":
            raise ValueError(f"{self.kind}: a broadcast is a copy per receiver; seal rows instead")
        if self.index is not None and self.shape != "rows" and not self.batched:
            raise ValueError(f"{self.kind}: only a rows part can be a view (index)")
        if self.presealed and (self.protection != "sealed" or self.shape != "blobs"):
            raise ValueError(f"{self.kind}: presealed parts are sealed blobs (a sub-protocol's ciphertexts)")
        if self.repeat < 1:
            raise ValueError(f"{self.kind}: repeat must be at least 1, got {self.repeat}")
        if self.summed and self.protection != "masked":
            raise ValueError(f"{self.kind}: only masked messages may travel as their sum (accounted mode)")

    # ------------------------------------------------------------------ counting
    @property
    def origin_role(self) -> str:
        """The role of the parties that first sent these messages."""
        return self.from_role or self.sender_role

    @property
    def multicast(self) -> bool:
        """Whether the sealed messages are bound to a multicast receiver (no ``seal_to``)."""
        return self.seal_to is None

    @property
    def n_messages(self) -> int:
        """Number of logical messages in the part."""
        for ids in (self.counts, self.senders, self.receivers):
            if ids is not None:
                return len(ids)
        if self.sealed is not None:
            return len(self.sealed)
        if self.shape == "blobs":
            return len(self.value)
        if self.shape == "broadcast":
            return 1
        if self.index is not None:
            return len(self.index)
        return int(self.value.shape[0]) if self.value is not None else 0

    def sizes(self) -> np.ndarray:
        """Bytes of every logical message on the wire (codec encoding, plus AEAD overhead if sealed).

        Exactly what ``real`` mode transmits, so ``real`` and ``accounted`` ledgers agree.
        """
        if self._sizes is not None:
            return self._sizes
        n = self.n_messages
        if self.sealed is not None and all(b is not None for b in self.sealed):
            return np.fromiter(map(len, self.sealed), dtype=np.int64, count=n)  # type: ignore[arg-type]
        if self.shape == "blobs":
            blobs = blob_lengths(self.value)
            sealed_here = self.protection == "sealed" and not self.presealed  # the transport adds the AEAD
            return blobs + ciphertext_size(0) if sealed_here else blobs
        value = self.value
        if self.shape == "broadcast" and self.counts is None:
            return equal_sizes(n, encoded_size(tuple(value.shape), dtype_of(value)))
        header, per_row = row_layout(tuple(value.shape[1:]), dtype_of(value))
        if self.protection == "sealed":
            header += ciphertext_size(0)
        if self.counts is None:
            return equal_sizes(n, header + per_row)
        return block_sizes(self.counts, header, per_row)

    def uniform_size(self) -> int | None:
        """The size every logical message has, when the part says so without a per-message array.

        Rows parts of one row per message (the common relayed row) qualify; the transport then
        books them without materialising a size per message.
        """
        if (
            self._sizes is not None
            or self.sealed is not None
            or self.shape != "rows"
            or self.counts is not None
        ):
            return None
        if self.presealed or self.summed:
            return None
        if self.value is None:
            return None
        header, per_row = row_layout(tuple(self.value.shape[1:]), dtype_of(self.value))
        return header + per_row + ciphertext_size(0) if self.protection == "sealed" else header + per_row

    def with_sizes(self, sizes: np.ndarray) -> Part:
        """A copy whose ledger sizes are ``sizes`` (a sealed part in transit keeps its plaintext's)."""
        return replace(self, _sizes=np.asarray(sizes, dtype=np.int64))

    # ------------------------------------------------------------------ routing (server side)
    def forward(
        self,
        pick: np.ndarray,
        receivers: np.ndarray,
        receiver_role: str | None = None,
        senders: np.ndarray | None = None,
    ) -> Part:
        """The server relays messages ``pick`` (in that order) to ``receivers``, unchanged.

        What the server holds of a sealed part in ``real`` mode is ciphertexts; it forwards them
        as they are (it cannot read them). The forwarded part is sent by the server. ``senders``:
        ``self.senders[pick]`` when the caller keeps it (a static route relayed every layer).
        """
        pick = np.asarray(pick, dtype=np.int64)
        receiver_role = receiver_role or self.seal_to_role or self.receiver_role
        receivers = np.asarray(receivers, dtype=np.int64)
        if len(pick) != len(receivers):
            raise ValueError(f"{self.kind}: {len(pick)} forwarded messages for {len(receivers)} receivers")
        if senders is None and self.senders is not None:
            senders = self.senders[pick]
        bound = None if self.bound_senders is None else _take(self.bound_senders, pick)
        value: Any = None
        counts = None
        index: np.ndarray | None = None
        if self.value is not None:
            if self.shape == "blobs":
                value = [self.value[k] for k in pick.tolist()]
            elif self.shape == "broadcast":
                value = self.value
                counts = None if self.counts is None else self.counts[pick]
            else:  # a view of the rows received: no copy
                value = self.value
                n_rows = len(self.index) if self.index is not None else int(self.value.shape[0])
                # None: every message in order, so the rows (or the view) stay as they are
                rows = selected_rows(self.counts, n_rows, pick)
                index = self.index if rows is None else rows if self.index is None else self.index[rows]
                counts = None if self.counts is None else self.counts[pick]
        elif self.counts is not None:
            counts = self.counts[pick]
        if self.batched:  # one ciphertext of the whole part: forward it with the messages' positions
            index = pick if self.index is None else self.index[pick]
            sealed = self.sealed
        else:
            sealed = None if self.sealed is None else _take(self.sealed, pick)
        sizes = None
        if value is None or self.uniform_size() is None:
            every = self.sizes()
            size = equal_size_of(every)
            sizes = every[pick] if size is None else equal_sizes(len(pick), size)
        return Part(
            phase=self.phase,
            kind=self.kind,
            sender_role="server",
            receiver_role=receiver_role,
            value=value,
            shape=self.shape,
            protection=self.protection,
            senders=senders,
            receivers=receivers,
            counts=counts,
            seal_to_role=self.seal_to_role,
            seal_to=None if self.seal_to is None else self.seal_to[pick],
            from_role=self.origin_role,
            bound_senders=bound,
            sealed=sealed,
            presealed=self.presealed,
            repeat=self.repeat,
            summed=self.summed,
            meta=dict(self.meta),
            index=index,
            batched=self.batched,
            _sizes=sizes,
        )

    def message_rows(self, which: np.ndarray | None = None) -> Any:
        """The rows of messages ``which`` (all by default) of a one-row-per-message part, in order.

        Reads through a view without copying the rest (``value[index[which]]``).
        """
        if self.counts is not None or self.shape != "rows":
            raise ValueError(f"{self.kind}: message_rows needs one row per message")
        if which is None:
            return self.rows()
        at = np.asarray(which, dtype=np.int64)
        if self.index is not None:
            at = self.index[at]
        if isinstance(self.value, torch.Tensor):
            return self.value.index_select(0, _as_index(at))
        return self.value[at]

    def rows(self) -> Any:
        """The part's rows as one tensor or array (a view is copied out: ``value[index]``)."""
        if self.index is None or self.value is None:
            return self.value
        if isinstance(self.value, torch.Tensor):  # index_select: advanced indexing's copy, faster
            return self.value.index_select(0, _as_index(self.index))
        return self.value[self.index]

    @staticmethod
    def concat(parts: Sequence[Part]) -> Part:
        """One part holding the messages of ``parts`` in order (same phase, kind, roles, protection)."""
        if not parts:
            raise ValueError("concat needs at least one part")
        first = parts[0]
        if len(parts) == 1:
            return first
        for p in parts[1:]:
            same = (p.phase, p.kind, p.sender_role, p.receiver_role, p.protection, p.shape, p.origin_role,
                    p.presealed, p.repeat, p.summed)  # fmt: skip
            if same != (first.phase, first.kind, first.sender_role, first.receiver_role, first.protection,
                        first.shape, first.origin_role, first.presealed, first.repeat,
                        first.summed):  # fmt: skip
                raise ValueError(f"{first.phase}: cannot concatenate parts of different kinds or roles")

        def ids(name: str) -> np.ndarray | None:
            got = [getattr(p, name) for p in parts]
            if all(g is None for g in got):
                return None
            if any(g is None for g in got):
                raise ValueError(f"{first.phase}: some parts name their {name} and some do not")
            return np.concatenate(got)

        value: Any = None
        index: np.ndarray | None = None
        if all(p.value is not None for p in parts):
            if first.shape == "blobs":
                value = [b for p in parts for b in p.value]
            elif first.shape == "rows" and all(p.value is first.value for p in parts):
                value = first.value  # views of one table stay a view
                n = int(first.value.shape[0])
                got = [np.arange(n, dtype=np.int64) if p.index is None else p.index for p in parts]
                index = np.concatenate(got)
            elif isinstance(first.value, torch.Tensor):
                value = torch.cat([torch.as_tensor(p.rows()) for p in parts])
            else:
                value = np.concatenate([p.rows() for p in parts])
        counts = ids("counts")
        if counts is None and first.counts is None and any(p.counts is not None for p in parts):
            raise ValueError(f"{first.phase}: cannot mix parts with and without row counts")
        sealed = None if first.sealed is None else [b for p in parts for b in (p.sealed or [])]
        if first.batched:
            if any(p.sealed != first.sealed for p in parts):
                raise ValueError(f"{first.phase}: cannot concatenate messages of different sealed batches")
            sealed = first.sealed
            index = np.concatenate([np.zeros(0, np.int64) if p.index is None else p.index for p in parts])
        bound = None if first.bound_senders is None else [b for p in parts for b in (p.bound_senders or [])]
        return replace(
            first,
            value=value,
            senders=ids("senders"),
            receivers=ids("receivers"),
            counts=counts,
            seal_to=ids("seal_to"),
            bound_senders=bound,
            sealed=sealed,
            index=index,
            _sizes=np.concatenate([p.sizes() for p in parts]),
        )

    def blocks(self) -> Iterator[Any]:
        """The content of every logical message (rows shape: its block of rows)."""
        if self.shape == "blobs":
            yield from self.value
            return
        if self.shape == "broadcast":
            for _ in range(self.n_messages):
                yield self.value
            return
        value = self.rows()
        bounds = block_bounds(self.counts, int(value.shape[0]))
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            yield value[a:b]
