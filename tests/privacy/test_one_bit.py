"""One-bit encoder: ±1 outputs, endpoint probabilities, unbiased decoding, and the paper's 0.54."""

from __future__ import annotations

import math

import pytest
import torch

from fedgraphrec.privacy.one_bit import (
    accounting,
    decode,
    decode_scale,
    encode,
    ldp_epsilon,
    paper_rdp_epsilon,
    prob_plus_one,
)


def test_encoder_outputs_only_plus_minus_one() -> None:
    g = torch.randn(5000, dtype=torch.float64)
    out = encode(g, 0.1, 1.0, torch.Generator().manual_seed(0))
    assert out.shape == g.shape
    assert set(out.unique().tolist()) == {-1, 1}


@pytest.mark.parametrize("beta", [0.5, 1.0, 3.0])
def test_endpoint_probabilities_match_formula(beta: float) -> None:
    e = math.exp(beta)
    g = torch.tensor([-5.0, -0.1, 0.0, 0.1, 7.0], dtype=torch.float64)
    p = prob_plus_one(g, 0.1, beta)
    expected = [1 / (e + 1), 1 / (e + 1), 0.5, e / (e + 1), e / (e + 1)]
    assert torch.allclose(p, torch.tensor(expected, dtype=torch.float64), atol=1e-12)


def test_empirical_endpoint_frequency() -> None:
    n = 200_000
    out = encode(torch.full((n,), 0.1, dtype=torch.float64), 0.1, 1.0, torch.Generator().manual_seed(1))
    freq = (out == 1).double().mean().item()
    target = math.e / (math.e + 1)
    assert abs(freq - target) < 4 * math.sqrt(target * (1 - target) / n)


def test_monte_carlo_mean_of_decoded_equals_clipped_gradient() -> None:
    delta, beta, reps = 0.1, 1.0, 40_000
    g = torch.tensor([-0.3, -0.1, -0.05, 0.0, 0.02, 0.07, 0.1, 0.5], dtype=torch.float64)
    gen = torch.Generator().manual_seed(2)
    stack = encode(g.expand(reps, -1).contiguous(), delta, beta, gen)
    est = decode(stack, delta, beta)
    c = decode_scale(delta, beta)
    tol = 5 * c / math.sqrt(reps)  # ≥ 5 standard errors of a mean of ±c values
    assert torch.all((est - g.clamp(-delta, delta)).abs() < tol)
    # and it is *not* the unclipped gradient where clipping bites
    assert abs(est[-1].item() - 0.5) > 0.3


def test_paper_figure_054_log10_and_natural_log() -> None:
    assert paper_rdp_epsilon(0.1, 1.0, 1, "10") == pytest.approx(0.5475, abs=5e-5)
    assert round(paper_rdp_epsilon(0.1, 1.0, 1, "10"), 2) in (0.54, 0.55)
    assert paper_rdp_epsilon(0.1, 1.0, 1, "e") == pytest.approx(1.2607, abs=5e-5)
    assert paper_rdp_epsilon(0.1, 1.0, 10, "e") == pytest.approx(12.607, abs=5e-4)


def test_spec_bracket_table() -> None:
    # ε/(2 n_s) = ln x; spec §6.1 table gives x
    for delta, beta, x in [(0.01, 0.5, 1.1895), (0.2, 2.0, 3.0569), (0.05, 3.0, 4.4099)]:
        assert math.exp(paper_rdp_epsilon(delta, beta, 1, "e") / 2) == pytest.approx(x, abs=1e-4)


def test_accounting_side_by_side_and_ldp() -> None:
    acc = accounting(0.1, 1.0, n_s=100)
    assert acc.ldp_per_coordinate == 1.0 and acc.ldp_vector == 100.0
    assert acc.paper_rdp_ln_vector == pytest.approx(100 * acc.paper_rdp_ln_per_coordinate)
    assert ldp_epsilon(0.5, 4, sharings=3) == 6.0
    # per-coordinate likelihood ratio of the encoder is bounded by e^β
    p = prob_plus_one(torch.tensor([-1.0, 1.0], dtype=torch.float64), 0.1, 1.0)
    assert (p[1] / p[0]).item() == pytest.approx(math.e)


def test_bad_parameters_are_named() -> None:
    with pytest.raises(ValueError, match="delta"):
        encode(torch.zeros(2), 0.0, 1.0, torch.Generator())
    with pytest.raises(ValueError, match="beta"):
        decode_scale(0.1, -1.0)
    with pytest.raises(ValueError, match="n_s"):
        paper_rdp_epsilon(0.1, 1.0, 0)
