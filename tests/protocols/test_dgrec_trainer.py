"""DGREC trainer helpers: the Laplace noise of the w/non-sharing ablation."""

from __future__ import annotations

import torch

from fedgraphrec.protocols.dgrec.trainer import laplace_from_uniform


def test_laplace_noise_is_finite_at_the_edge_and_has_the_right_scale() -> None:
    edge = laplace_from_uniform(torch.tensor([0.0, 0.5, 1.0 - 2**-24]), 0.2)
    assert torch.isfinite(edge).all()  # torch.rand returns exact zeros: no infinite noise
    assert edge[1] == 0.0
    draws = laplace_from_uniform(torch.rand(200_000, generator=torch.Generator().manual_seed(0)), 0.2)
    assert abs(float(draws.mean())) < 0.005
    assert abs(float(draws.abs().mean()) - 0.2) < 0.005  # E|X| = b for Laplace(0, b)
