"""A shard's sparse inputs to a secure sum, and their fixed-point encodings.

Protocols such as FedGRec upload *dense* vectors under secure aggregation (so the server cannot
see which rows a client touched) but compute them sparsely: a client's vector is zero outside a
few rows. :class:`SparseUpload` keeps the contributions of a node's clients as blocks of rows
``(client position, start index, values)``; the encoders below turn them into what each crypto
mode sends: every client's dense ring vector (``real``), or the shard's sum of the same
encodings (``accounted``: the same integers added directly, so both modes give bit-identical sums).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from fedgraphrec.crypto.fixed_point import FixedPoint

__all__ = [
    "SparseUpload",
    "encode_dense",
    "encode_fixed",
    "encode_sum",
    "flat_entries",
    "flat_index",
    "plain_sizes",
]


@dataclass
class SparseUpload:
    """Every client's input vector of length ``length``, as rows of values at given start indices.

    ``add(client_pos, start, values)`` says: client number ``client_pos[r]`` (a position in
    ``clients``) has ``values[r, :]`` at ``[start[r], start[r] + width)``. A client must not list one
    index twice (each entry is encoded once, as the client would encode its dense vector).
    """

    clients: np.ndarray
    length: int
    blocks: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = field(default_factory=list)

    def add(self, client_pos: torch.Tensor, start: torch.Tensor, values: torch.Tensor) -> None:
        """Add rows (``values`` of shape ``(rows, width)``)."""
        if values.dim() == 1:
            values = values[:, None]
        self.blocks.append((client_pos.long(), start.long(), values.detach()))

    @property
    def device(self) -> torch.device:
        """Where the values live."""
        return self.blocks[0][2].device if self.blocks else torch.device("cpu")

    def max_abs(self) -> float:
        """The largest ``|x|`` of any entry (0 without entries)."""
        return max((float(v.abs().max()) for _, _, v in self.blocks if v.numel()), default=0.0)


def encode_fixed(values: torch.Tensor, fp: FixedPoint, what: str) -> torch.Tensor:
    """``round(x · 2^f)`` as int64, the same integers as :meth:`FixedPoint.encode` (ties to even)."""
    x = values.to(torch.float64, copy=True)
    if x.numel():
        top = x.abs().max().item()
        if not top < fp.max_abs:  # also catches NaN and infinity
            raise OverflowError(
                f"{what}: a contribution is NaN, infinite or beyond the fixed-point range "
                f"|x| < {fp.max_abs} (frac_bits={fp.frac_bits}); training diverged, or lower frac_bits"
            )
    return x.mul_(float(fp.scale)).round_().to(torch.int64)


def flat_index(start: torch.Tensor, width: int) -> torch.Tensor:
    """Every index ``start[r] + j`` (``j < width``) of every row, row-major."""
    return (start[:, None] + torch.arange(width, device=start.device)).reshape(-1)


def encode_sum(upload: SparseUpload, fp: FixedPoint, keep: np.ndarray, what: str) -> torch.Tensor:
    """``Σ`` over the clients with ``keep[pos]`` of their encoded vectors, as one int64 vector.

    Integer addition wraps like the ring ``Z_{2^64}`` and is associative, so shards' sums add up to
    exactly the sum of every client's encoding, in any order.
    """
    keep_pos = torch.from_numpy(np.asarray(keep, dtype=bool)).to(upload.device)
    total = torch.zeros(upload.length, dtype=torch.int64, device=upload.device)
    for pos, start, values in upload.blocks:
        rows = keep_pos[pos]
        enc = encode_fixed(values[rows], fp, what)
        total.index_add_(0, flat_index(start[rows], values.shape[1]), enc.reshape(-1))
    return total


def encode_dense(upload: SparseUpload, fp: FixedPoint, what: str) -> np.ndarray:
    """Every client's dense encoded vector, ``uint64`` of shape ``(clients, length)`` (``real`` mode)."""
    n, length = len(upload.clients), upload.length
    dense = torch.zeros((n, length), dtype=torch.int64)
    for pos, start, values in ((p.cpu(), s.cpu(), v.cpu()) for p, s, v in upload.blocks):
        idx = pos[:, None] * length + flat_index(start, values.shape[1]).view(len(start), -1)
        dense.view(-1).index_add_(0, idx.reshape(-1), encode_fixed(values, fp, what).reshape(-1))
    return dense.numpy().view(np.uint64)


def flat_entries(upload: SparseUpload, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(client position, flat index, value)`` of every entry of the kept clients, grouped by client.

    The rows a client sends in the clear (the unprotected baseline), in a stable client-major order.
    """
    pos_l, idx_l, val_l = [], [], []
    keep_pos = np.asarray(keep, dtype=bool)
    for pos, start, values in upload.blocks:
        width = values.shape[1]
        p = pos.cpu().numpy()
        rows = keep_pos[p]
        pos_l.append(np.repeat(p[rows], width))
        idx_l.append(flat_index(start.cpu()[torch.from_numpy(rows)], width).numpy())
        val_l.append(values.cpu()[torch.from_numpy(rows)].to(torch.float64).reshape(-1).numpy())
    if not pos_l:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64)
    pos_a, idx_a, val_a = np.concatenate(pos_l), np.concatenate(idx_l), np.concatenate(val_l)
    order = np.argsort(pos_a, kind="stable")
    return pos_a[order], idx_a[order], val_a[order]


def plain_sizes(upload: SparseUpload) -> np.ndarray:
    """Bytes each client's rows take in the clear: a 4-byte index and 4-byte floats per row."""
    sizes = np.zeros(len(upload.clients), dtype=np.int64)
    for pos, _, values in upload.blocks:
        sizes += np.bincount(pos.cpu().numpy(), minlength=len(upload.clients)) * (4 + 4 * values.shape[1])
    return sizes
