"""Small random bipartite graphs with the pathologies protocols must survive."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def random_train(n_users: int = 13, n_items: int = 17, density: float = 0.25, seed: int = 0) -> sp.csr_matrix:
    """Binary train matrix with an item nobody trained on, a one-item user and a one-user item."""
    rng = np.random.default_rng(seed)
    dense = rng.random((n_users, n_items)) < density
    dense[:, -1] = False  # item with no training users
    dense[0, :] = False
    dense[0, 0] = True  # user with one item
    dense[:, 1] = False
    dense[2, 1] = True  # item held by one user
    for u in range(1, n_users):  # every other user has >= 2 items
        if dense[u].sum() < 2:
            dense[u, 2:4] = True
    return sp.csr_matrix(dense.astype(np.float32))


def rel_err(a, b) -> float:
    """Largest absolute difference, relative to the reference's largest magnitude."""
    return (a - b).abs().max().item() / max(b.abs().max().item(), 1e-300)


def assert_forward_and_loss_match(rec, us, vs, oracle_loss, rtol: float) -> None:
    """Every layer's embeddings and the batch loss of a protocol step equal the oracle's."""
    for layer in range(len(us)):
        assert rel_err(rec.user_layers[layer], us[layer].detach()) <= rtol
        assert rel_err(rec.item_layers[layer], vs[layer].detach()) <= rtol
    assert abs(rec.loss - oracle_loss) <= rtol * abs(oracle_loss)
