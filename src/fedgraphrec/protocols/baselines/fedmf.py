"""FedMF (Chai et al., "Secure Federated Matrix Factorization", IEEE Intelligent Systems 2020).

Matrix factorisation with the BPR loss, as LP-GCN's Table 4 runs it: each user keeps its embedding
on its device, the server keeps the item table, and every minibatch of triples is one federated
step:

1. every user with a triple in the minibatch downloads the **whole** item table (so the server does
   not learn which items it needs);
2. it computes its part of the BPR loss (:func:`~fedgraphrec.protocols.common.local_bpr`), updates
   its own embedding locally and uploads its item gradients as a **dense** ``N × d`` vector;
3. the server receives only the sum of those vectors and applies Adam to the item table.

The original protects the item gradients with Paillier encryption; here they go through secure
aggregation (:func:`~fedgraphrec.protocols.secure_aggregation.secure_aggregate`: pairwise masks,
Shamir-shared seeds, dropout recovery), which gives the server the same thing, the sum, at a
fraction of the cost. Training is then exactly centralized BPR-MF (up to the fixed-point resolution
of the secure sum): one Adam over the stacked tables is, elementwise, the users' Adams on their own
rows plus the server's Adam on the items. Adam divides by the gradient's running magnitude, so an
item whose summed gradient is tiny feels the fixed-point rounding relatively strongly: float64
verification wants ``frac_bits`` ≥ 40 (the default 32 gives deviations around 1e-7).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto.sharing import FixedPoint
from fedgraphrec.protocols.common import CLIENT, SERVER, StepRecord, local_bpr
from fedgraphrec.protocols.secure_aggregation import (
    SecureSum,
    SparseUpload,
    check_threshold,
    secure_aggregate,
    threshold_for,
)
from fedgraphrec.runtime import CryptoMode, Network

__all__ = ["FedMF"]


class FedMF:
    """Federated BPR-MF with securely aggregated item gradients.

    Args:
        train: binary user × item training matrix (rows stay on the users' devices).
        user0: initial user table (row ``u`` handed to user ``u``).
        item0: initial item table (held by the server).
        seed: run seed (kept for symmetry with the other protocols; secure aggregation is exact).
        lr: Adam learning rate of users and server.
        reg: ``λ`` of the layer-0 L2 term.
        crypto: ``real`` runs secure aggregation for real; ``accounted`` adds the same fixed-point
            encodings directly and counts the same bytes.
        transcripts: keep what each party received.
        frac_bits: fixed-point fractional bits of the secure sum.
        secagg_threshold: fraction of a minibatch's users secure aggregation needs (> 0.5; see
            :func:`~fedgraphrec.protocols.secure_aggregation.check_threshold`).
        secagg_semi_honest: accept a threshold <= 0.5 (honest-but-curious server only).
    """

    def __init__(
        self,
        train: sp.csr_matrix,
        user0: torch.Tensor,
        item0: torch.Tensor,
        *,
        seed: int,
        lr: float,
        reg: float,
        crypto: CryptoMode = "accounted",
        transcripts: bool = False,
        frac_bits: int = 32,
        secagg_threshold: float = 0.6,
        secagg_semi_honest: bool = False,
    ) -> None:
        self.n_users, self.n_items = train.shape
        self.seed = seed
        self.reg = reg
        self.user = user0.detach().clone()
        self.item = item0.detach().clone()
        self.optimizer = torch.optim.Adam([self.user, self.item], lr=lr)
        self.net = Network(self.n_users, crypto, transcripts)
        self.fp = FixedPoint(frac_bits)
        check_threshold(secagg_threshold, secagg_semi_honest)
        self.secagg_threshold = secagg_threshold
        self.secure_sum: SecureSum | None = None  # who runs real secure aggregation (default in-process)
        self.step_index = 0

    def parameters_by_name(self) -> dict[str, torch.Tensor]:
        """The tables under the centralized BPR-MF's parameter names."""
        return {"user_emb": self.user, "item_emb": self.item}

    def train_step(self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> StepRecord:
        """One minibatch: whole-table download, local BPR, secure sum of item gradients, Adam."""
        d, N = self.item.shape[1], self.n_items
        participants = np.unique(users.numpy())
        self.net.transmit(
            "train/download-items",
            SERVER,
            CLIENT,
            N * d * self.item.element_size(),
            count=len(participants),
            kind="item-table",
            protected=False,
            receivers=participants,
        )
        local = local_bpr(self.user, self.item, self.user, self.item, users, pos, neg, self.reg)
        # each user sums its rows per item before uploading: its vector lists an item once
        keys = np.searchsorted(participants, local.item_senders) * N + local.items.numpy()
        uniq, inverse = np.unique(keys, return_inverse=True)
        rows = torch.zeros((len(uniq), d), dtype=torch.float64)
        rows.index_add_(0, torch.from_numpy(inverse), (local.d_rows + local.r_rows).double())
        upload = SparseUpload(participants, N * d)
        upload.add(torch.from_numpy(uniq // N), torch.from_numpy(uniq % N) * d, rows)
        result = secure_aggregate(
            self.net,
            "train/item-gradients",
            upload,
            threshold=threshold_for(len(participants), self.secagg_threshold),
            fp=self.fp,
            label=f"fedmf/step/{self.step_index}".encode(),
            summer=self.secure_sum,
        )
        self.step_index += 1
        self.user.grad = local.dU + local.rU
        self.item.grad = result.total.view(N, d).to(self.item.dtype)
        self.optimizer.step()
        bpr, reg = local.bpr.item(), local.reg.item()
        return StepRecord(
            loss=bpr + self.reg * reg, bpr=bpr, reg=reg, user_grad=self.user.grad, item_grad=self.item.grad
        )

    def final_embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Users' and server's tables (prediction: a user scores the downloaded item table)."""
        return self.user.clone(), self.item.clone()
