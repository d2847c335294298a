"""DP noise sources: the seeded one replays the run's generators, the secure one cannot be replayed."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedgraphrec.privacy.noise_source import SecureNoise, SeededNoise, noise_source


def test_seeded_noise_is_exactly_the_generators_stream() -> None:
    src = SeededNoise(np.random.default_rng(4), torch.Generator().manual_seed(4))
    np.testing.assert_array_equal(
        src.standard_normal((3, 2)), np.random.default_rng(4).standard_normal((3, 2))
    )
    assert torch.equal(src.uniform((5,)), torch.rand(5, generator=torch.Generator().manual_seed(4)))
    with pytest.raises(RuntimeError, match="no torch generator"):
        SeededNoise(np.random.default_rng(0)).uniform((2,))


def test_secure_noise_differs_per_source_and_has_the_right_distributions() -> None:
    a, b = SecureNoise(), SecureNoise()
    assert a.name == "csprng" and noise_source(True).name == "csprng" and noise_source(False).name == "seeded"
    assert not np.array_equal(a.standard_normal((8,)), b.standard_normal((8,)))
    n = 200_000
    u = a.uniform((n,), torch.float64)
    assert float(u.min()) > 0 and float(u.max()) < 1 and abs(float(u.mean()) - 0.5) < 0.005
    z = a.standard_normal((n,))
    assert abs(z.mean()) < 0.01 and z.std() == pytest.approx(1.0, abs=0.01)
    assert np.mean(np.abs(z) > 1.96) == pytest.approx(0.05, abs=0.003)  # Gaussian tails, not just moments
    lap = a.laplace(0.3, (n,))
    assert abs(lap.mean()) < 0.005 and np.abs(lap).mean() == pytest.approx(0.3, rel=0.02)
    assert a.standard_normal((3, 5)).shape == (3, 5) and a.standard_normal((7,)).shape == (7,)


@pytest.mark.parametrize("secure", [False, True])
def test_raw_bits_are_fair_in_every_position_and_seeded_bits_replay(secure: bool) -> None:
    """Each of the 64 bit positions is a fair coin (two-sided z-test, α = 1e-3 over all positions).

    The secure source is keyed with a fixed key: the same keystream-to-words path as an
    ``os.urandom`` key, but one fixed sample, so the test cannot fail by chance (with a fresh key it
    did, about once in a thousand runs, as a z-test at α = 1e-3 must).
    """
    key = bytes(range(32))
    src = SecureNoise(key=key) if secure else SeededNoise(generator=torch.Generator().manual_seed(7))
    n = 40_000
    words = src.bits(n)
    assert words.dtype == np.uint64 and words.shape == (n,)
    ones = ((words[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)).sum(0)
    z = (ones - n / 2) / np.sqrt(n / 4)
    assert np.abs(z).max() < 4.0  # two-sided 1e-3 / 64 per position: |z| < 3.97
    if not secure:
        again = SeededNoise(generator=torch.Generator().manual_seed(7)).bits(n)
        np.testing.assert_array_equal(words, again)
        with pytest.raises(RuntimeError, match="no torch generator"):
            SeededNoise(np.random.default_rng(0)).bits(2)
