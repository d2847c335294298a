r"""Packed CKKS sandwich ``[left · M · right + E]`` with slot-interleaved rows (Microsoft SEAL via TenSEAL).

Why a second CKKS backend: :class:`~fedgraphrec.crypto.he.ckks.CKKSBackend` computes one TenSEAL
``enc_matmul_plain`` per output column and block (``d`` of them, each with its own rotations and
encodings), about 0.9 s per output row. Here the right-side product of a whole block of rows is
*one* diagonal-method linear transform with baby-step/giant-step rotations, so a block of
``R = slots / D`` rows costs about ``2·sqrt(D)`` rotations and ``D`` plaintext products.

Layout (``D`` = ``d`` rounded up to a power of two, ``R = slots / D``, ``S = R·D`` slots):

* The key owner encrypts each middle-matrix row ``m_j`` *replicated*: slot ``a·R + r`` holds
  ``m_j[a]`` for every ``r < R`` (one ciphertext per row, at the top level, scale ``Δ``).
* For a block of ``R`` output rows ``i_0..i_{R-1}`` the side owner forms
  ``[T] = Σ_j [m_j] ⊙ μ_j`` with ``μ_j[a·R + r] = left[i_r, j]``; then slot ``a·R + r`` of ``T`` is
  ``(left·M)[i_r, a]``.
* ``Y = T·right`` by the diagonal method over the ``D`` column groups (a rotation by ``k·R`` slots
  moves column group ``a`` to ``a - k`` cyclically because ``D·R = S``):

  .. math::

      [Y] = \sum_{k=0}^{D-1} \delta_k \odot \mathrm{rot}([T], kR),\qquad
      \delta_k[b R + r] = \mathrm{right}[(b+k) \bmod D,\ b],

  evaluated as ``Σ_g rot(Σ_i rot(δ_{g n1 + i}, -g n1 R) ⊙ rot([T], iR), g n1 R)`` (``n1`` baby
  steps, ``D/n1`` giant steps). Slot ``b·R + r`` of ``Y`` is ``(left·M·right)[i_r, b]``.
* ``Enc_pk(E)`` of the block's noise in the same layout is added (re-randomisation, Algorithm 1).

Depth and scales (default chain ``[60, 40, 40, 60]`` at ``N = 8192``, 128-bit security): the mask
products take ``[T]`` to scale ``Δ·s_μ ≈ 2^90`` at the top level; the baby-step rotations run there,
so their key-switching noise is negligible against the scale; one rescale (by the last 40-bit prime)
leaves ``mid_scale = 2^50``; the diagonal products reach ``out_scale = 2^90`` at the level of
``q0·q1 ≈ 2^100``, where the giant-step rotations run and the result stays *without* a second
rescale: a rescale's rounding (``≈ 10^4 / scale`` per slot) would otherwise be the dominant error.
The result is one ciphertext per block of ``R`` rows (two 60/40-bit primes, ~0.24 MB serialised).

Security model: the side owner works only with :class:`PackedCKKSPublic` (parameters, public key,
rotation keys); the secret key stays in :class:`PackedCKKSBackend`, which the key owner holds. CKKS is
approximate: decryptions carry a small error, and CKKS results are not circuit-private (the
decryptor's error term depends on the side matrices); the DP noise ``E`` added inside the ciphertext
is many orders of magnitude larger than that error in P4GCN.

Precision contract: results must satisfy ``|y| < 2^(q0 + q1 - 1 - out_scale_bits)`` (``2^9`` with the
defaults). This is checked, not assumed: the key owner's ``encrypt`` refuses entries above the public
``middle_bound`` and each sandwich refuses sides whose worst case could reach the limit. The
absolute error is then about ``1e-13`` for middle entries below ``0.1`` and
``‖right‖_F ≤ 0.1`` (the P4GCN clip bounds), about ``1e-9`` for ``O(1)`` entries.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from fedgraphrec.crypto.he.base import EncMatrix, HEBackend, check_sandwich, require_extra

__all__ = ["PackedCKKSBackend", "PackedCKKSPublic", "packed_sandwich"]


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


class PackedCKKSBackend(HEBackend):
    """Key owner's side of the packed CKKS sandwich (see the module docstring for the layout).

    The owner keeps the secret key (decryption, and symmetric-key encryption of its rows, which is
    IND-CPA under RLWE like public-key encryption and half as costly). :attr:`public` is what the side
    owner holds; :meth:`sandwich` uses nothing else.

    Args:
        dim: row length ``d`` of the matrices to encrypt (padded to a power of two ``D``).
        poly_modulus_degree: ring degree ``N`` (``N/2`` slots; default 8192).
        coeff_mod_bit_sizes: modulus chain; at least three data primes and the special prime
            (default ``(60, 40, 40, 60)``, 218 bits: 128-bit security at ``N = 8192``).
        scale_bits: scale ``Δ = 2^scale_bits`` of fresh encryptions (default 40).
        mid_scale_bits: scale of ``[T] = left·[M]`` after its rescale (default 50).
        out_scale_bits: scale of sandwich results (default 90; bounds results by
            ``2^(q0 + q1 - 1 - out_scale_bits)``).
        middle_bound: largest ``|M|`` entry :meth:`encrypt` accepts (public; P4GCN's rows are
            clipped to ``C = 0.1``), so sandwiches can check their result range.

    Raises:
        ValueError: if ``dim`` does not fit the slots or the chain is too short.
    """

    name = "ckks-packed"

    def __init__(
        self,
        dim: int = 64,
        poly_modulus_degree: int = 8192,
        coeff_mod_bit_sizes: tuple[int, ...] = (60, 40, 40, 60),
        scale_bits: int = 40,
        mid_scale_bits: int = 50,
        out_scale_bits: int = 90,
        middle_bound: float = 8.0,
    ) -> None:
        seal = _seal()
        slots = poly_modulus_degree // 2
        D = _pow2_at_least(dim)
        if dim < 1 or slots < D:
            raise ValueError(f"dim must be in [1, {slots}] for N = {poly_modulus_degree}, got {dim}")
        if len(coeff_mod_bit_sizes) < 4:
            raise ValueError("the chain needs three data primes and the special prime (two rescalings)")
        room = coeff_mod_bit_sizes[0] + coeff_mod_bit_sizes[1] - 1
        if not mid_scale_bits < out_scale_bits < room:
            raise ValueError(
                f"need mid_scale_bits < out_scale_bits < {room}; got {mid_scale_bits} and {out_scale_bits}"
            )
        parms = seal.EncryptionParameters(seal.SCHEME_TYPE.CKKS)
        parms.set_poly_modulus_degree(poly_modulus_degree)
        parms.set_coeff_modulus(seal.CoeffModulus.Create(poly_modulus_degree, list(coeff_mod_bit_sizes)))
        ctx = seal.SEALContext(parms, True, seal.SEC_LEVEL_TYPE.TC128)
        if not ctx.parameters_set():
            raise ValueError(f"invalid CKKS parameters: {ctx.parameters_error_message()}")
        keygen = seal.KeyGenerator(ctx)
        sk = keygen.secret_key()
        pk = seal.PublicKey()
        keygen.create_public_key(pk)
        R = slots // D
        n1 = _pow2_at_least(math.isqrt(D))
        steps = [i * R for i in range(1, n1)] + [g * n1 * R for g in range(1, D // n1)]
        gk = seal.GaloisKeys()
        if steps:
            keygen.create_galois_keys([pow(3, s, 2 * poly_modulus_degree) for s in steps], gk)
        self.dim = dim
        self.scale = 2.0**scale_bits
        self.public = PackedCKKSPublic(
            context=ctx,
            encoder=seal.CKKSEncoder(ctx),
            evaluator=seal.Evaluator(ctx),
            encryptor=seal.Encryptor(ctx, pk),
            galois_keys=gk,
            dim_pad=D,
            rows_per_block=R,
            baby=n1,
            mid_scale=2.0**mid_scale_bits,
            out_scale=2.0**out_scale_bits,
            middle_bound=middle_bound,
            result_limit=2.0 ** (room - out_scale_bits),
        )
        self._encryptor = seal.Encryptor(ctx, sk)
        self._decryptor = seal.Decryptor(ctx, sk)
        shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
        self._tmp = tempfile.mkdtemp(prefix="fgr-ckks-", dir=shm)
        weakref.finalize(self, shutil.rmtree, self._tmp, True)

    def __repr__(self) -> str:
        p = self.public
        return f"<PackedCKKSBackend N={2 * p.slots} D={p.dim_pad} R={p.rows_per_block}>"

    # --- key owner -------------------------------------------------------------------------------
    def encrypt(self, m: np.ndarray) -> EncMatrix:
        """Encrypt each row of ``m`` replicated ``R`` times (slot ``a·R + r`` = ``m[i, a]``)."""
        seal = _seal()
        m = np.asarray(m, dtype=np.float64)
        p = self.public
        if m.shape[1] > p.dim_pad:
            raise ValueError(f"rows of {m.shape[1]} values do not fit this key set (D = {p.dim_pad})")
        if m.size and float(np.abs(m).max()) > p.middle_bound:
            raise ValueError(
                f"entries up to {float(np.abs(m).max()):.3g} exceed the public bound middle_bound = "
                f"{p.middle_bound} that sandwiches rely on to stay in range"
            )
        first = p.context.first_parms_id()
        padded = np.zeros(p.dim_pad)
        cts = []
        for row in m:
            padded[: len(row)] = row
            ct = seal.Ciphertext()
            pt = p.encode(np.repeat(padded, p.rows_per_block), first, self.scale)
            self._encryptor.encrypt_symmetric(pt, ct)
            cts.append(ct)
        return EncMatrix((m.shape[0], m.shape[1]), cts)

    def _decode(self, ct: Any) -> np.ndarray:
        seal = _seal()
        pt = seal.Plaintext()
        self._decryptor.decrypt(ct, pt)
        return np.asarray(self.public.encoder.decode_double(pt), dtype=np.float64)

    def decrypt(self, c: EncMatrix) -> np.ndarray:
        """Decrypt replicated rows (``scale_bits == 0``) or sandwich blocks (``scale_bits == R``)."""
        p = self.public
        out = np.empty(c.shape, dtype=np.float64)
        if c.scale_bits == 0:
            for i, ct in enumerate(c.data):
                out[i] = self._decode(ct)[:: p.rows_per_block][: c.shape[1]]
            return out
        R = c.scale_bits
        for b, ct in enumerate(c.data):
            lo, hi = b * R, min(c.shape[0], (b + 1) * R)
            out[lo:hi] = self._decode(ct).reshape(p.dim_pad, R)[: c.shape[1], : hi - lo].T
        return out

    # --- side owner ------------------------------------------------------------------------------
    def sandwich(  # noqa: D102
        self, left: sp.csr_matrix, c: EncMatrix, right: np.ndarray, noise: np.ndarray | None = None
    ) -> EncMatrix:
        return packed_sandwich(self.public, left, c, right, noise)

    # --- wire ------------------------------------------------------------------------------------
    def to_bytes(self, c: EncMatrix) -> list[bytes]:
        """SEAL's own serialisation of each ciphertext (replicated row or result block)."""
        path = os.path.join(self._tmp, f"ct-{os.getpid()}")
        out = []
        for ct in c.data:
            ct.save(path)
            with open(path, "rb") as fh:
                out.append(fh.read())
        return out

    def nbytes(self, c: EncMatrix) -> int:  # noqa: D102
        return sum(len(b) for b in self.to_bytes(c))
