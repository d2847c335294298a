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

Where the parts live: the side owner's public view and its computation (:class:`PackedCKKSPublic`,
:func:`packed_sandwich`) are in :mod:`~fedgraphrec.crypto.he.packed_public` and re-exported here;
this module keeps the key owner's :class:`PackedCKKSBackend`, the only holder of the secret key.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import weakref
from typing import Any

import numpy as np
import scipy.sparse as sp

from fedgraphrec.crypto.he.base import EncMatrix, HEBackend
from fedgraphrec.crypto.he.packed_public import PackedCKKSPublic, _pow2_at_least, _seal, packed_sandwich

__all__ = ["PackedCKKSBackend"]


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
    def _sandwich(
        self, left: sp.csr_matrix, c: EncMatrix, right: np.ndarray, noise: np.ndarray | None
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

    def from_bytes(self, blobs: list[bytes], shape: tuple[int, int], scale_bits: int) -> EncMatrix:
        """SEAL's own deserialisation (validated against this side's context)."""
        seal = _seal()
        rows = shape[0]
        want = rows if scale_bits == 0 else -(-rows // max(scale_bits, 1))
        if len(blobs) != want:
            raise ValueError(f"a packed CKKS {shape} matrix (scale_bits {scale_bits}) is {want} ciphertexts")
        path = os.path.join(self._tmp, f"in-{os.getpid()}")
        cts = []
        for b in blobs:
            with open(path, "wb") as fh:
                fh.write(b)
            ct = seal.Ciphertext()
            ct.load(self.public.context, path)
            cts.append(ct)
        return EncMatrix((int(shape[0]), int(shape[1])), cts, scale_bits)

    def nbytes(self, c: EncMatrix) -> int:  # noqa: D102
        return sum(len(b) for b in self.to_bytes(c))
