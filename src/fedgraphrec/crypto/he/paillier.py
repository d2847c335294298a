"""Element-wise Paillier as in the paper (``phe`` keys, ``gmpy2`` arithmetic; extra ``[paillier]``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp

from fedgraphrec.crypto.he.base import EncMatrix, HEBackend, require_extra


class PaillierBackend(HEBackend):
    """Element-wise Paillier (python-paillier key generation, gmpy2 modular arithmetic).

    Fixed point: the middle matrix is encoded at ``2**frac_bits``; each side-matrix entry at
    ``2**side_bits``; the sandwich result therefore carries ``frac_bits + 2*side_bits`` fractional
    bits and the noise is encoded at that scale before encryption. Negative values are represented
    as ``n - |v|``. Scalar multiplication by a negative integer uses the precomputed inverse
    ciphertext, so exponents stay as short as the fixed-point integers.

    Args:
        key_bits: modulus size (paper: unspecified; 2048 recommended, 1024 for fast tests).
        frac_bits: fractional bits of the middle matrix.
        side_bits: fractional bits of each side-matrix entry.
    """

    name = "paillier"

    def __init__(self, key_bits: int = 2048, frac_bits: int = 40, side_bits: int = 40) -> None:
        phe = require_extra("phe", "paillier")
        self._gmpy2 = require_extra("gmpy2", "paillier")
        if key_bits < 256:
            raise ValueError(f"key_bits must be >= 256, got {key_bits}")
        self.pk, self.sk = phe.paillier.generate_paillier_keypair(n_length=key_bits)
        self.n = self._gmpy2.mpz(self.pk.n)
        self.nsq = self.n * self.n
        self.frac_bits, self.side_bits = frac_bits, side_bits
        self.ct_bytes = math.ceil(2 * self.pk.n.bit_length() / 8)

    # --- key owner -------------------------------------------------------------------------------
    def _encode(self, v: float, bits: int) -> int:
        k = round(float(v) * (1 << bits))
        if abs(k) >= int(self.n) // 3:
            raise OverflowError(f"value {v} does not fit the Paillier plaintext space at {bits} bits")
        return k % int(self.n)

    def _enc_int(self, k: int) -> Any:
        return self._gmpy2.mpz(self.pk.raw_encrypt(k))

    def encrypt(self, m: np.ndarray, scale_bits: int | None = None) -> EncMatrix:
        """Encrypt ``m`` element-wise at ``scale_bits`` (default ``frac_bits``)."""
        bits = self.frac_bits if scale_bits is None else scale_bits
        m = np.asarray(m, dtype=np.float64)
        data = np.empty(m.shape, dtype=object)
        for idx, v in np.ndenumerate(m):
            data[idx] = self._enc_int(self._encode(v, bits))
        return EncMatrix((m.shape[0], m.shape[1]), data, bits)

    def decrypt(self, c: EncMatrix) -> np.ndarray:  # noqa: D102
        n = int(self.n)
        out = np.empty(c.shape, dtype=np.float64)
        for idx, ct in np.ndenumerate(c.data):
            k = self.sk.raw_decrypt(int(ct))
            if k > n // 2:
                k -= n
            out[idx] = k / (1 << c.scale_bits)
        return out

    # --- side owner ------------------------------------------------------------------------------
    def _scalar_mul(self, ct: Any, inv: Any, k: int) -> Any:
        if k >= 0:
            return self._gmpy2.powmod(ct, k, self.nsq)
        return self._gmpy2.powmod(inv, -k, self.nsq)

    def _lincomb(self, cts: list[Any], invs: list[Any], coefs: list[int]) -> Any:
        acc = self._gmpy2.mpz(1)
        for ct, inv, k in zip(cts, invs, coefs, strict=True):
            if k != 0:
                acc = acc * self._scalar_mul(ct, inv, k) % self.nsq
        return acc

    def _sandwich(
        self, left: sp.csr_matrix, c: EncMatrix, right: np.ndarray, noise: np.ndarray | None
    ) -> EncMatrix:
        g = self._gmpy2
        sb = 1 << self.side_bits
        r_int = [[round(float(x) * sb) for x in row] for row in np.asarray(right, dtype=np.float64).T]
        rows_used = np.unique(left.indices)
        inv = {int(j): [g.invert(ct, self.nsq) for ct in c.data[j]] for j in rows_used}
        out_bits = c.scale_bits + 2 * self.side_bits
        out = np.empty((left.shape[0], right.shape[1]), dtype=object)
        for i in range(left.shape[0]):
            lo, hi = left.indptr[i], left.indptr[i + 1]
            cols, vals = left.indices[lo:hi], left.data[lo:hi]
            coefs = [round(float(v) * sb) for v in vals]
            # [t_i] = Σ_j L_ij [M_j]  (d ciphertexts), then [t_i R]_k = Σ_a R_ak [t_ia].
            t = [
                self._lincomb([c.data[int(j)][a] for j in cols], [inv[int(j)][a] for j in cols], coefs)
                for a in range(c.shape[1])
            ]
            t_inv = [g.invert(x, self.nsq) for x in t]
            for k in range(right.shape[1]):
                acc = self._lincomb(t, t_inv, r_int[k])
                if noise is not None:
                    acc = acc * self._enc_int(self._encode(noise[i, k], out_bits)) % self.nsq
                out[i, k] = acc
        return EncMatrix((out.shape[0], out.shape[1]), out, out_bits)

    def nbytes(self, c: EncMatrix) -> int:  # noqa: D102
        return self.ct_bytes * c.shape[0] * c.shape[1]

    def to_bytes(self, c: EncMatrix) -> list[bytes]:  # noqa: D102
        return [int(x).to_bytes(self.ct_bytes, "big") for x in c.data.ravel()]

    def from_bytes(self, blobs: list[bytes], shape: tuple[int, int], scale_bits: int) -> EncMatrix:
        """Ciphertext integers (big-endian, ``ct_bytes`` each, row-major), checked to lie in ``Z_{n²}``."""
        if len(blobs) != shape[0] * shape[1] or any(len(b) != self.ct_bytes for b in blobs):
            raise ValueError(
                f"a Paillier {shape} matrix is {shape[0] * shape[1]} ciphertexts of {self.ct_bytes} bytes"
            )
        data = np.empty(len(blobs), dtype=object)
        for k, b in enumerate(blobs):
            x = self._gmpy2.mpz(int.from_bytes(b, "big"))
            if not 0 < x < self.nsq:
                raise ValueError("a Paillier ciphertext outside Z_{n^2}")
            data[k] = x
        return EncMatrix((int(shape[0]), int(shape[1])), data.reshape(shape), scale_bits)
