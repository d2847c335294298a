"""The side owner's half of the packed CKKS sandwich: :class:`PackedCKKSPublic` and :func:`packed_sandwich`.

Everything here works with public material only (parameters, public key, rotation keys): forming
``[T] = left · [M]`` block by block, the baby-step/giant-step diagonal product ``[T] · right``, the
re-randomising noise ``Enc_pk(E)`` and the check that results stay within the decryptable range.
The key owner's half, which holds the secret key, is
:class:`~fedgraphrec.crypto.he.packed.PackedCKKSBackend`; the slot layout, the depth and scale
budget and the precision contract are described in :mod:`fedgraphrec.crypto.he.packed`, which
re-exports both names here for existing callers. Keeping the two halves apart shows, module by
module, that the side owner's computation never touches a secret.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from fedgraphrec.crypto.he.base import EncMatrix, check_sandwich, require_extra

__all__ = ["PackedCKKSPublic", "packed_sandwich"]


def _seal() -> Any:
    """TenSEAL's bindings of Microsoft SEAL (optional extra ``[he]``)."""
    return require_extra("tenseal.sealapi", "he").sealapi


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(n)))


@dataclass(frozen=True)
class PackedCKKSPublic:
    """Everything the side owner needs, and nothing secret.

    Attributes:
        context: SEAL context (parameters only).
        encoder: CKKS encoder.
        evaluator: homomorphic evaluator.
        encryptor: public-key encryptor (for the noise ``Enc_pk(E)``).
        galois_keys: rotation keys for the steps ``i·R`` and ``g·n1·R``.
        dim_pad: ``D``, the padded row length (a power of two).
        rows_per_block: ``R = slots / D``.
        baby: ``n1``, baby steps of the diagonal method.
        mid_scale: scale of ``[T]`` after its rescale.
        out_scale: scale of the result (not rescaled again, see the module docstring).
        middle_bound: public bound on ``|M|`` entries; :meth:`PackedCKKSBackend.encrypt` refuses
            larger ones, so the side owner can bound the result without seeing ``M``.
        result_limit: ``|y|`` must stay below this (``2^(q0 + q1 - 1 - out_scale_bits)``), or the
            result would wrap around the modulus and decrypt to garbage.
    """

    context: Any
    encoder: Any
    evaluator: Any
    encryptor: Any
    galois_keys: Any
    dim_pad: int
    rows_per_block: int
    baby: int
    mid_scale: float
    out_scale: float
    middle_bound: float = 8.0
    result_limit: float = 2.0**9

    @property
    def slots(self) -> int:
        """Number of CKKS slots ``S = R·D``."""
        return self.dim_pad * self.rows_per_block

    def encode(self, values: np.ndarray, parms_id: Any, scale: float) -> Any:
        """Encode a slot vector at ``parms_id`` and ``scale``."""
        seal = _seal()
        pt = seal.Plaintext()
        self.encoder.encode(np.asarray(values, dtype=np.float64).tolist(), parms_id, scale, pt)
        return pt

    def encrypt_slots(self, values: np.ndarray, parms_id: Any, scale: float) -> Any:
        """``Enc_pk`` of a slot vector (used for the noise, which also re-randomises)."""
        seal = _seal()
        ct = seal.Ciphertext()
        self.encryptor.encrypt(self.encode(values, parms_id, scale), ct)
        return ct

    def last_prime(self, parms_id: Any) -> int:
        """Value of the prime that the next rescale of a ciphertext at ``parms_id`` divides by."""
        return int(self.context.get_context_data(parms_id).parms().coeff_modulus()[-1].value())

    def parms_below(self, parms_id: Any, levels: int) -> Any:
        """``parms_id`` of the level ``levels`` rescalings below ``parms_id``."""
        data = self.context.get_context_data(parms_id)
        for _ in range(levels):
            data = data.next_context_data()
        return data.parms_id()


def _diagonals(pub: PackedCKKSPublic, right: np.ndarray) -> list[list[np.ndarray | None]]:
    """Pre-rotated generalized diagonals ``rot(δ_{g n1 + i}, -g n1 R)`` (``None`` when all zero)."""
    D, R, n1 = pub.dim_pad, pub.rows_per_block, pub.baby
    w = np.zeros((D, D))
    w[: right.shape[0], : right.shape[1]] = right
    b = np.arange(D)
    out: list[list[np.ndarray | None]] = []
    for g in range(D // n1):
        row: list[np.ndarray | None] = []
        for i in range(n1):
            k = g * n1 + i
            diag = w[(b + k) % D, b]
            row.append(None if not diag.any() else np.roll(np.repeat(diag, R), g * n1 * R))
        out.append(row)
    return out


def _block_lm(pub: PackedCKKSPublic, blk: sp.csc_matrix, rows: list[Any]) -> Any | None:
    """``[T] = Σ_j [m_j] ⊙ μ_j`` for one block (not yet rescaled); ``None`` if the block is all zero."""
    ev, D, R = pub.evaluator, pub.dim_pad, pub.rows_per_block
    acc = None
    mask_scale = 0.0
    for j in np.flatnonzero(np.diff(blk.indptr)):
        ct = rows[int(j)]
        if acc is None:
            mask_scale = pub.mid_scale * pub.last_prime(ct.parms_id()) / ct.scale
        col = np.zeros(R)
        lo, hi = blk.indptr[j], blk.indptr[j + 1]
        col[blk.indices[lo:hi]] = blk.data[lo:hi]
        seal = _seal()
        term = seal.Ciphertext()
        ev.multiply_plain(ct, pub.encode(np.tile(col, D), ct.parms_id(), mask_scale), term)
        if acc is None:
            acc = term
        else:
            ev.add_inplace(acc, term)
    return acc


def _block_times_right(pub: PackedCKKSPublic, t: Any, diags: list[list[np.ndarray | None]]) -> Any:
    """``[T·right]`` by the baby-step/giant-step diagonal method (one rescale, of ``[T]``).

    The baby-step rotations act on ``[T]`` *before* its rescale and the giant-step rotations on the
    ``out_scale`` partial sums, so key-switching noise always meets a scale of about ``2^90``.
    """
    seal = _seal()
    ev, gk, R, n1 = pub.evaluator, pub.galois_keys, pub.rows_per_block, pub.baby
    baby: list[Any] = [t]
    for i in range(1, n1):
        r = seal.Ciphertext()
        ev.rotate_vector(t, i * R, gk, r)
        baby.append(r)
    for r in baby:
        ev.rescale_to_next_inplace(r)
    pid = baby[0].parms_id()
    w_scale = pub.out_scale / baby[0].scale
    out = None
    for g, row in enumerate(diags):
        inner = None
        for i, diag in enumerate(row):
            if diag is None:
                continue
            term = seal.Ciphertext()
            ev.multiply_plain(baby[i], pub.encode(diag, pid, w_scale), term)
            if inner is None:
                inner = term
            else:
                ev.add_inplace(inner, term)
        if inner is None:
            continue
        if g:
            ev.rotate_vector_inplace(inner, g * n1 * R, gk)
        if out is None:
            out = inner
        else:
            ev.add_inplace(out, inner)
    if out is None:
        raise ValueError("right is the zero matrix")
    return out


def _noise_slots(pub: PackedCKKSPublic, noise: np.ndarray | None, lo: int, hi: int, d_out: int) -> np.ndarray:
    """Slot vector of the block's noise (slot ``b·R + r`` = ``E[lo + r, b]``); zeros without noise."""
    z = np.zeros((pub.dim_pad, pub.rows_per_block))
    if noise is not None:
        z[:d_out, : hi - lo] = noise[lo:hi].T
    return z.ravel()


def packed_sandwich(
    pub: PackedCKKSPublic,
    left: sp.spmatrix,
    c: EncMatrix,
    right: np.ndarray,
    noise: np.ndarray | None = None,
) -> EncMatrix:
    """``[left · M · right + noise]`` from the replicated rows ``[M]``, with public material only.

    Args:
        pub: the side owner's public view of the key owner's keys.
        left: ``(p, q)`` sparse side matrix (any rows may be all zero).
        c: ``[M]`` as produced by :meth:`PackedCKKSBackend.encrypt` (``q`` replicated rows of ``d``).
        right: ``(d, d_out)`` side matrix, ``d_out <= D``.
        noise: optional ``(p, d_out)`` noise, encrypted under the public key and added.

    Returns:
        ``ceil(p / R)`` block ciphertexts (``EncMatrix.scale_bits`` holds ``R``).

    Raises:
        ValueError: on mismatched shapes, a non-replicated input, ``d`` or ``d_out`` larger than the
            layout's ``D``, or an all-zero ``right``.
    """
    left = sp.csr_matrix(left)
    check_sandwich(left, c, right, noise)
    if c.scale_bits != 0:
        raise ValueError("the middle matrix must be replicated rows from encrypt(), not a sandwich result")
    D, R = pub.dim_pad, pub.rows_per_block
    d_in, d_out = right.shape
    if d_in > D or d_out > D:
        raise ValueError(f"right is {d_in}×{d_out} but this key set packs rows of at most {D} values")
    _check_result_bound(pub, left, np.asarray(right, dtype=np.float64), noise)
    diags = _diagonals(pub, np.asarray(right, dtype=np.float64))
    first = pub.context.first_parms_id()
    blocks = []
    for lo in range(0, left.shape[0], R):
        hi = min(left.shape[0], lo + R)
        t = _block_lm(pub, sp.csc_matrix(left[lo:hi]), c.data)
        z = _noise_slots(pub, noise, lo, hi, d_out)
        if t is None:  # all-zero block: the result is the noise alone
            blocks.append(pub.encrypt_slots(z, pub.parms_below(first, 1), pub.out_scale))
            continue
        y = _block_times_right(pub, t, diags)
        pub.evaluator.add_inplace(y, pub.encrypt_slots(z, y.parms_id(), y.scale))
        blocks.append(y)
    return EncMatrix((left.shape[0], d_out), blocks, R)


def _check_result_bound(
    pub: PackedCKKSPublic, left: sp.csr_matrix, right: np.ndarray, noise: np.ndarray | None
) -> None:
    """Refuse a sandwich whose result could exceed ``result_limit`` (it would decrypt silently wrong).

    ``|y_ij| ≤ (Σ_k |left_ik|) · middle_bound · (Σ_l |right_lj|) + |noise_ij|``, all known to the side
    owner.
    """
    rows = np.asarray(abs(left).sum(axis=1)).ravel()
    cols = np.abs(right).sum(axis=0)
    bound = (rows.max(initial=0.0)) * pub.middle_bound * cols.max(initial=0.0)
    if noise is not None and noise.size:
        bound += float(np.abs(noise).max())
    if bound >= pub.result_limit:
        raise ValueError(
            f"sandwich results could reach {bound:.3g}, beyond the {pub.result_limit:.3g} this CKKS key set "
            "decrypts correctly; scale the side matrices down or use a longer modulus chain"
        )
