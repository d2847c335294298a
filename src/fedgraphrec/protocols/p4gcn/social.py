"""The social party ``P2``: holds ``Ã`` (hence ``L̃``), the frozen ``W1`` and the noise; sees ciphertexts.

It computes both sandwiches of spec §4.5 on ciphertexts under the recommender's key and adds its
matrix-Gaussian noise (isotropic per user row) before returning them. Two calibrations
(:mod:`fedgraphrec.privacy.matrix_gaussian`):

* ``sensitivity="global"`` (default, an ``(ε, δ)`` edge-level DP guarantee): every release — each
  forward and backward of every iteration, and the final evaluation release — is one Gaussian
  mechanism on the whole released matrix with sensitivity ``C² Φ`` (:data:`EDGE_FLIP_BOUND`), one
  ``σ`` for all rows, composed over all ``K`` releases;
* ``sensitivity="paper-local"`` (**not** a DP guarantee): the paper's per-user ``σ_i`` from the
  data-dependent ``s_l(i)`` and per-user release counts, kept to reproduce its tables.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from fedgraphrec.crypto.he.base import EncMatrix, HEBackend
from fedgraphrec.privacy.gaussian_accountant import GaussianAccountant, noise_scales
from fedgraphrec.privacy.matrix_gaussian import (
    EDGE_FLIP_BOUND,
    clip_frobenius,
    normalized_adjacency,
    row_noise,
    user_sensitivity,
)
from fedgraphrec.privacy.noise_source import NoiseSource, SeededNoise

__all__ = ["SENSITIVITIES", "SocialParty"]

SENSITIVITIES = ("global", "paper-local")


class SocialParty:
    """Role program of ``P2``.

    Args:
        adjacency: binary user–user adjacency (symmetrised here, A1).
        dim: embedding size ``d``.
        clip: clipping constant ``C``.
        releases: ``K``, fixed by the schedule: with ``global``, every release of the run (two per
            iteration plus the evaluation release); with ``paper-local``, the largest number of row
            releases of one user.
        eps: privacy budget ``ε``.
        delta: ``δ``.
        backend: the HE backend (only its public operations are used here).
        rng: P2's own random stream (``W1``; the noise too unless ``noise_source`` is given).
        noise: ``False`` gives P4GCN* (no DP noise; everything else equal).
        sensitivity: ``global`` (DP guarantee) or ``paper-local`` (the paper's data-dependent
            ``s_l(i)``; not a guarantee).
        scale_by_n: scale ``L̃`` by ``1/N`` as in the paper (A7).
        noise_source: where the noise comes from (default: ``rng``, reproducible; pass
            :class:`~fedgraphrec.privacy.noise_source.SecureNoise` for a guarantee against whoever
            knows the seed).
        weight_source: where ``W1`` comes from (default: ``rng``; a
            :class:`~fedgraphrec.privacy.noise_source.SecureNoise` keeps it from whoever knows the seed).
    """

    def __init__(
        self,
        adjacency: sp.spmatrix,
        dim: int,
        clip: float,
        releases: int,
        eps: float,
        delta: float,
        backend: HEBackend,
        rng: np.random.Generator,
        *,
        noise: bool = True,
        sensitivity: str = "global",
        scale_by_n: bool = True,
        noise_source: NoiseSource | None = None,
        weight_source: NoiseSource | None = None,
    ) -> None:
        if sensitivity not in SENSITIVITIES:
            raise ValueError(f"sensitivity must be one of {SENSITIVITIES}, got {sensitivity!r}")
        n = adjacency.shape[0]
        self.n, self.dim, self.backend, self.rng = n, dim, backend, rng
        self.scale = 1.0 / n if scale_by_n else 1.0
        self.lt = normalized_adjacency(adjacency, scale=self.scale)
        shape = (dim, dim)
        w1 = weight_source.standard_normal(shape) if weight_source is not None else rng.standard_normal(shape)
        self.w1 = clip_frobenius(w1, clip)
        self.sensitivity = sensitivity
        s_l = np.full(n, EDGE_FLIP_BOUND) if sensitivity == "global" else user_sensitivity(adjacency)
        self.sens = clip * clip * s_l * self.scale  # per release (global: of the whole matrix)
        self.noise = noise
        self.sigma = noise_scales(s_l, clip, releases, eps, delta, scale=self.scale) if noise else np.zeros(n)
        self.source: NoiseSource = noise_source or SeededNoise(rng)
        self.accountant = GaussianAccountant(n)
        self.enc_x: EncMatrix | None = None

    def _noise(self, users: np.ndarray, evaluation: bool = False) -> np.ndarray | None:
        """Row noise for ``users``, recorded by the accountant.

        With ``global`` sensitivity one edge flip can move rows of any user, so a training release
        costs every user; the evaluation release is one mechanism over all rows, sent in chunks,
        so each chunk is charged to its own users only.
        """
        if not self.noise:
            return None
        charged = users if self.sensitivity == "paper-local" or evaluation else np.arange(self.n)
        self.accountant.record(charged, self.sens[charged], self.sigma[charged])
        return row_noise(self.sigma[users], self.dim, self.source)

    def receive_x(self, enc_x: EncMatrix) -> None:
        """Store ``[X]`` (setup message)."""
        self.enc_x = enc_x

    def forward(self, users: np.ndarray, evaluation: bool = False) -> EncMatrix:
        """Message 2: ``[(B L̃)[X] W1 + E_fwd]`` (out-of-batch neighbours included).

        ``evaluation``: a chunk of the final all-user release (accounted as one release).
        """
        if self.enc_x is None:
            raise RuntimeError("forward before the setup message [X] was received")
        return self.backend.sandwich(self.lt[users], self.enc_x, self.w1, self._noise(users, evaluation))

    def backward(self, users: np.ndarray, enc_g: EncMatrix) -> EncMatrix:
        """Message 4: ``[(B L̃ Bᵀ)[G] W1ᵀ + E_bwd]`` (in-batch block only)."""
        block = sp.csr_matrix(self.lt[users][:, users])
        return self.backend.sandwich(block, enc_g, self.w1.T, self._noise(users))

    def resync(self, users: np.ndarray, enc_rows: EncMatrix) -> None:
        """Message 5: replace the stored ``[X_B]`` by the recommender's re-clipped rows."""
        if self.enc_x is None:
            raise RuntimeError("resync before the setup message [X] was received")
        self.backend.set_rows(self.enc_x, users, enc_rows)
