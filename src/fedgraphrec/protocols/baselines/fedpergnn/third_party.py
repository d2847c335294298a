r"""FedPerGNN's third party: it matches item tokens and hands each user its neighbours' embeddings.

It holds the graph it can see — users × anonymous token columns — and the embedding every user last
gave it (:math:`\tilde e_v`), never an item id (tokens are keyed with the clients' :math:`S`) nor
the server's item table. In a simulation it runs in the coordinator's process beside the server;
the two share nothing (the server program keeps it as a separate object).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto.tokens import TOKEN_BYTES
from fedgraphrec.protocols.baselines.fedpergnn import roles as R
from fedgraphrec.runtime.part import Part

__all__ = ["ThirdParty", "neighbour_means"]


def neighbour_means(
    membership: sp.csr_matrix, stale: torch.Tensor, users: np.ndarray, columns: np.ndarray
) -> torch.Tensor:
    r"""Mean embedding of the other holders of column ``columns[k]``, for training pairs.

    That is :math:`\operatorname{mean}_{v\in\mathcal U_c\setminus\{u\}}\tilde e_v` for each pair
    ``(users[k], columns[k])``.

    ``membership`` is the third party's user × token-column matrix and every pair must be in it; a
    column held by ``u`` alone gives zero. The same numbers as averaging the list of embeddings the
    third party sends.
    """
    holders = np.bincount(membership.indices, minlength=membership.shape[1])
    col_sum = torch.from_numpy(membership.T.tocsr() @ stale.double().numpy()).to(stale.dtype)
    others = torch.from_numpy(holders[columns] - 1).to(stale.dtype)[:, None]
    return (col_sum[columns] - stale[torch.from_numpy(users)]) / others.clamp_min(1.0)


class ThirdParty:
    """The token matcher (module docstring).

    Args:
        n_clients: size of the user population.
    """

    def __init__(self, n_clients: int) -> None:
        self.n_clients = n_clients
        self.membership = sp.csr_matrix((n_clients, 0))
        self.stale = torch.zeros(0)

    def receive_expand(self, part: Part) -> None:
        """Set-up: group equal tokens into columns; keep every user's embedding.

        Each message is a user's tokens (16 bytes each, in the user's order) followed by its
        embedding (``meta["dim"]`` values of ``meta["dtype"]``).
        """
        assert part.senders is not None
        d, dtype = int(part.meta["dim"]), np.dtype(part.meta["dtype"])
        tail = d * dtype.itemsize
        order = np.argsort(part.senders, kind="stable")
        blobs = [bytes(part.value[k]) for k in order.tolist()]
        users = part.senders[order]
        if not np.array_equal(users, np.arange(self.n_clients)):
            raise ValueError(f"{part.phase}: expected one message from every user")
        counts = np.array([(len(b) - tail) // TOKEN_BYTES for b in blobs], dtype=np.int64)
        tokens = np.frombuffer(b"".join(b[:-tail] if tail else b for b in blobs), dtype="<u8").reshape(-1, 2)
        if len(tokens):
            _, columns = np.unique(tokens, axis=0, return_inverse=True)
        else:
            columns = np.zeros(0, dtype=np.int64)
        self.columns = np.asarray(columns, dtype=np.int64).reshape(-1)  # column of each pair, user order
        indptr = np.concatenate([[0], np.cumsum(counts)])
        n_cols = int(self.columns.max()) + 1 if len(self.columns) else 0
        self.membership = sp.csr_matrix(
            (np.ones(len(self.columns)), self.columns, indptr), shape=(self.n_clients, n_cols)
        )
        self.stale = (
            torch.stack([torch.from_numpy(np.frombuffer(b[-tail:], dtype=dtype).copy()) for b in blobs])
            if blobs
            else torch.zeros(0, d)
        )

    def neighbours(self, users: np.ndarray, phase: str, *, lists: bool) -> Part:
        """Each user's neighbours for each of its tokens (rows: their mean, in the user's order).

        The part carries the other holders' mean embedding per token, the only function of them
        the local model uses. ``lists``: the ledger counts what FedPerGNN's third party sends in a
        round — the list of the other holders' embeddings for every token — as the protocol always
        booked it (a simulation does not materialise the lists); otherwise it counts the means.
        """
        m = self.membership
        counts = (m.indptr[users + 1] - m.indptr[users]).astype(np.int64)
        pair_users = np.repeat(users, counts)
        starts = m.indptr[users].astype(np.int64)
        pos = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts) + np.arange(
            int(counts.sum())
        )
        cols = self.columns[pos]
        rows = neighbour_means(m, self.stale, pair_users, cols)
        holders = np.bincount(m.indices, minlength=m.shape[1])
        seg = np.repeat(np.arange(len(users)), counts)
        received = np.bincount(seg, weights=holders[cols] - 1, minlength=len(users))
        d, size = self.stale.shape[1], self.stale.element_size()
        keep = counts > 0
        part = Part(
            phase, R.K_NEIGHBOURS, R.THIRD_PARTY, R.CLIENT, rows, receivers=users[keep], counts=counts[keep]
        )
        return part.with_sizes((received * d * size).astype(np.int64)[keep]) if lists else part

    def refresh(self, part: Part) -> None:
        r"""Keep the embeddings users sent (their :math:`\tilde e_v` from now on)."""
        assert part.senders is not None
        self.stale[torch.from_numpy(part.senders)] = torch.as_tensor(part.value).to(self.stale.dtype)
