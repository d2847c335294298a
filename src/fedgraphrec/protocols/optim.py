"""Elementwise optimizers a party runs on its own rows (its state: the rows, two moments, a step count).

Adam is elementwise, so one optimizer over the stacked rows of many parties is exactly one
optimizer per party, and a party whose state travels as arrays (a Flower node's ``context.state``)
rebuilds it from ``m``, ``v`` and ``t`` at every step.

:func:`adam_step` is the project's one Adam update; :class:`LocalOptimizer` (FedMF, FedGRec), GNN4FR's
row blocks (:class:`~fedgraphrec.protocols.gnn4fr.state.Adam`) and LP-GCN's parties all call it, so
the lossless tests that compare them step by step with a centralized Adam test one arithmetic.
"""

from __future__ import annotations

import torch

__all__ = ["LocalOptimizer", "adam_step"]


def adam_step(
    param: torch.Tensor,
    grad: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    step: int,
    lr: float,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
) -> None:
    r"""One Adam step on rows a party owns, in place (PyTorch's single-tensor Adam, no weight decay).

    Written with PyTorch's own operations in the order of its single-tensor Adam (``lerp_``,
    ``addcmul_``, the bias corrections folded into the denominator and the step size), so it equals
    ``torch.optim.Adam(foreach=False)`` bit for bit (``tests/protocols/test_optim.py``). Adam is
    element-wise, so owners that each step their own rows every minibatch (with a zero gradient where
    they got none) reproduce one dense Adam over the whole table (spec ``lpgcn.md`` §11.8). ``step``
    is the step number after this one (1 for the first).
    """
    beta1, beta2 = betas
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    bias1 = 1 - beta1**step
    bias2_sqrt = (1 - beta2**step) ** 0.5
    denom = exp_avg_sq.sqrt().div_(bias2_sqrt).add_(eps)  # PyTorch's arithmetic, one temporary
    param.addcdiv_(exp_avg, denom, value=-lr / bias1)


class LocalOptimizer:
    """Adam (Kingma & Ba; PyTorch's defaults and arithmetic) or plain SGD on the first ``n`` rows.

    Elementwise, so one instance over the stacked rows of all sampled users is exactly one fresh
    optimizer per user; rows beyond ``n`` have had no gradient yet and would not move.
    """

    def __init__(
        self,
        param: torch.Tensor,
        lr: float,
        kind: str = "adam",
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        *,
        m: torch.Tensor | None = None,
        v: torch.Tensor | None = None,
        t: int = 0,
    ) -> None:
        self.param, self.lr, self.kind, self.betas, self.eps = param, lr, kind, betas, eps
        self.m = (torch.zeros_like(param) if m is None else m) if kind == "adam" else param
        self.v = (torch.zeros_like(param) if v is None else v) if kind == "adam" else param
        self.t = t

    def step(self, grad: torch.Tensor, n: int | None = None) -> None:
        """One update of rows ``[:n]`` (all rows when ``n`` is None) with their gradient ``grad``."""
        p, m, v = (x if n is None else x[:n] for x in (self.param, self.m, self.v))
        if self.kind == "sgd":
            p.add_(grad, alpha=-self.lr)
            return
        self.t += 1
        adam_step(p, grad, m, v, self.t, self.lr, self.betas, self.eps)
