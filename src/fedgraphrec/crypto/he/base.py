"""The interface every homomorphic backend implements, the ciphertext container and shared checks.

Nothing here imports a backend: :mod:`.plain`, :mod:`.paillier`, :mod:`.ckks`, :mod:`.packed` and
:mod:`.packed_public` build on this module, and :mod:`fedgraphrec.crypto.he` registers them by name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = ["EncMatrix", "HEBackend", "check_sandwich", "require_extra"]


def require_extra(module: str, extra: str) -> Any:
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


def check_sandwich(left: sp.csr_matrix, c: EncMatrix, right: np.ndarray, noise: np.ndarray | None) -> None:
    """Refuse a sandwich whose shapes do not chain (left · [M] · right + noise), naming the mismatch."""
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

    def sandwich(
        self, left: sp.csr_matrix, c: EncMatrix, right: np.ndarray, noise: np.ndarray | None = None
    ) -> EncMatrix:
        """Return ``[left · M · right + noise]`` from ``[M]`` (side owner; no secret key needed).

        Every backend refuses shapes that do not chain here (:func:`check_sandwich`), before its own
        :meth:`_sandwich` sees the operands; ``left`` reaches it as CSR.
        """
        left = sp.csr_matrix(left)
        check_sandwich(left, c, right, noise)
        return self._sandwich(left, c, right, noise)

    @abstractmethod
    def _sandwich(
        self, left: sp.csr_matrix, c: EncMatrix, right: np.ndarray, noise: np.ndarray | None
    ) -> EncMatrix:
        """The backend's :meth:`sandwich` on checked operands."""

    @abstractmethod
    def nbytes(self, c: EncMatrix) -> int:
        """Bytes of ``c`` on the wire."""

    @abstractmethod
    def to_bytes(self, c: EncMatrix) -> list[bytes]:
        """Serialise ``c`` into its wire messages (one per element or per packed row)."""

    @abstractmethod
    def from_bytes(self, blobs: list[bytes], shape: tuple[int, int], scale_bits: int) -> EncMatrix:
        """The :class:`EncMatrix` :meth:`to_bytes` serialised (receiver side, with its own context).

        Raises:
            ValueError: the blobs do not make up a matrix of ``shape`` (count or length wrong).
        """

    def public_bytes(self) -> bytes:
        """The public material the side owner needs (context, public key, rotation keys), serialised.

        Raises:
            NotImplementedError: the backend cannot yet hand its public side to another process.
        """
        raise NotImplementedError(f"the {self.name} backend does not serialise its public context yet")

    def secret_bytes(self) -> bytes:
        """The key owner's whole key set, serialised (for the owner's own storage between messages).

        Raises:
            NotImplementedError: the backend cannot yet store its keys.
        """
        raise NotImplementedError(f"the {self.name} backend does not serialise its keys yet")

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
