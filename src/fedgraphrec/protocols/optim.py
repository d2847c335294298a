"""Elementwise optimizers a party runs on its own rows (its state: the rows, two moments, a step count).

Adam is elementwise, so one optimizer over the stacked rows of many parties is exactly one
optimizer per party, and a party whose state travels as arrays (a Flower node's ``context.state``)
rebuilds it from ``m``, ``v`` and ``t`` at every step.
"""

from __future__ import annotations

import torch

__all__ = ["LocalOptimizer"]


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
        b1, b2 = self.betas
        self.t += 1
        m.lerp_(grad, 1 - b1)
        v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
        bias2_sqrt = (1 - b2**self.t) ** 0.5
        denom = (v.sqrt() / bias2_sqrt).add_(self.eps)
        p.addcdiv_(m, denom, value=-self.lr / (1 - b1**self.t))
