"""A neighbour recovers private items from plain shared gradients, not from one-bit encodings."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.attacks.neighbour_gradient import private_item_hits
from fedgraphrec.privacy.one_bit import encode
from fedgraphrec.protocols.dgrec import DGREC, DGRECSettings, ModelConfig


def test_plain_gradients_leak_private_items_one_bit_encodings_do_not() -> None:
    rng = np.random.default_rng(0)
    n_users, n_items, d = 60, 200, 4
    train = sp.random(n_users, n_items, density=0.05, random_state=rng, format="csr")
    train.data[:] = 1.0
    social = sp.random(n_users, n_users, density=0.1, random_state=rng, format="csr")
    tags = (sp.random(n_items, 10, density=0.2, random_state=rng, format="csr") > 0).astype(float).tocsr()
    s = DGRECSettings(model=ModelConfig(d=d, n_interests=3, d_interest=3, hidden=(4, 4)), public_ratio=0.5)
    rec = DGREC(train.tocsr(), social, tags, s, seed=0)
    users = np.flatnonzero(np.diff(rec.train.indptr) >= 4)
    grads = rec.local_gradients(users, np.random.default_rng(1))
    private = [np.setdiff1d(rec.train[u].indices, rec.public[u].indices) for u in users]
    plain = private_item_hits(grads, private, n_items, d, k=20)
    enc = encode(grads, s.delta, s.beta, torch.Generator().manual_seed(2))
    coded = private_item_hits(enc, private, n_items, d, k=20)
    assert plain.private > 20
    assert plain.hits > 3 * plain.chance  # the touched rows give private items away
    assert coded.hits < plain.hits / 2  # the encoding hides them (close to chance)
