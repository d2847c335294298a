"""The project's one Adam (:func:`fedgraphrec.protocols.optim.adam_step`) and the two holders of state
that call it step exactly like ``torch.optim.Adam`` (no weight decay, single-tensor path)."""

from __future__ import annotations

import torch

from fedgraphrec.protocols.gnn4fr.state import Adam
from fedgraphrec.protocols.optim import LocalOptimizer, adam_step


def _reference(start: torch.Tensor, grads: list[torch.Tensor], lr: float) -> torch.Tensor:
    p = torch.nn.Parameter(start.clone())
    opt = torch.optim.Adam([p], lr=lr, foreach=False)
    for g in grads:
        p.grad = g.clone()
        opt.step()
    return p.detach()


def test_every_adam_is_torch_adam_bit_for_bit() -> None:
    gen = torch.Generator().manual_seed(3)
    start = torch.randn(5, 4, generator=gen, dtype=torch.float64)
    grads = [torch.randn(5, 4, generator=gen, dtype=torch.float64) for _ in range(7)]
    want = _reference(start, grads, lr=0.01)

    p, m, v = start.clone(), torch.zeros_like(start), torch.zeros_like(start)
    for t, g in enumerate(grads, 1):
        adam_step(p, g, m, v, t, 0.01)
    local = LocalOptimizer(start.clone(), 0.01)
    block = Adam.of(start)
    for g in grads:
        local.step(g)
        block.step(g, 0.01)
    for got in (p, local.param, block.param):
        assert torch.equal(got, want)


def test_local_optimizer_moves_only_the_first_rows() -> None:
    start = torch.ones(3, 2, dtype=torch.float64)
    opt = LocalOptimizer(start.clone(), 0.1)
    opt.step(torch.ones(2, 2, dtype=torch.float64), n=2)
    assert torch.equal(opt.param[2], start[2]) and not torch.equal(opt.param[:2], start[:2])
