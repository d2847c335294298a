"""TEMPORARY: the peer-program path gives the old Network.transmit path's per-step results."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from fedgraphrec.protocols.dgrec import DGREC, DGRECSettings, ModelConfig
from fedgraphrec.runtime.network import Network
from tests.protocols._dgrec_old import OldDGREC


def _data() -> tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]:
    rng = np.random.default_rng(0)
    train = (sp.random(40, 30, density=0.15, random_state=rng, format="csr") > 0).astype(np.float64).tocsr()
    social = (sp.random(40, 40, density=0.15, random_state=rng, format="csr") > 0).astype(np.float64).tocsr()
    tags = (sp.random(30, 6, density=0.3, random_state=rng, format="csr") > 0).astype(float).tocsr()
    return train, social, tags


@pytest.mark.parametrize("sharing", ["one_bit", "laplace", "clipped", "plain", "none"])
def test_same_steps(sharing: str) -> None:
    train, social, tags = _data()
    model = ModelConfig(d=4, n_interests=3, d_interest=3, hidden=(4, 4))
    s = DGRECSettings(model=model, public_ratio=0.5, sharing=sharing, hops=2, lr=0.05)
    new_net, old_net = Network(40, transcripts=True), Network(40, transcripts=True)
    new = DGREC(train, social, tags, s, seed=3, network=new_net)
    old = OldDGREC(train, social, tags, s, seed=3, network=old_net)
    if sharing in ("one_bit", "none"):  # bit for bit over two epochs
        for e in range(2):
            assert new.epoch(e) == old.epoch(e)
            for k in new.models.params:
                assert torch.equal(new.models.params[k], old.models.params[k]), k
            assert np.array_equal(new.count, old.count)
    else:  # float means summed in another order: equal to rounding, step by step from equal states
        for c in range(0, 40, 4):
            new.step(c)
            old.step(c)
            for k in new.models.params:
                assert torch.allclose(new.models.params[k], old.models.params[k], rtol=1e-5, atol=1e-6), k
                old.models.params[k].copy_(new.models.params[k])
            assert np.allclose(new.loss, old.loss, rtol=1e-5)
            old.loss[:] = new.loss
    if sharing in ("one_bit", "none"):
        assert new_net.ledger.total_bytes() == old_net.ledger.total_bytes()
        assert new_net.ledger.total_messages() == old_net.ledger.total_messages()
    pub = "dgrec/public_items"
    assert new_net.ledger.total_bytes(pub) == old_net.ledger.total_bytes(pub) > 0
