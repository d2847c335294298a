"""P4GCN's party programs compute exactly what the former single-process class did (plain backend, float64)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from fedgraphrec.crypto.he import PlainBackend
from fedgraphrec.protocols.p4gcn.driver import P4GCNRun
from fedgraphrec.protocols.p4gcn.protocol import P4GCN, P4GCNConfig
from fedgraphrec.protocols.p4gcn.settings import P4GCNSettings

N_USERS, N_ITEMS, DIM = 12, 10, 4


def test_programs_equal_the_former_class_bit_for_bit() -> None:
    rng = np.random.default_rng(0)
    users = np.repeat(np.arange(N_USERS), 4)
    items = rng.integers(0, N_ITEMS, size=len(users))
    ratings = rng.integers(1, 6, size=len(users)).astype(float)
    a = np.triu(rng.random((N_USERS, N_USERS)) < 0.3, 1)
    adj = sp.csr_matrix((a | a.T).astype(float))
    train = (users, items, ratings)
    old = P4GCN(train, N_USERS, N_ITEMS, adj, P4GCNConfig(dim=DIM, batch_size=8, epochs=2, eps=5.0),
                PlainBackend(2048), (1.0, 5.0), seed=3)  # fmt: skip
    new = P4GCNRun(train, N_USERS, N_ITEMS, adj, P4GCNSettings(dim=DIM, batch=8, epochs=2, eps=5.0),
                   PlainBackend(2048), (1.0, 5.0), seed=3)  # fmt: skip
    losses = [(old.run_epoch(e), new.run_epoch(e)) for e in range(2)]
    print(losses)
    assert all(a == b for a, b in losses)
    np.testing.assert_array_equal(old.predict(users, items), new.predict(users, items))
    old.final_release()
    new.final_release()
    np.testing.assert_array_equal(old.predict(users, items), new.predict(users, items))
    np.testing.assert_array_equal(old.p1.x_soc, new.p1.x_soc)
    print(new.predict(users, items)[:6].tolist())
    assert old.privacy() == new.privacy()
    rows = [(r.phase, r.sender, r.receiver, r.messages, r.payload_bytes) for r in new.net.ledger.rows()]
    assert rows == [
        (r.phase, r.sender, r.receiver, r.messages, r.payload_bytes) for r in old.net.ledger.rows()
    ]
