"""Additively homomorphic backends for the P4GCN sandwich ``L · [M] · R + Enc(E)``.

One interface, :class:`HEBackend`, serves the sandwich protocol. The key owner (the middle-matrix
owner) calls :meth:`HEBackend.encrypt` and :meth:`HEBackend.decrypt`; the side-matrix owner only calls
:meth:`HEBackend.sandwich` on ciphertexts it received, with its own plaintext sides and noise.

* :class:`PaillierBackend` — element-wise Paillier as in the paper (``phe`` key generation, ``gmpy2``
  arithmetic; optional extra ``[paillier]``). Reals are fixed-point integers: the middle matrix at
  scale ``2**frac_bits``, each side at ``2**side_bits``; negatives live in the upper half of ``Z_n``.
  Each ciphertext is ``2 * key_bits / 8`` bytes.
* :class:`CKKSBackend` — TenSEAL CKKS with rows packed into slots (optional extra ``[he]``): blocks of
  ``slots // d`` rows share one ciphertext per output column, so the right-side product costs ``d``
  encrypted matrix–vector products per block instead of one vector–matrix product per row.
* :class:`~fedgraphrec.crypto.he_packed.PackedCKKSBackend` (``ckks-packed``) — SEAL CKKS with
  interleaved replicated rows and a baby-step/giant-step diagonal product: one ciphertext per block of
  ``slots // d`` result rows, hundreds of times faster than per-element Paillier (the backend to use
  for real-HE training).
* :class:`PlainBackend` — no encryption: the identical arithmetic in float64, with byte counts as if
  every element were a Paillier ciphertext, for experiments too large for real HE.

The side-matrix owner's result is re-randomised by adding an encryption of the DP noise, exactly as
in Algorithm 1 of the paper.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = [
    "BACKENDS",
    "CKKSBackend",
    "EncMatrix",
    "HEBackend",
    "PaillierBackend",
    "PlainBackend",
    "make_backend",
]


def _require(module: str, extra: str) -> Any:
    """Import an optional dependency or raise an ImportError naming the extra that provides it."""
    try:
        return __import__(module)
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            f"the {module!r} package is needed for this HE backend; install fedgraphrec[{extra}]"
        ) from exc


@dataclass
class EncMatrix:
    """An encrypted ``rows × cols`` matrix, opaque outside its backend.

    Attributes:
        shape: plaintext shape.
        data: backend-specific ciphertexts (object array, list of vectors, or float array for plain).
        scale_bits: Paillier: fixed-point bits of the plaintext inside; CKKS: rows per block of a
            sandwich result (0 for the replicated-row encryptions of the key owner).
    """

    shape: tuple[int, int]
    data: Any
    scale_bits: int = 0


def _check_sandwich(left: sp.csr_matrix, c: EncMatrix, right: np.ndarray, noise: np.ndarray | None) -> None:
    if left.shape[1] != c.shape[0]:
        raise ValueError(f"left has {left.shape[1]} columns but the ciphertext has {c.shape[0]} rows")
    if right.shape[0] != c.shape[1]:
        raise ValueError(f"right has {right.shape[0]} rows but the ciphertext has {c.shape[1]} columns")
    if noise is not None and noise.shape != (left.shape[0], right.shape[1]):
        raise ValueError(f"noise has shape {noise.shape}, expected {(left.shape[0], right.shape[1])}")


class HEBackend(ABC):
    """What the sandwich needs from an encryption scheme (see module docstring)."""

    name: str = ""

    @abstractmethod
    def encrypt(self, m: np.ndarray) -> EncMatrix:
        """Encrypt a real matrix under the owner's public key (key owner)."""

    @abstractmethod
    def decrypt(self, c: EncMatrix) -> np.ndarray:
        """Decrypt to a float64 matrix (key owner)."""

    @abstractmethod
    def sandwich(
        self, left: sp.csr_matrix, c: EncMatrix, right: np.ndarray, noise: np.ndarray | None = None
    ) -> EncMatrix:
        """Return ``[left · M · right + noise]`` from ``[M]`` (side owner; no secret key needed)."""

    @abstractmethod
    def nbytes(self, c: EncMatrix) -> int:
        """Bytes of ``c`` on the wire."""

    @abstractmethod
    def to_bytes(self, c: EncMatrix) -> list[bytes]:
        """Serialise ``c`` into its wire messages (one per element or per packed row)."""

    def select_rows(self, c: EncMatrix, rows: np.ndarray) -> EncMatrix:
        """Ciphertexts of the given rows (pure selection; no cryptography)."""
        data = c.data[rows] if isinstance(c.data, np.ndarray) else [c.data[int(r)] for r in rows]
        return EncMatrix((len(rows), c.shape[1]), data, c.scale_bits)

    def set_rows(self, c: EncMatrix, rows: np.ndarray, new: EncMatrix) -> None:
        """Replace the ciphertexts of ``rows`` in place (the stored ``[X]`` after a re-sync)."""
        if new.shape != (len(rows), c.shape[1]):
            raise ValueError(f"new rows have shape {new.shape}, expected {(len(rows), c.shape[1])}")
        if isinstance(c.data, np.ndarray):
            c.data[rows] = new.data
        else:
            for k, r in enumerate(rows):
                c.data[int(r)] = new.data[k]


class PlainBackend(HEBackend):
    """Float64 simulation that counts bytes as Paillier ciphertexts of ``key_bits``.

    Args:
        key_bits: Paillier modulus size used for the byte count (2048 → 512-byte ciphertexts).
    """

    name = "plain"

    def __init__(self, key_bits: int = 2048) -> None:
        if key_bits < 128:
            raise ValueError(f"key_bits must be >= 128, got {key_bits}")
        self.ct_bytes = 2 * key_bits // 8

    def encrypt(self, m: np.ndarray) -> EncMatrix:  # noqa: D102
        m = np.asarray(m, dtype=np.float64)
        return EncMatrix((m.shape[0], m.shape[1]), m.copy())

    def decrypt(self, c: EncMatrix) -> np.ndarray:  # noqa: D102
        return np.asarray(c.data, dtype=np.float64).copy()

    def sandwich(  # noqa: D102
        self, left: sp.csr_matrix, c: EncMatrix, right: np.ndarray, noise: np.ndarray | None = None
    ) -> EncMatrix:
        _check_sandwich(left, c, right, noise)
        out = np.asarray(left @ c.data) @ right
        if noise is not None:
            out = out + noise
        return EncMatrix((out.shape[0], out.shape[1]), out)

    def nbytes(self, c: EncMatrix) -> int:  # noqa: D102
        return self.ct_bytes * c.shape[0] * c.shape[1]

    def to_bytes(self, c: EncMatrix) -> list[bytes]:  # noqa: D102
        raise TypeError("the plain backend has no ciphertext bytes; use the network's accounted mode")


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
        phe = _require("phe", "paillier")
        self._gmpy2 = _require("gmpy2", "paillier")
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

    def sandwich(  # noqa: D102
        self, left: sp.csr_matrix, c: EncMatrix, right: np.ndarray, noise: np.ndarray | None = None
    ) -> EncMatrix:
        left = sp.csr_matrix(left)
        _check_sandwich(left, c, right, noise)
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
        ts = _require("tenseal", "he")
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

    def sandwich(  # noqa: D102
        self, left: sp.csr_matrix, c: EncMatrix, right: np.ndarray, noise: np.ndarray | None = None
    ) -> EncMatrix:
        left = sp.csr_matrix(left)
        _check_sandwich(left, c, right, noise)
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


BACKENDS = ("plain", "paillier", "ckks", "ckks-packed")


def make_backend(name: str, **kwargs: Any) -> HEBackend:
    """Build a backend by name: ``plain``, ``paillier``, ``ckks`` or ``ckks-packed``.

    ``ckks-packed`` is :class:`~fedgraphrec.crypto.he_packed.PackedCKKSBackend` (imported lazily: that
    module builds on this one).

    Raises:
        ValueError: for an unknown name (the message lists the valid ones).
    """
    if name == "plain":
        return PlainBackend(**kwargs)
    if name == "paillier":
        return PaillierBackend(**kwargs)
    if name == "ckks":
        return CKKSBackend(**kwargs)
    if name == "ckks-packed":
        from fedgraphrec.crypto.he_packed import PackedCKKSBackend

        return PackedCKKSBackend(**kwargs)
    raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {name!r}")
