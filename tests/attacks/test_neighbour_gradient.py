"""A neighbour recovers private items from plain shared gradients, not from one-bit encodings."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.attacks.neighbour_gradient import (
    first_round_gradients,
    private_item_hits,
    private_item_ranking,
)
from fedgraphrec.privacy.one_bit import encode
from fedgraphrec.protocols.dgrec.settings import DGRECSettings
from fedgraphrec.protocols.dgrec.trainer import DGREC
from fedgraphrec.runtime.network import Network


def test_plain_gradients_leak_private_items_one_bit_encodings_do_not() -> None:
    rng = np.random.default_rng(0)
    n_users, n_items, d = 60, 200, 4
    train = sp.random(n_users, n_items, density=0.05, random_state=rng, format="csr")
    train.data[:] = 1.0
    social = sp.random(n_users, n_users, density=0.1, random_state=rng, format="csr")
    tags = (sp.random(n_items, 10, density=0.2, random_state=rng, format="csr") > 0).astype(float).tocsr()
    s = DGRECSettings(d=d, n_interests=3, d_interest=3, hidden=(4, 4), public_ratio=0.5)
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


def test_ranking_from_the_transcript_plain_leaks_one_bit_does_not() -> None:
    rng = np.random.default_rng(0)
    n_users, n_items, d = 60, 200, 4
    train = sp.random(n_users, n_items, density=0.08, random_state=rng, format="csr")
    train.data[:] = 1.0
    social = sp.random(n_users, n_users, density=0.1, random_state=rng, format="csr")
    tags = (sp.random(n_items, 10, density=0.2, random_state=rng, format="csr") > 0).astype(float).tocsr()
    s = DGRECSettings(d=d, n_interests=3, d_interest=3, hidden=(4, 4), public_ratio=0.5)
    net = Network(n_users, transcripts=True)
    rec = DGREC(train.tocsr(), social, tags, s, seed=0, network=net)
    for c in (3, 17, 41):
        rec.step(c)
    senders, coded = first_round_gradients(net.transcript)
    assert coded.dtype == torch.int8 and len(senders) >= 20
    pub = [rec.public[u].indices for u in senders]
    priv = [np.setdiff1d(rec.train[u].indices, p) for u, p in zip(senders, pub, strict=True)]
    one_bit = private_item_ranking(coded, priv, pub, n_items, d).summary()
    plain = private_item_ranking(rec.local_gradients(senders, rng), priv, pub, n_items, d).summary()
    # measured 0.87: touched rows are the member's items plus negatives and neighbours' public items
    assert plain["mean_auc"] > 0.75
    assert plain["mean_precision"] > 5 * plain["mean_random_precision"]
    assert abs(one_bit["mean_auc"] - 0.5) < 0.1  # measured 0.48
    assert one_bit["mean_precision"] < 3 * one_bit["mean_random_precision"] + 0.05
