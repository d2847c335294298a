"""Issue 30 §3 on the older paths: P4GCN's ``W1`` and DP noise, DGREC's LDP noise and group sampling.

P4GCN has no ``--crypto`` switch: a real HE backend is its real mode, so there ``W1`` and the noise
come from the CSPRNG unless ``reproducible``; the simulated ``plain`` backend stays seeded. DGREC is
simulated only (no crypto mode): seeded by default, ``reproducible = false`` hides both draws.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.protocols.dgrec.settings import DGRECSettings
from fedgraphrec.protocols.dgrec.trainer import DGREC
from fedgraphrec.protocols.p4gcn.settings import P4GCNSettings
from fedgraphrec.training.loading import load_settings
from tests.protocols.test_p4gcn import _proto


def test_p4gcn_hides_w1_and_noise_with_a_real_he_backend_unless_reproducible() -> None:
    assert not P4GCNSettings().hides() and not P4GCNSettings().hides("secure_noise")  # plain: seeded
    real = P4GCNSettings(backend="paillier")
    assert real.hides() and real.hides("secure_noise")
    research = load_settings(P4GCNSettings, None, ["reproducible=true", "backend='paillier'"])
    assert not research.hides() and not research.hides("secure_noise")
    mixed = P4GCNSettings(backend="paillier", secure_noise=False)  # an explicit seeded override
    assert mixed.hides() and not mixed.hides("secure_noise")


def test_p4gcn_w1_differs_between_runs_of_one_seed_when_secure() -> None:
    seeded = [_proto("plain").p2.w1 for _ in range(2)]
    np.testing.assert_array_equal(seeded[0], seeded[1])  # whoever has the seed regenerates W1
    a, b = (_proto("plain", reproducible=False) for _ in range(2))
    assert not np.allclose(a.p2.w1, b.p2.w1)
    assert a.privacy()["weights_source"] == "csprng"
    assert np.linalg.norm(a.p2.w1) <= a.settings.clip + 1e-12  # still clipped as the seeded W1


def test_dgrec_settings_derive_both_hiding_draws_from_reproducible() -> None:
    seeded = DGRECSettings(crypto="real", reproducible=True).resolved()
    assert seeded.secure_noise is False and seeded.secure_sampling is False
    assert DGRECSettings().resolved().secure_noise is False  # accounted: reproducible by default
    hidden = DGRECSettings(crypto="real").resolved()
    assert hidden.secure_noise is True and hidden.secure_sampling is True
    only_noise = DGRECSettings(crypto="real", reproducible=True, secure_noise=True).resolved()
    assert only_noise.secure_noise is True and only_noise.secure_sampling is False


def _toy(secure_sampling: bool) -> DGREC:
    rng = np.random.default_rng(0)
    train = (sp.random(30, 25, density=0.2, random_state=rng, format="csr") > 0).astype(np.float64).tocsr()
    social = (sp.random(30, 30, density=0.2, random_state=rng, format="csr") > 0).astype(np.float64).tocsr()
    s = DGRECSettings(kind="mf", d=4, sharing="plain", hops=2, lr=0.5, secure_sampling=secure_sampling)
    return DGREC(train, social, sp.identity(25, format="csr"), s, seed=0)


def test_dgrec_group_sampling_differs_between_runs_of_one_seed_when_secure() -> None:
    def trained(secure: bool) -> torch.Tensor:
        rec = _toy(secure)
        for centre in (0, 3, 5, 7):
            rec.step(centre)
        return rec.models.params["E"].clone()

    assert torch.equal(trained(False), trained(False))
    assert not torch.equal(trained(True), trained(True))
