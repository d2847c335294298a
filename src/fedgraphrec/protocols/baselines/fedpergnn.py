r"""FedPerGNN (Wu et al., Nature Communications 2022), FedGNN in FedGRec's Table 1.

Wu et al., "A federated graph neural network framework for privacy-preserving personalization".

Each user holds its embedding :math:`e_u` and its items. A **third-party server** expands every
user's local graph: users upload their item IDs as deterministic tokens under a key the clients share
and the third party does not hold (:class:`~fedgraphrec.crypto.ItemTokenizer`, computed for real in
crypto mode ``real``), together with their current embedding; the third party matches tokens and
returns, for each of a user's items, the embeddings of the *other* users who hold it, without
learning what the item is. The user's local GNN then reaches second-order neighbours:

.. math::
    \hat e_{ui} = e_i + \operatorname{mean}_{v\in\mathcal U_i\setminus\{u\}} \tilde e_v,\qquad
    h_u = e_u + \operatorname{mean}_{i\in\mathcal I_u}\hat e_{ui},\qquad \hat y_{uj} = h_u\cdot e_j,

with :math:`\tilde e_v` the embedding ``v`` last gave the third party (neighbours are constants of
the local model, which is where FedPerGNN's convolution is lossy). [D] The original uses a graph
attention layer; mean aggregation keeps the baseline a *1-hop federated GNN* with no extra weights,
and the reduction "noise off, no pseudo items" is exactly that model trained by FedAvg of item updates
(tested against a per-user autograd reference).

**A round** (sampler and streams shared with FedGRec, so budgets compare): the ``S`` sampled users
refresh their neighbour embeddings from the third party, download the rows of the items they query
(positives and fresh negatives), run ``τ`` local Adam steps on BPR (FedGNN+BPR) or squared error
(positives 1, negatives 0; FedGNN's MSE), keep their own embedding, and upload their item updates.
**Privacy mechanisms** of the original, both active by default:

* *pseudo-interacted items*: each user adds ``n_pseudo`` random items it did not query, with updates
  drawn from a Gaussian of the same per-coordinate mean and std as its real updates;
* *local DP*: every uploaded coordinate is clipped to :math:`[-\delta, \delta]` and gets Laplace noise
  of scale :math:`\lambda` (per coordinate and upload, :math:`\varepsilon = 2\delta/\lambda`).

The server sees each user's noisy rows (no secure aggregation in the original) and averages each
item's updates over the users that uploaded it.

``expand=False`` drops the third party and the neighbour term, :math:`h_u = e_u`: federated BPR-MF
with the same rounds, pseudo items and local-DP uploads (DGREC's FedRec baseline, ``specs/dgrec.md``
§8.5, without its social regulariser).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto import ItemTokenizer, SharedKey
from fedgraphrec.crypto.tokens import TOKEN_BYTES
from fedgraphrec.privacy.noise_source import NoiseSource, SecureNoise, SeededNoise
from fedgraphrec.protocols.fedgrec.sampling import RoundSample, negatives_of, sample_round
from fedgraphrec.protocols.secure_aggregation import SparseUpload, plain_aggregate
from fedgraphrec.runtime import CryptoMode, Network
from fedgraphrec.seeding import numpy_rng

__all__ = ["FedPerGNN", "neighbour_means"]

_ID_BYTES = 4
THIRD_PARTY = "third-party"


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


class FedPerGNN:
    r"""FedPerGNN's server, third party and users, simulated in one process.

    Args:
        train: binary user × item training matrix.
        user0, item0: initial tables (user rows go to their owners; items stay on the server).
        seed: run seed (sampling streams shared with FedGRec; pseudo items and noise have their own).
        clients_per_round, local_steps, n_negatives, lr, reg: as FedGRec.
        loss: ``bpr`` (FedGNN+BPR) or ``mse`` (FedGNN).
        n_pseudo: pseudo-interacted items per user and round (0: off).
        ldp_clip: :math:`\delta`, per-coordinate clipping of uploads (0: no clipping).
        ldp_scale: :math:`\lambda`, Laplace noise scale (0: no noise).
        secure_noise: draw the Laplace noise from the OS CSPRNG instead of the run seed (the LDP ε
            then holds against whoever knows the seed; runs are no longer bit-for-bit reproducible).
        crypto: ``real`` computes the item tokens for real; ``accounted`` counts their bytes.
        transcripts: keep what each party received.
        expand: expand local graphs through the third party (``False``: :math:`h_u = e_u`, federated
            MF; nothing is sent to the third party).
    """

    def __init__(
        self,
        train: sp.csr_matrix,
        user0: torch.Tensor,
        item0: torch.Tensor,
        *,
        seed: int,
        clients_per_round: int = 400,
        local_steps: int = 10,
        n_negatives: int = 2048,
        lr: float = 1e-3,
        reg: float = 1e-4,
        loss: str = "bpr",
        n_pseudo: int = 20,
        ldp_clip: float = 0.01,
        ldp_scale: float = 0.001,
        crypto: CryptoMode = "accounted",
        transcripts: bool = False,
        expand: bool = True,
        secure_noise: bool = False,
    ) -> None:
        for name, value in (("n_pseudo", n_pseudo), ("ldp_clip", ldp_clip), ("ldp_scale", ldp_scale)):
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        if loss not in ("bpr", "mse"):
            raise ValueError(f"loss must be 'bpr' or 'mse', got {loss!r}")
        self.train = sp.csr_matrix(train)
        self.train.sort_indices()
        self.user, self.item = user0.detach().clone(), item0.detach().clone()
        self.seed = seed
        self.clients_per_round, self.local_steps = clients_per_round, local_steps
        self.n_negatives = n_negatives
        self.lr, self.reg, self.loss = lr, reg, loss
        self.n_pseudo, self.ldp_clip, self.ldp_scale = n_pseudo, ldp_clip, ldp_scale
        self.expand = expand
        # LDP noise: the run seed's named stream per round (reproducible), or the OS CSPRNG
        self.secure_noise: NoiseSource | None = SecureNoise() if secure_noise else None
        self.net = Network(self.train.shape[0], crypto, transcripts)
        self.membership = self._expand()
        self.stale = self.user.clone()  # the embeddings the third party holds

    def _expand(self) -> sp.csr_matrix:
        """Set-up: every user sends its item tokens and embedding to the third party.

        The third party groups equal tokens into columns: the graph it can see, users × anonymous items.
        """
        t = self.train
        n_items = np.diff(t.indptr)
        d, size = self.user.shape[1], self.user.element_size()
        payloads = None
        if not self.expand:  # no third party: the columns are the item ids, nothing is sent
            self.columns = t.indices.astype(np.int64)
            return sp.csr_matrix((np.ones(t.nnz), self.columns, t.indptr), shape=t.shape)
        if self.net.real:
            tokenizer = ItemTokenizer(SharedKey.generate())  # the clients' key, never the third party's
            tokens = tokenizer.tokens(t.indices)
            payloads = [tokens[t.indptr[u] : t.indptr[u + 1]] for u in range(t.shape[0])]
            _, columns = np.unique(np.array(tokens, dtype=f"S{TOKEN_BYTES}"), return_inverse=True)
        else:
            columns = t.indices  # the same partition of pairs into columns, without the cipher
        self.net.transmit(
            "setup/expand-upload", "client", THIRD_PARTY, n_items * TOKEN_BYTES + d * size,
            kind="item-tokens-and-embedding", protection="pseudonymous", payloads=payloads,
            senders=np.arange(t.shape[0]),
        )  # fmt: skip
        n_cols = int(columns.max()) + 1 if len(columns) else 0
        self.columns = np.asarray(columns, dtype=np.int64)  # column of each training pair, CSR order
        return sp.csr_matrix((np.ones(len(columns)), self.columns, t.indptr), shape=(t.shape[0], n_cols))

    def sample(self, round_index: int) -> RoundSample:
        """The round's users, negatives and pairs (FedGRec's sampler and streams)."""
        return sample_round(
            self.train, round_index, seed=self.seed, clients_per_round=self.clients_per_round,
            n_negatives=self.n_negatives, local_steps=self.local_steps,
        )  # fmt: skip

    def _traffic(self, rs: RoundSample, pair_users: np.ndarray, pair_cols: np.ndarray) -> None:
        d, size = self.user.shape[1], self.user.element_size()
        holders = np.bincount(self.membership.indices, minlength=self.membership.shape[1])
        received = np.bincount(
            np.searchsorted(rs.clients, pair_users), weights=holders[pair_cols] - 1, minlength=len(rs.clients)
        )
        if self.expand:
            self._expand_traffic(rs, received)
        self.net.transmit(
            "train/query", "client", "server", rs.n_queried * _ID_BYTES, kind="item-ids",
            protected=False, senders=rs.clients,
        )  # fmt: skip
        self.net.transmit(
            "train/download", "server", "client", rs.n_queried * d * size, kind="item-rows",
            protected=False, receivers=rs.clients,
        )  # fmt: skip

    def _expand_traffic(self, rs: RoundSample, received: np.ndarray) -> None:
        d, size = self.user.shape[1], self.user.element_size()
        self.net.transmit(
            "train/expand-refresh", "client", THIRD_PARTY, d * size, count=len(rs.clients),
            kind="user-embedding", protected=False, senders=rs.clients,
        )  # fmt: skip
        self.net.transmit(
            "train/expand-download", THIRD_PARTY, "client", (received * d * size).astype(np.int64),
            kind="neighbour-embeddings", protected=False, receivers=rs.clients,
        )  # fmt: skip

    def train_round(self, round_index: int) -> tuple[float, int]:
        """One round; returns the mean local loss and the number of users that uploaded."""
        rs = self.sample(round_index)
        N, d = self.item.shape
        S = len(rs.clients)
        pos_users = rs.clients[rs.pos_seg]
        pair_cols = self.columns[self._pair_index(pos_users, rs.pos_items)]
        self._traffic(rs, pos_users, pair_cols)
        if self.expand:
            neigh = neighbour_means(self.membership, self.stale, pos_users, pair_cols)
        q_seg, q_items = rs.queries()
        keys = q_seg.astype(np.int64) * N + q_items
        uniq, inverse = np.unique(keys, return_inverse=True)
        t_seg, t_item = uniq // N, uniq % N
        pos_rows = torch.from_numpy(inverse[: len(rs.pos_items)])
        neg_rows_all = torch.from_numpy(inverse[len(rs.pos_items) :])
        clients_t = torch.from_numpy(rs.clients)
        start_items = self.item[torch.from_numpy(t_item)].clone()
        e_u = self.user[clients_t].clone().requires_grad_(True)
        q = start_items.clone().requires_grad_(True)
        optimizer = torch.optim.Adam([e_u, q], lr=self.lr)
        pos_seg_t = torch.from_numpy(rs.pos_seg)
        n_pos = torch.from_numpy(np.diff(rs.pos_ptr)).to(q.dtype)
        pair_seg = torch.from_numpy(rs.pair_seg)
        pair_w = (1.0 / torch.from_numpy(np.diff(rs.pair_ptr)).to(q.dtype))[pair_seg]
        total = 0.0
        for step in range(self.local_steps):
            optimizer.zero_grad(set_to_none=True)
            if self.expand:
                item_hat = (
                    torch.zeros_like(e_u).index_add_(0, pos_seg_t, q[pos_rows] + neigh) / n_pos[:, None]
                )
                h = (e_u + item_hat)[pair_seg]
            else:  # federated MF
                h = e_u[pair_seg]
            qi = q[pos_rows[torch.from_numpy(rs.pair_pos)]]
            qj = q[neg_rows_all[torch.from_numpy(rs.pair_neg[step])]]
            yi, yj = (h * qi).sum(1), (h * qj).sum(1)
            if self.loss == "bpr":
                per_pair = torch.nn.functional.softplus(yj - yi)
            else:
                per_pair = (yi - 1.0).square() + yj.square()
            sq = e_u[pair_seg].square().sum(1) + qi.square().sum(1) + qj.square().sum(1)
            loss = (pair_w * (per_pair + self.reg / 2 * sq)).sum()
            loss.backward()
            optimizer.step()
            total += loss.item()
        deltas = (q.detach() - start_items).double()
        touched = (deltas != 0).any(1).numpy()  # rows Adam moved: the items the user trained on
        upload = self._protected_upload(rs, t_seg[touched], t_item[touched], deltas[touched], round_index)
        result = plain_aggregate(self.net, "train/upload", upload)
        counts = result.total[N * d :].clamp_min(1.0)[:, None]
        with torch.no_grad():
            self.item += (result.total[: N * d].view(N, d) / counts).to(self.item.dtype)
            self.user[clients_t] = e_u.detach()
            self.stale[clients_t] = e_u.detach()  # uploaded at the next refresh, counted there
        return total / (S * self.local_steps), len(result.included)

    def _pair_index(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Position in the CSR order of the training pairs ``(users[k], items[k])``."""
        t = self.train
        keys = np.repeat(np.arange(t.shape[0]), np.diff(t.indptr)).astype(np.int64) * t.shape[1] + t.indices
        return np.searchsorted(keys, users.astype(np.int64) * t.shape[1] + items)

    def _protected_upload(
        self, rs: RoundSample, t_seg: np.ndarray, t_item: np.ndarray, deltas: torch.Tensor, round_index: int
    ) -> SparseUpload:
        """Real rows plus pseudo items, clipped and noised; a count row per uploaded item."""
        N, d = self.item.shape
        seg, items, rows = t_seg, t_item, deltas
        if self.n_pseudo:
            rng = numpy_rng(self.seed, "fedpergnn", "pseudo", round_index)
            seg_t = torch.from_numpy(t_seg)
            count = torch.from_numpy(np.bincount(t_seg, minlength=len(rs.clients))).double()[:, None]
            mean = torch.zeros(len(rs.clients), d, dtype=torch.float64).index_add_(0, seg_t, deltas) / count
            var = torch.zeros_like(mean).index_add_(0, seg_t, (deltas - mean[seg_t]).square()) / count
            bounds = np.searchsorted(t_seg, np.arange(len(rs.clients) + 1))  # t_seg is sorted
            p_items = [
                negatives_of(t_item[bounds[k] : bounds[k + 1]], N, self.n_pseudo, rng)
                for k in range(len(rs.clients))
            ]
            p_seg = np.repeat(np.arange(len(rs.clients)), [len(p) for p in p_items])
            z = torch.from_numpy(rng.standard_normal((len(p_seg), d)))
            p_rows = mean[p_seg] + var[p_seg].sqrt() * z
            seg, items = np.concatenate([t_seg, p_seg]), np.concatenate([t_item, *p_items]).astype(np.int64)
            rows = torch.cat([deltas, p_rows])
        if self.ldp_clip:
            rows = rows.clamp(-self.ldp_clip, self.ldp_clip)
        if self.ldp_scale:
            noise = self.secure_noise or SeededNoise(numpy_rng(self.seed, "fedpergnn", "ldp", round_index))
            rows = rows + torch.from_numpy(noise.laplace(self.ldp_scale, tuple(rows.shape)))
        upload = SparseUpload(rs.clients, N * d + N)
        seg_t, items_t = torch.from_numpy(seg), torch.from_numpy(items)
        upload.add(seg_t, items_t * d, rows)
        upload.add(seg_t, N * d + items_t, torch.ones(len(seg), 1, dtype=torch.float64))
        return upload

    def final_embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Users' :math:`h_u` (their local GNN over the current neighbours) and the server's items."""
        if not self.expand:
            return self.user.clone(), self.item.clone()
        t = self.train
        users = np.repeat(np.arange(t.shape[0]), np.diff(t.indptr))
        neigh = neighbour_means(self.membership, self.stale, users, self.columns)
        rows = self.item[torch.from_numpy(t.indices.astype(np.int64))] + neigh
        n = torch.from_numpy(np.maximum(np.diff(t.indptr), 1)).to(rows.dtype)[:, None]
        item_hat = torch.zeros_like(self.user).index_add_(0, torch.from_numpy(users), rows) / n
        return (self.user + item_hat).clone(), self.item.clone()

    def state_dict(self) -> dict[str, Any]:
        """Users' embeddings, the third party's copies, the server's items and the ledger."""
        return {
            "user": self.user.clone(),
            "stale": self.stale.clone(),
            "item": self.item.clone(),
            "ledger": self.net.ledger.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.user.copy_(state["user"])
        self.stale.copy_(state["stale"])
        self.item.copy_(state["item"])
        self.net.ledger.load_state_dict(state["ledger"])
