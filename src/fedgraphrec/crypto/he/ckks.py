"""TenSEAL CKKS with rows packed into slots, one ciphertext per output column and block (extra ``[he]``)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from fedgraphrec.crypto.he.base import EncMatrix, HEBackend, require_extra


class CKKSBackend(HEBackend):
    """TenSEAL CKKS, packed: ``R = slots // d`` output rows share one ciphertext per output column.

    Layout. The key owner encrypts each middle-matrix row ``m_j`` as one ciphertext holding ``m_j``
    repeated ``R`` times in column-major order (slot ``a·R + i`` = ``m_j[a]``). For a block of ``R``
    output rows the side owner forms ``[T] = Σ_j [m_j] ⊙ mask_j`` with ``mask_j[a·R + i] = L[i, j]``
    (plaintext-vector products, no rotations): ``[T]`` is the ``R × d`` block of ``L·M`` in the
    column-major encoding of TenSEAL's ``enc_matmul_encoding``. Each output column ``k`` is then
    ``[T]·R[:, k]`` by ``enc_matmul_plain`` (one product and ``log`` rotations), plus an encryption of
    the noise column. Results are therefore blocks of column ciphertexts, decrypted by the key owner.
    The side owner uses a public copy of the context (no secret key).

    Args:
        poly_modulus_degree: ring degree (8192: 4096 slots, depth 2 at 128-bit security).
        scale_bits: CKKS scale ``2**scale_bits``.
    """

    name = "ckks"

    def __init__(self, poly_modulus_degree: int = 8192, scale_bits: int = 40) -> None:
        ts = require_extra("tenseal", "he")
        self._ts = ts
        self.ctx = ts.context(
            ts.SCHEME_TYPE.CKKS,
            poly_modulus_degree=poly_modulus_degree,
            coeff_mod_bit_sizes=[60, scale_bits, scale_bits, 60],
        )
        self.ctx.global_scale = 2.0**scale_bits
        self.ctx.generate_galois_keys()
        self.public_ctx = self.ctx.copy()
        self.public_ctx.make_context_public()
        self.slots = poly_modulus_degree // 2

    def public_bytes(self) -> bytes:
        """TenSEAL's serialisation of the public context (public, relinearisation and rotation keys)."""
        if not self.public_ctx.has_galois_keys() and self.ctx.has_secret_key():  # rebuilt from secret_bytes
            self.ctx.generate_galois_keys()
            self.public_ctx = self.ctx.copy()
            self.public_ctx.make_context_public()
        return bytes(self.public_ctx.serialize(save_galois_keys=True))

    def secret_bytes(self) -> bytes:
        """TenSEAL's serialisation of the context with the secret key.

        Rotation keys are left out (the key owner does not rotate); :meth:`public_bytes` makes them
        again when a side owner needs them.
        """
        return bytes(self.ctx.serialize(save_secret_key=True, save_galois_keys=False, save_relin_keys=False))

    @classmethod
    def from_context(cls, data: bytes) -> CKKSBackend:
        """The backend of a serialised context: the key owner's (secret) or the side owner's (public)."""
        ts = require_extra("tenseal", "he")
        obj = cls.__new__(cls)
        obj._ts = ts
        obj.ctx = ts.context_from(data)
        if obj.ctx.has_secret_key():
            obj.public_ctx = obj.ctx.copy()
            obj.public_ctx.make_context_public()
        else:
            obj.public_ctx = obj.ctx
        obj.slots = obj.ctx.seal_context().data.first_context_data().parms().poly_modulus_degree() // 2
        return obj

    def _rows_per_block(self, d: int) -> int:
        r = self.slots // d
        if r < 1:
            raise ValueError(f"a row of {d} values does not fit {self.slots} CKKS slots")
        return r

    def encrypt(self, m: np.ndarray) -> EncMatrix:  # noqa: D102
        m = np.asarray(m, dtype=np.float64)
        r = self._rows_per_block(m.shape[1])
        cts = [self._ts.ckks_vector(self.ctx, np.repeat(row, r).tolist()) for row in m]
        return EncMatrix((m.shape[0], m.shape[1]), cts)

    def decrypt(self, c: EncMatrix) -> np.ndarray:  # noqa: D102
        out = np.empty(c.shape, dtype=np.float64)
        if c.scale_bits == 0:  # replicated rows (what encrypt produced)
            for i, v in enumerate(c.data):
                v.link_context(self.ctx)
                out[i] = np.asarray(v.decrypt(), dtype=np.float64)[:: self._rows_per_block(c.shape[1])]
            return out
        r = c.scale_bits  # blocks of ``r`` rows, one ciphertext per column
        for b, cols in enumerate(c.data):
            lo, hi = b * r, min(c.shape[0], (b + 1) * r)
            for k, v in enumerate(cols):
                v.link_context(self.ctx)
                out[lo:hi, k] = np.asarray(v.decrypt(), dtype=np.float64)[: hi - lo]
        return out

    def _sandwich(
        self, left: sp.csr_matrix, c: EncMatrix, right: np.ndarray, noise: np.ndarray | None
    ) -> EncMatrix:
        d_in, d_out = c.shape[1], right.shape[1]
        r = self._rows_per_block(d_in)
        cols_r = [np.asarray(right[:, k], dtype=np.float64).tolist() for k in range(d_out)]
        blocks = []
        for lo in range(0, left.shape[0], r):
            hi = min(left.shape[0], lo + r)
            blk = sp.csc_matrix(left[lo:hi])
            acc = None
            for j in np.flatnonzero(np.diff(blk.indptr)):
                col = np.zeros(r)
                a, b = blk.indptr[j], blk.indptr[j + 1]
                col[blk.indices[a:b]] = blk.data[a:b]
                term = c.data[int(j)] * np.tile(col, d_in).tolist()
                acc = term if acc is None else acc + term
            if acc is None:  # an all-zero block of ``left``: an encryption of zero
                acc = self._ts.ckks_vector(self.public_ctx, [0.0] * (r * d_in)) * 1.0
            outs = []
            for k in range(d_out):
                z = np.zeros(r)
                if noise is not None:
                    z[: hi - lo] = noise[lo:hi, k]
                outs.append(
                    acc.enc_matmul_plain(cols_r[k], r) + self._ts.ckks_vector(self.public_ctx, z.tolist())
                )
            blocks.append(outs)
        return EncMatrix((left.shape[0], d_out), blocks, r)

    def nbytes(self, c: EncMatrix) -> int:  # noqa: D102
        return sum(len(b) for b in self.to_bytes(c))

    def to_bytes(self, c: EncMatrix) -> list[bytes]:  # noqa: D102
        if c.scale_bits == 0:
            return [bytes(v.serialize()) for v in c.data]
        return [bytes(v.serialize()) for cols in c.data for v in cols]

    def from_bytes(self, blobs: list[bytes], shape: tuple[int, int], scale_bits: int) -> EncMatrix:
        """TenSEAL's own deserialisation under this side's context (public or with the secret key)."""
        rows, cols = shape
        want = rows if scale_bits == 0 else -(-rows // max(scale_bits, 1)) * cols
        if len(blobs) != want:
            raise ValueError(f"a CKKS {shape} matrix (scale_bits {scale_bits}) is {want} ciphertexts")
        vecs = [self._ts.ckks_vector_from(self.public_ctx, bytes(b)) for b in blobs]
        if scale_bits == 0:
            return EncMatrix((rows, cols), vecs)
        blocks = [vecs[k : k + cols] for k in range(0, len(vecs), cols)]
        return EncMatrix((rows, cols), blocks, scale_bits)
