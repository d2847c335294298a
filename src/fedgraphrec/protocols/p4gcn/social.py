"""The social party ``P2``: holds ``Ã`` (hence ``L̃``), the frozen ``W1`` and the noise; sees ciphertexts.

It computes both sandwiches of spec §4.5 on ciphertexts under the recommender's key and adds its
matrix-Gaussian noise (isotropic per user row, ``σ_i`` from ``s_l(i)``) before returning them.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from fedgraphrec.crypto.he import EncMatrix, HEBackend
from fedgraphrec.privacy.gaussian_accountant import GaussianAccountant, noise_scales
from fedgraphrec.privacy.matrix_gaussian import (
    clip_frobenius,
    normalized_adjacency,
    row_noise,
    strict_release_multiplier,
    user_sensitivity,
)

__all__ = ["SocialParty"]


class SocialParty:
    """Role program of ``P2``.

    Args:
        adjacency: binary user–user adjacency (symmetrised here, A1).
        dim: embedding size ``d``.
        clip: clipping constant ``C``.
        releases: ``K``, the largest number of row releases of one user (fixed by the schedule).
        eps: privacy budget ``ε``.
        delta: ``δ``.
        backend: the HE backend (only its public operations are used here).
        rng: P2's own random stream (``W1`` and the noise).
        noise: ``False`` gives P4GCN* (no DP noise; everything else equal).
        strict: global sensitivity 2 and every affected row counted (spec §5.5-4).
        max_batch_users: largest ``|B|`` of the schedule (for ``strict``).
        scale_by_n: scale ``L̃`` by ``1/N`` as in the paper (A7).
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
        strict: bool = False,
        max_batch_users: int = 1,
        scale_by_n: bool = True,
    ) -> None:
        n = adjacency.shape[0]
        self.n, self.dim, self.backend, self.rng = n, dim, backend, rng
        self.scale = 1.0 / n if scale_by_n else 1.0
        self.lt = normalized_adjacency(adjacency, scale=self.scale)
        self.w1 = clip_frobenius(rng.standard_normal((dim, dim)), clip)
        s_l = np.full(n, 2.0) if strict else user_sensitivity(adjacency)
        mult = strict_release_multiplier(adjacency, max_batch_users) if strict else 1
        self.sens = clip * clip * s_l * self.scale * np.sqrt(mult)  # per-release, per-row
        self.noise = noise
        self.sigma = (
            noise_scales(s_l, clip, releases * mult, eps, delta, scale=self.scale) if noise else np.zeros(n)
        )
        self.accountant = GaussianAccountant(n)
        self.enc_x: EncMatrix | None = None

    def _noise(self, users: np.ndarray) -> np.ndarray | None:
        if not self.noise:
            return None
        self.accountant.record(users, self.sens[users], self.sigma[users])
        return row_noise(self.sigma[users], self.dim, self.rng)

    def receive_x(self, enc_x: EncMatrix) -> None:
        """Store ``[X]`` (setup message)."""
        self.enc_x = enc_x

    def forward(self, users: np.ndarray) -> EncMatrix:
        """Message 2: ``[(B L̃)[X] W1 + E_fwd]`` (out-of-batch neighbours included)."""
        if self.enc_x is None:
            raise RuntimeError("forward before the setup message [X] was received")
        return self.backend.sandwich(self.lt[users], self.enc_x, self.w1, self._noise(users))

    def backward(self, users: np.ndarray, enc_g: EncMatrix) -> EncMatrix:
        """Message 4: ``[(B L̃ Bᵀ)[G] W1ᵀ + E_bwd]`` (in-batch block only)."""
        block = sp.csr_matrix(self.lt[users][:, users])
        return self.backend.sandwich(block, enc_g, self.w1.T, self._noise(users))

    def resync(self, users: np.ndarray, enc_rows: EncMatrix) -> None:
        """Message 5: replace the stored ``[X_B]`` by the recommender's re-clipped rows."""
        if self.enc_x is None:
            raise RuntimeError("resync before the setup message [X] was received")
        self.backend.set_rows(self.enc_x, users, enc_rows)
