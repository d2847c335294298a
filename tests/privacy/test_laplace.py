"""The Laplace mechanism's ε ↔ λ: one formula, both directions."""

from __future__ import annotations

import math

import pytest

from fedgraphrec.privacy.laplace import laplace_ldp_epsilon, laplace_scale_for


def test_epsilon_and_scale_are_inverse() -> None:
    assert laplace_ldp_epsilon(0.1, laplace_scale_for(1.0, 0.1)) == pytest.approx(1.0)
    assert laplace_scale_for(2.0, 0.05) == pytest.approx(0.05)  # λ = 2δ/ε
    assert laplace_ldp_epsilon(0.1, 0.0) == math.inf and laplace_scale_for(math.inf, 0.1) == 0.0
    with pytest.raises(ValueError, match="epsilon must be positive"):
        laplace_scale_for(0.0, 0.1)
