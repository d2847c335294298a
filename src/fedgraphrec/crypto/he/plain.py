"""No encryption: the sandwich in float64, with byte counts as if every element were Paillier."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from fedgraphrec.crypto.he.base import EncMatrix, HEBackend


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

    def public_bytes(self) -> bytes:
        """No keys: the simulated ciphertext size is all there is."""
        return str(self.ct_bytes).encode()

    def secret_bytes(self) -> bytes:
        """No keys (as :meth:`public_bytes`)."""
        return self.public_bytes()

    @classmethod
    def from_context(cls, data: bytes) -> PlainBackend:
        """The backend :meth:`public_bytes` describes."""
        return cls(4 * int(data.decode()))

    def encrypt(self, m: np.ndarray) -> EncMatrix:  # noqa: D102
        m = np.asarray(m, dtype=np.float64)
        return EncMatrix((m.shape[0], m.shape[1]), m.copy())

    def decrypt(self, c: EncMatrix) -> np.ndarray:  # noqa: D102
        return np.asarray(c.data, dtype=np.float64).copy()

    def _sandwich(
        self, left: sp.csr_matrix, c: EncMatrix, right: np.ndarray, noise: np.ndarray | None
    ) -> EncMatrix:
        out = np.asarray(left @ c.data) @ right
        if noise is not None:
            out = out + noise
        return EncMatrix((out.shape[0], out.shape[1]), out)

    def nbytes(self, c: EncMatrix) -> int:  # noqa: D102
        return self.ct_bytes * c.shape[0] * c.shape[1]

    def to_bytes(self, c: EncMatrix) -> list[bytes]:
        """The float64 matrix as one little-endian buffer (no ciphertexts: a simulation)."""
        return [np.ascontiguousarray(c.data, dtype="<f8").tobytes()]

    def from_bytes(self, blobs: list[bytes], shape: tuple[int, int], scale_bits: int) -> EncMatrix:  # noqa: D102
        if len(blobs) != 1 or len(blobs[0]) != 8 * shape[0] * shape[1]:
            raise ValueError(f"a plain {shape} matrix is one buffer of {8 * shape[0] * shape[1]} bytes")
        data = np.frombuffer(blobs[0], dtype="<f8").astype(np.float64).reshape(shape)
        return EncMatrix((int(shape[0]), int(shape[1])), data, scale_bits)
