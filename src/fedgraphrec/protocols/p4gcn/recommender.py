"""The recommender ``P1``: ratings, every trainable parameter and the HE key pair.

The social branch reads a separate social embedding table ``X_soc`` (A3 default): initialised as a
copy of ``X⁽⁰⁾_user``, updated only by the decrypted noisy social gradient of in-batch users, and
kept inside the ball ``‖x_i‖ ≤ C·s_x`` (``s_x`` the A6 global scale fixed at set-up), so the rows
sent in ``[X / s_x]`` always meet the clip bound. ``W2``, ``b``, fusion, backbone and items are
trained locally with Adam; ``X_soc`` with plain SGD at ``social_lr`` (η inside the middle matrix).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from fedgraphrec.crypto.he.base import EncMatrix, HEBackend
from fedgraphrec.models.propagation import NormalizedBipartite
from fedgraphrec.models.rating import Backbone, Fusion, decode
from fedgraphrec.privacy.matrix_gaussian import global_clip_scale

__all__ = ["Recommender"]


class Recommender(nn.Module):
    """Role program of ``P1`` (model, optimiser, key pair through ``backend``).

    Args:
        graph: normalised binary training graph (user × item) in float64.
        backbone: ``pmf``, ``lightgcn`` or ``gcn``.
        dim: ``d``.
        n_layers: backbone layers.
        beta: weight of the social embedding at fusion.
        fusion: ``False`` for the "w/o fusion" average.
        lr: Adam learning rate of the local parameters.
        social_lr: η of the social table update.
        clip: ``C``.
        backend: HE backend whose key pair ``P1`` owns.
        rating_range: ``(lo, hi)`` of the decoder.
        generator: seeded torch generator.
        unscale_n: multiply decrypted results by ``N`` (undo the ``1/N`` of ``L̃``, A7).
    """

    def __init__(
        self,
        graph: NormalizedBipartite,
        backbone: str,
        dim: int,
        n_layers: int,
        beta: float,
        fusion: bool,
        lr: float,
        social_lr: float,
        clip: float,
        backend: HEBackend,
        rating_range: tuple[float, float],
        generator: torch.Generator,
        *,
        unscale_n: bool = True,
        weight_decay: float = 0.0,
    ) -> None:
        super().__init__()
        self.backbone = Backbone(backbone, graph, dim, n_layers, generator)
        dt = graph.dtype
        self.w2 = nn.Parameter(
            torch.eye(dim, dtype=dt) + 0.01 * torch.randn(dim, dim, generator=generator, dtype=dt)
        )
        self.b = nn.Parameter(torch.zeros(dim, dtype=dt))
        self.fusion = Fusion(dim, beta, generator, enabled=fusion, dtype=dt)
        self.opt = torch.optim.Adam(self.parameters(), lr=lr, weight_decay=weight_decay)
        self.lo, self.hi = rating_range
        self.backend, self.clip, self.social_lr = backend, clip, social_lr
        self.n_users = graph.n_users
        self.unscale = float(graph.n_users) if unscale_n else 1.0
        self.x_soc = self.backbone.user.detach().to(torch.float64).numpy().copy()
        self.s_x = global_clip_scale(self.x_soc, clip)
        self.y_cache = np.zeros_like(self.x_soc)  # last decrypted social rows (free post-processing)
        self._pending: tuple[np.ndarray, torch.Tensor, float] | None = None

    # --- set-up ----------------------------------------------------------------------------------
    def encrypt_x(self, users: np.ndarray | None = None) -> EncMatrix:
        """``[X_soc / s_x]`` of all users (set-up) or of ``users`` (message 5)."""
        x = self.x_soc if users is None else self.x_soc[users]
        return self.backend.encrypt(x / self.s_x)

    # --- one iteration ---------------------------------------------------------------------------
    def social_rows(self, enc_y: EncMatrix) -> np.ndarray:
        """Decrypt message 2 and undo the clip and ``1/N`` scalings."""
        return self.backend.decrypt(enc_y) * self.s_x * self.unscale

    def predict(self, users: torch.Tensor, items: torch.Tensor, y_users: torch.Tensor) -> torch.Tensor:
        """Ratings of (user, item) pairs given the social rows ``Y`` of those users."""
        u1, v1 = self.backbone()
        x2 = torch.relu(y_users @ self.w2 + self.b)
        x3 = self.fusion(u1[users], x2)
        return decode(x3, v1[items], self.lo, self.hi)

    def local_step(
        self, batch_users: np.ndarray, y_b: np.ndarray, users: np.ndarray, items: np.ndarray, r: np.ndarray
    ) -> tuple[float, EncMatrix]:
        """Forward/backward on the batch; steps local parameters; returns loss and message 3 ``[G]``."""
        self.y_cache[batch_users] = y_b
        pos = np.searchsorted(batch_users, users)
        y = torch.tensor(y_b, dtype=self.w2.dtype, requires_grad=True)
        pred = self.predict(torch.from_numpy(users), torch.from_numpy(items), y[torch.from_numpy(pos)])
        loss = ((pred - torch.tensor(r, dtype=pred.dtype)) ** 2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        assert y.grad is not None
        g = self.social_lr * y.grad.detach().to(torch.float64).numpy()
        s_g = global_clip_scale(g, self.clip)
        self._pending = (batch_users, y.grad, s_g)
        return float(loss.detach()), self.backend.encrypt(g / s_g)

    def apply_social_update(self, enc_delta: EncMatrix) -> np.ndarray:
        """Decrypt message 4, update ``X_soc[B]`` and re-clip those rows; returns the batch users."""
        if self._pending is None:
            raise RuntimeError("apply_social_update before local_step")
        batch_users, _, s_g = self._pending
        self._pending = None
        delta = self.backend.decrypt(enc_delta) * s_g * self.unscale
        x = self.x_soc[batch_users] - delta
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        bound = self.clip * self.s_x
        self.x_soc[batch_users] = x / np.maximum(1.0, norms / bound)
        return batch_users
