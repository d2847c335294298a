r"""BPR loss with LightGCN's layer-0 L2 regulariser.

Bayesian Personalized Ranking (Rendle et al., UAI 2009, https://arxiv.org/abs/1205.2618) as used by
the public LightGCN code and by ``specs/lpgcn.md`` §2.1, per minibatch :math:`B` of triples
:math:`(u, i, j)`:

.. math::
    \mathcal L_B = \frac{1}{|B|}\sum_{(u,i,j)\in B} \operatorname{softplus}(\hat y_{uj}-\hat y_{ui})
      + \lambda\,\frac{1}{2|B|}\sum_{(u,i,j)\in B}
        \big(\lVert U^{(0)}_u\rVert^2+\lVert V^{(0)}_i\rVert^2+\lVert V^{(0)}_j\rVert^2\big).

The formula and the code agree: a mean over the batch for the ranking term, and the regulariser on
the *layer-0* rows of the batch (repeated rows counted once per occurrence), scaled by
:math:`\lambda/(2|B|)`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["bpr_loss", "l2_reg"]


def bpr_loss(pos_scores: torch.Tensor, neg_scores: torch.Tensor) -> torch.Tensor:
    """Mean of ``softplus(neg - pos)`` over the batch (= mean of ``-ln σ(pos - neg)``)."""
    return F.softplus(neg_scores - pos_scores).mean()


def l2_reg(*rows: torch.Tensor, batch_size: int) -> torch.Tensor:
    r"""``Σ‖rows‖² / (2·batch_size)``: LightGCN's regulariser before multiplying by :math:`\lambda`."""
    total = sum((r.pow(2).sum() for r in rows), torch.zeros((), dtype=rows[0].dtype))
    return total / (2.0 * batch_size)
