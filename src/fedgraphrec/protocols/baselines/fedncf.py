r"""FedNCF (Perifanis & Efraimidis, "Federated Neural Collaborative Filtering", KBS 2022).

NeuMF (:class:`~fedgraphrec.models.NCF`, GMF and MLP towers) trained by rounds, as FedGRec's Table 1
runs it (spec ``fedgrec.md`` §5.5): each sampled user keeps its two user embeddings on its device,
downloads the rows of the items it queries (its positives and fresh random negatives, drawn by the
same sampler as FedGRec) and the network weights, trains a private copy of everything for ``τ``
Adam steps on binary cross-entropy (positive pairs labelled 1, sampled negatives 0), and uploads its
item-row and weight deltas through secure aggregation. The server averages: an item row by the
number of users that queried it (the count travels inside the same secure sum), the weights by the
number of users summed (FedAvg).

The round runs batched: every user's copy of the weights is a slice of one stacked tensor, each
user's loss is its own mean, and Adam is elementwise, so one optimizer is exactly ``S`` independent
ones; the tests compare it with a user-by-user reference.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F

from fedgraphrec.crypto.sharing import FixedPoint
from fedgraphrec.models import NCF
from fedgraphrec.protocols.fedgrec.sampling import RoundSample, sample_round
from fedgraphrec.protocols.secure_aggregation import (
    SecureSum,
    SparseUpload,
    check_threshold,
    secure_aggregate,
    threshold_for,
)
from fedgraphrec.runtime import CryptoMode, Network

__all__ = ["FedNCF", "ncf_pair_logits"]

_ID_BYTES = 4


def _weights(model: NCF) -> list[torch.Tensor]:
    """The shared network weights in a fixed order: first-layer halves and bias, deeper layers, ``h``."""
    deep = [t for pair in zip(model.Ws, model.bs, strict=True) for t in pair]
    return [model.W_user, model.W_item, model.b0, *deep, model.h]


def ncf_pair_logits(
    pg: torch.Tensor, pm: torch.Tensor, qg: torch.Tensor, qm: torch.Tensor, weights: list[torch.Tensor]
) -> torch.Tensor:
    """NeuMF logits of aligned rows, each pair with its own copy of the weights (leading dimension).

    ``pg, pm, qg, qm``: ``(P, d)``; ``weights``: as :func:`_weights`, each with a leading ``P``.
    """
    W_user, W_item, b0, *deep, h = weights
    d = pg.shape[1]
    x = F.relu(
        torch.einsum("pd,pdw->pw", pm, W_user) + torch.einsum("pd,pdw->pw", qm, W_item) + b0
    )  # fmt: skip
    for W, b in zip(deep[0::2], deep[1::2], strict=True):
        x = F.relu(torch.einsum("pi,pio->po", x, W) + b)
    return torch.einsum("pd,pd->p", pg * qg, h[:, :d, 0]) + torch.einsum("pk,pk->p", x, h[:, d:, 0])


class FedNCF:
    """FedNCF's server and users, simulated in one process.

    Args:
        train: binary user × item training matrix.
        model: the initial NeuMF (user rows are handed to their owners; items and weights stay on
            the server). It is updated in place and serves evaluation.
        seed: run seed (sampling streams, shared with FedGRec's sampler).
        clients_per_round, local_steps, n_negatives, lr, reg: as FedGRec.
        crypto, transcripts, frac_bits, secagg_threshold: secure aggregation, as FedGRec.
    """

    def __init__(
        self,
        train: sp.csr_matrix,
        model: NCF,
        *,
        seed: int,
        clients_per_round: int = 400,
        local_steps: int = 10,
        n_negatives: int = 2048,
        lr: float = 1e-3,
        reg: float = 1e-4,
        crypto: CryptoMode = "accounted",
        transcripts: bool = False,
        frac_bits: int = 32,
        secagg_threshold: float = 0.6,
        secagg_semi_honest: bool = False,
    ) -> None:
        self.train = sp.csr_matrix(train)
        self.model = model
        self.seed = seed
        self.clients_per_round, self.local_steps, self.n_negatives = (
            clients_per_round,
            local_steps,
            n_negatives,
        )
        self.lr, self.reg = lr, reg
        self.net = Network(train.shape[0], crypto, transcripts)
        self.fp = FixedPoint(frac_bits)
        check_threshold(secagg_threshold, secagg_semi_honest)
        self.secagg_threshold = secagg_threshold
        self.secure_sum: SecureSum | None = None  # who runs real secure aggregation (default in-process)

    def sample(self, round_index: int) -> RoundSample:
        """The round's users, negatives and pairs (FedGRec's sampler and streams)."""
        return sample_round(
            self.train,
            round_index,
            seed=self.seed,
            clients_per_round=self.clients_per_round,
            n_negatives=self.n_negatives,
            local_steps=self.local_steps,
        )

    def train_round(self, round_index: int) -> tuple[float, int]:
        """One round; returns the mean local loss and the number of users summed."""
        m, rs = self.model, self.sample(round_index)
        N, d = m.item_gmf.shape
        S = len(rs.clients)
        weights = [w.detach() for w in _weights(m)]
        n_weights = sum(w.numel() for w in weights)
        n_query = rs.n_queried
        self.net.transmit(
            "train/query", "client", "server", n_query * _ID_BYTES, kind="item-ids", protected=False,
            senders=rs.clients,
        )  # fmt: skip
        self.net.transmit(
            "train/download", "server", "client", (2 * n_query * d + n_weights) * m.item_gmf.element_size(),
            kind="item-rows-and-weights", protected=False, receivers=rs.clients,
        )  # fmt: skip
        seg = rs.pair_seg
        keys = np.concatenate(
            [seg * N + rs.pos_items[rs.pair_pos], (seg[None] * N + rs.neg_items[rs.pair_neg]).ravel()]
        )
        uniq, inverse = np.unique(keys, return_inverse=True)
        t_seg, t_item = torch.from_numpy(uniq // N), torch.from_numpy(uniq % N)
        pos_rows = torch.from_numpy(inverse[: len(seg)])
        neg_rows = torch.from_numpy(inverse[len(seg) :].reshape(rs.pair_neg.shape))
        seg_t, clients_t = torch.from_numpy(seg), torch.from_numpy(rs.clients)
        with torch.no_grad():
            local = [m.user_gmf[clients_t], m.user_mlp[clients_t], m.item_gmf[t_item], m.item_mlp[t_item]]
            start = [t.clone() for t in local] + [w.expand(S, *w.shape).clone() for w in weights]
        params = [t.clone().requires_grad_(True) for t in start]
        optimizer = torch.optim.Adam(params, lr=self.lr)
        pair_w = (1.0 / torch.from_numpy(np.diff(rs.pair_ptr)).to(m.item_gmf.dtype))[seg_t]
        total = 0.0
        for step in range(self.local_steps):
            optimizer.zero_grad(set_to_none=True)
            pg, pm, qg, qm, *ws = params
            per_pair = [w[seg_t] for w in ws]
            logit_i = ncf_pair_logits(pg[seg_t], pm[seg_t], qg[pos_rows], qm[pos_rows], per_pair)
            nr = neg_rows[step]
            logit_j = ncf_pair_logits(pg[seg_t], pm[seg_t], qg[nr], qm[nr], per_pair)
            bce = F.softplus(-logit_i) + F.softplus(logit_j)  # −log σ(ŷ_i) − log(1 − σ(ŷ_j))
            sq = sum(
                t[r].square().sum(1)
                for t, r in ((pg, seg_t), (pm, seg_t), (qg, pos_rows), (qm, pos_rows), (qg, nr), (qm, nr))
            )
            loss = (pair_w * (bce + self.reg / 2 * sq)).sum()
            loss.backward()
            optimizer.step()
            total += loss.item()
        upload = SparseUpload(rs.clients, 2 * N * d + n_weights + N)
        with torch.no_grad():
            deltas = [p.detach() - s for p, s in zip(params, start, strict=True)]
            upload.add(t_seg, t_item * d, deltas[2].double())
            upload.add(t_seg, N * d + t_item * d, deltas[3].double())
            flat = torch.cat([dw.reshape(S, -1) for dw in deltas[4:]], dim=1).double()
            upload.add(torch.arange(S), torch.full((S,), 2 * N * d), flat)
            q_seg, q_items = rs.queries()
            upload.add(
                torch.from_numpy(q_seg),
                torch.from_numpy(2 * N * d + n_weights + q_items),
                torch.ones(len(q_seg), 1),
            )
        result = secure_aggregate(
            self.net,
            "train/upload",
            upload,
            threshold=threshold_for(S, self.secagg_threshold),
            fp=self.fp,
            label=f"fedncf/round/{round_index}".encode(),
            summer=self.secure_sum,
        )
        self._apply(result.total, len(result.included), n_weights)
        with torch.no_grad():  # users keep their own embeddings
            m.user_gmf[clients_t] = params[0].detach()
            m.user_mlp[clients_t] = params[1].detach()
        return total / (S * self.local_steps), len(result.included)

    @torch.no_grad()
    def _apply(self, total: torch.Tensor, n_included: int, n_weights: int) -> None:
        m = self.model
        N, d = m.item_gmf.shape
        counts = total[2 * N * d + n_weights :].clamp_min(1.0)[:, None]
        m.item_gmf.add_((total[: N * d].view(N, d) / counts).to(m.item_gmf.dtype))
        m.item_mlp.add_((total[N * d : 2 * N * d].view(N, d) / counts).to(m.item_mlp.dtype))
        offset = 2 * N * d
        for w in _weights(m):
            w.add_((total[offset : offset + w.numel()].view(w.shape) / max(n_included, 1)).to(w.dtype))
            offset += w.numel()

    def state_dict(self) -> dict[str, Any]:
        """The model (users' rows, server's items and weights) and the ledger."""
        return {"model": self.model.state_dict(), "ledger": self.net.ledger.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.model.load_state_dict(state["model"])
        self.net.ledger.load_state_dict(state["ledger"])
