"""The ledger of an LP-GCN run agrees with the paper's communication formula (Eq. 30)."""

import numpy as np
import torch

from fedgraphrec.crypto import ciphertext_size
from fedgraphrec.protocols.lpgcn.communication import neighbour_sets, per_client_cost
from fedgraphrec.protocols.lpgcn.protocol import LPGCN
from fedgraphrec.runtime import encoded_size
from fedgraphrec.training.sampler import BPRSampler
from tests.helpers import random_train


def test_forward_neighbour_traffic_matches_eq30_per_iteration():
    train = random_train(n_users=30, n_items=25, density=0.2, seed=9)
    d, L = 8, 3
    fed = LPGCN(train, torch.zeros(30, d), torch.zeros(25, d), n_layers=L, alpha=0)
    users, pos, neg = next(BPRSampler(train, seed=0).batches(0, 16))
    fed.train_step(users, pos, neg)
    forwarded = sum(
        r.payload_bytes
        for r in fed.net.ledger.rows()
        if r.phase.startswith("forward/")
        and r.phase.endswith("user-embeddings")
        and r.receiver == "conv-client"
    )
    nb = neighbour_sets(fed.topology.real, fed.topology.conv_of_item)
    total_neighbours = int(nb.n_neighbours.sum())
    # with alpha = 0 the routing pairs are exactly the real neighbour sets N_ũ
    assert len(fed.topology.nb_user) == total_neighbours
    row_ct = ciphertext_size(encoded_size((1, d), torch.float32))
    assert forwarded == L * total_neighbours * row_ct
    # Eq. 30 counts the raw float32 payload d·B per embedding: the ledger adds only the codec
    # header and the AEAD nonce + tag per ciphertext
    eq30 = per_client_cost(nb, d=d, L=L) * train.shape[0]
    assert forwarded == eq30 * row_ct / (d * 4)


def test_virtual_items_grow_routing_but_not_real_neighbours():
    train = random_train(n_users=30, n_items=25, density=0.2, seed=9)
    plain = LPGCN(train, torch.zeros(30, 4), torch.zeros(25, 4), n_layers=1, alpha=0, seed=1)
    masked = LPGCN(train, torch.zeros(30, 4), torch.zeros(25, 4), n_layers=1, alpha=4, seed=1)
    holders = (masked.topology.real + masked.topology.virtual).tocoo()
    conv = masked.topology.conv_of_item[holders.col]
    expected = {(int(c), int(u)) for c, u in zip(conv, holders.row, strict=True) if c != u}
    assert (
        set(zip(masked.topology.nb_conv.tolist(), masked.topology.nb_user.tolist(), strict=True)) == expected
    )
    assert len(masked.topology.nb_user) >= len(plain.topology.nb_user)
    assert np.array_equal(masked.topology.real.toarray(), plain.topology.real.toarray())
