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
