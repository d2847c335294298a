r"""Mult-VAE (Liang et al., "Variational Autoencoders for Collaborative Filtering", WWW 2018).

A user's training row :math:`x_u` (L2-normalised, input dropout) is encoded to
:math:`q(z_u \mid x_u) = \mathcal N(\mu_u, \operatorname{diag}\sigma_u^2)` through a ``tanh`` layer
of 600 units, and :math:`z_u` (200 dimensions) is decoded through 600 ``tanh`` units to logits over
all items. The loss per user is the multinomial negative log-likelihood
:math:`-\sum_i x_{ui} \log\operatorname{softmax}(f(z_u))_i` plus :math:`\beta` times the KL divergence
to :math:`\mathcal N(0, I)`; the architecture ``600 → 200 → 600`` and the :math:`\beta` grid
``{0.2, 0.4, 0.6, 0.8}`` are those of LP-GCN's Table 4. At evaluation :math:`z_u = \mu_u` and the
logits are the scores. All randomness (initialisation, dropout masks, reparameterisation noise)
comes from one seeded generator.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from fedgraphrec.models.lightgcn import xavier_uniform
from fedgraphrec.seeding import seeded_generator

__all__ = ["MultVAE", "VAELoss"]


@dataclass(frozen=True)
class VAELoss:
    """Mean over the batch's users of the negative log-likelihood and the KL term."""

    nll: torch.Tensor
    kl: torch.Tensor
    total: torch.Tensor


def _linear(
    n_in: int, n_out: int, gen: torch.Generator, dtype: torch.dtype
) -> tuple[nn.Parameter, nn.Parameter]:
    w = xavier_uniform((n_in, n_out), gen, dtype)  # as the authors' code
    b = torch.randn(n_out, generator=gen, dtype=torch.float64) * 0.001
    return w, nn.Parameter(b.to(dtype))


class MultVAE(nn.Module):
    """The Mult-VAE network.

    Args:
        n_items: number of items (input and output width).
        hidden: width of the encoder's and decoder's hidden layer (600).
        latent: dimension of ``z`` (200).
        dropout: input dropout during training (0.5).
        generator: source of every random number.
        dtype: float32 or float64.
    """

    def __init__(
        self,
        n_items: int,
        hidden: int = 600,
        latent: int = 200,
        dropout: float = 0.5,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        gen = generator if generator is not None else seeded_generator(0)
        self.gen = gen
        self.dropout = dropout
        self.latent = latent
        self.enc_w, self.enc_b = _linear(n_items, hidden, gen, dtype)
        self.mu_w, self.mu_b = _linear(hidden, 2 * latent, gen, dtype)  # μ and log σ² side by side
        self.dec_w, self.dec_b = _linear(latent, hidden, gen, dtype)
        self.out_w, self.out_b = _linear(hidden, n_items, gen, dtype)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(μ, log σ²)`` of ``q(z | x)`` for dense rows ``x``."""
        h = F.normalize(x, dim=1)
        if self.training and self.dropout:
            keep = 1.0 - self.dropout
            mask = torch.rand(h.shape, generator=self.gen, dtype=torch.float64).lt(keep).to(h.dtype)
            h = h * mask / keep
        h = torch.tanh(h @ self.enc_w + self.enc_b)
        out = h @ self.mu_w + self.mu_b
        return out[:, : self.latent], out[:, self.latent :]

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Item logits for latent codes ``z``."""
        return torch.tanh(z @ self.dec_w + self.dec_b) @ self.out_w + self.out_b

    def loss(self, x: torch.Tensor, beta: float) -> VAELoss:
        """Multinomial NLL + ``beta`` · KL, each averaged over the rows of ``x``."""
        mu, logvar = self.encode(x)
        std = torch.exp(0.5 * logvar)
        eps = torch.randn(std.shape, generator=self.gen, dtype=torch.float64).to(std.dtype)
        logits = self.decode(mu + eps * std if self.training else mu)
        nll = -(F.log_softmax(logits, dim=1) * x).sum(1).mean()
        kl = (0.5 * (logvar.exp() + mu.square() - 1 - logvar).sum(1)).mean()
        return VAELoss(nll=nll, kl=kl, total=nll + beta * kl)

    @torch.no_grad()
    def scores(self, x: torch.Tensor) -> torch.Tensor:
        """Evaluation scores (logits at ``z = μ``) for dense training rows ``x``."""
        was = self.training
        self.eval()
        try:
            return self.decode(self.encode(x)[0])
        finally:
            self.train(was)
