r"""FedGRec as one whole-population object, kept ONLY for the old Flower job (:mod:`.job`).

Transitional (issue #21): the protocol's implementation is the party programs of
:mod:`fedgraphrec.protocols.fedgrec`; this copy of the old class serves :func:`.job.run_fedgrec_job`
and :class:`~fedgraphrec.runtime.flower.FlowerSecureSum` (inputs computed in the ServerApp) until
the generic Flower engine runs the programs on the SuperNodes; delete it with them. Its local
arithmetic is the programs' (:mod:`fedgraphrec.protocols.fedgrec.local`).

Algorithm 1 of the paper, with the spec's names:

* :meth:`FedGRec.warm_up` — lines 2–9. Item degrees by secure aggregation (Eq. 9), then ``K``
  propagation rounds in which every user downloads the whole table ``E^{k-1}`` (hiding which rows
  it needs), computes ``e_u^k`` (Eq. 6) and uploads its contribution ``D_u Y_uᵀ (e_u^{k-1})ᵀ``
  (Eq. 7) under secure aggregation, which sums to ``E^k`` (Eq. 8). Afterwards ``E^k`` and ``e_u^k``
  are exactly LightGCN's layer-``k`` embeddings of the initial tables (up to the fixed-point
  resolution of the secure sum).
* :meth:`FedGRec.train_round` — lines 10–24. Step 1: sample ``S`` users; each queries its positives
  and ``n_negatives`` random negatives and downloads their embeddings of every order. Step 2: lazy
  refresh of the user latents from the downloaded rows (Eq. 6, all orders from one snapshot).
  Step 3: ``τ`` local Adam (or SGD) steps on the BPR loss (or FCF's squared error) with every
  latent frozen. Step 4: one secure aggregation of the dense vector
  ``[Δ⁰_u ; latent deltas of orders 1..K]``, applied by the server as Eqs. 10–11.

The round runs *batched over the sampled users* (spec §7's flat layout): the users' local copies of
item rows are separate rows of one tensor, each user's loss is its own mean, and Adam is
elementwise, so one optimizer over the stacked tensors is exactly ``S`` independent per-user Adams.
Only rows that receive a gradient in some local step can change (Adam moves nothing whose gradient
and moments are zero), so only those rows are materialised; the ledger still counts every queried
row and the dense secure-aggregation upload.

Deviations and decisions (spec §6): server learning rates default to 1 (``latent_lr = 1`` keeps
``E^{k+1} = R̂ᵀ E_U^{k,stored}``); by default one negative of the same user per positive per local
step; a fresh optimizer per user per round; the degree vector ``|N_t|`` is broadcast once after
Eq. 9 (it is an aggregate), so training-round downloads do not single out a user's positives. The
queries still do, across rounds: see :func:`fedgraphrec.attacks.query_intersection`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto.sharing import FixedPoint
from fedgraphrec.models import NormalizedBipartite
from fedgraphrec.models.propagation import spmm
from fedgraphrec.protocols.common import CLIENT, SERVER
from fedgraphrec.protocols.fedgrec.local import LocalObjective as _LocalObjective
from fedgraphrec.protocols.fedgrec.sampling import RoundSample, sample_round
from fedgraphrec.protocols.fedgrec.settings import FedGRecSettings
from fedgraphrec.protocols.optim import LocalOptimizer as _Optimizer
from fedgraphrec.protocols.secure_aggregation import (
    AggregateResult,
    SecureSum,
    SparseUpload,
    plain_aggregate,
    secure_aggregate,
    threshold_for,
)
from fedgraphrec.runtime import CryptoMode, Network

__all__ = ["FedGRec", "RoundRecord"]

_ID_BYTES = 4


@dataclass(frozen=True)
class RoundRecord:
    """What one round did: mean local loss over users and steps, and who took part."""

    loss: float
    bpr: float
    reg: float
    clients: int
    lost: int  # dropped before uploading: their round's work is not in the model
    recovered: int  # dropped after uploading: secure aggregation recovered their masks


class FedGRec:
    """FedGRec's server and users, simulated in one process.

    Args:
        train: binary user × item training matrix (each user's ``N_u`` stays on its device).
        user0: initial base user embeddings ``e_u^0`` (rows handed to their owners).
        item0: initial base item embeddings ``E^0`` (held by the server).
        settings: Algorithm 1's hyper-parameters.
        seed: run seed (round sampling streams).
        crypto: ``real`` runs the four-stage secure aggregation for real; ``accounted`` adds the
            same fixed-point encodings directly (identical numbers) and counts the same bytes.
        transcripts: keep what the server received (queries) for audits.
        device: where the tables and the round's arithmetic live (``"cuda"`` for the paper-scale
            10^5-round runs); sampling and the ledger stay on the CPU.
        secure_sum: who runs ``real`` secure aggregation (default in-process; the Flower engine
            passes one that runs the client stages on the SuperNodes hosting the users).
    """

    def __init__(
        self,
        train: sp.csr_matrix,
        user0: torch.Tensor,
        item0: torch.Tensor,
        settings: FedGRecSettings,
        *,
        seed: int,
        crypto: CryptoMode = "accounted",
        transcripts: bool = False,
        device: str | torch.device = "cpu",
        secure_sum: SecureSum | None = None,
    ) -> None:
        self.device = torch.device(device)
        self.secure_sum = secure_sum
        csr = sp.csr_matrix(train, dtype=np.float64, copy=True)
        csr.sum_duplicates()
        csr.sort_indices()
        csr.data[:] = 1.0
        self.train = csr
        self.settings = settings
        self.seed = seed
        self.dtype = user0.dtype
        self.n_users, self.n_items = csr.shape
        self.dim = int(user0.shape[1])
        if user0.shape[0] != self.n_users or item0.shape != (self.n_items, self.dim):
            raise ValueError(
                f"tables {tuple(user0.shape)} / {tuple(item0.shape)} do not fit the "
                f"{self.n_users} × {self.n_items} graph"
            )
        self.net = Network(self.n_users, crypto, transcripts)
        self.fp = FixedPoint(settings.frac_bits)
        self.deg_u = np.diff(csr.indptr).astype(np.int64)
        self.warm_up(user0, item0)

    def _t(self, array: np.ndarray) -> torch.Tensor:
        """A numpy array as a tensor on the protocol's device."""
        return torch.from_numpy(np.ascontiguousarray(array)).to(self.device)

    def _aggregate(
        self,
        phase: str,
        upload: SparseUpload,
        label: bytes,
        drop_before: np.ndarray | None = None,
        drop_after: np.ndarray | None = None,
    ) -> AggregateResult:
        """``SecAgg(·)`` of the paper (or, with ``secure_aggregation`` off, uploads in the clear)."""
        if not self.settings.secure_aggregation:
            return plain_aggregate(self.net, phase, upload, drop_before=drop_before)
        return secure_aggregate(
            self.net,
            phase,
            upload,
            threshold=threshold_for(len(upload.clients), self.settings.secagg_threshold),
            fp=self.fp,
            label=label,
            drop_before=drop_before,
            drop_after=drop_after,
            summer=self.secure_sum,
        )

    # ------------------------------------------------------------------ Algorithm 1, lines 2–9
    def _everyone(self) -> np.ndarray:
        return np.flatnonzero(self.deg_u > 0)

    def _item_degrees(self) -> np.ndarray:
        """Eq. 9: ``|N_t| = SecAgg(Y_u)``, then broadcast to every user."""
        users = self._everyone()
        rows = np.repeat(np.arange(self.n_users), self.deg_u)
        pos = self._t(np.searchsorted(users, rows))
        upload = SparseUpload(users, self.n_items)
        upload.add(
            pos, self._t(self.train.indices.astype(np.int64)), torch.ones(len(rows), 1, device=self.device)
        )
        result = self._aggregate("warmup/degrees", upload, b"fedgrec/warmup/degrees")
        degrees = result.total.round().to(torch.int64).cpu().numpy()
        self.net.transmit(
            "warmup/degrees",
            SERVER,
            CLIENT,
            _ID_BYTES * self.n_items,
            count=len(users),
            kind="degrees",
            protected=False,
            receivers=users,
        )
        return degrees

    def warm_up(self, user0: torch.Tensor, item0: torch.Tensor) -> None:
        """Item degrees (Eq. 9) and ``K`` rounds of secure message passing (Eqs. 6–8)."""
        K, N, d = self.settings.K, self.n_items, self.dim
        self.deg_t = self._item_degrees()
        if not np.array_equal(self.deg_t, np.bincount(self.train.indices, minlength=N)):
            raise RuntimeError("secure aggregation returned wrong item degrees")  # cannot happen: exact sum
        self.graph = NormalizedBipartite.from_train(self.train, dtype=self.dtype)
        self.R, self.RT = self.graph.R.to(self.device), self.graph.RT.to(self.device)
        self.norm = self._t(self.graph.values)  # 1/sqrt(|N_t||N_u|) per edge, CSR order, float64
        self.E = torch.zeros((K + 1, N, d), dtype=self.dtype, device=self.device)
        self.U = torch.zeros((K + 1, self.n_users, d), dtype=self.dtype, device=self.device)
        self.E[0] = item0.detach()
        self.U[0] = user0.detach()
        users = self._everyone()
        edge_user_np = np.repeat(np.arange(self.n_users), self.deg_u)
        edge_user = self._t(edge_user_np)
        edge_pos = self._t(np.searchsorted(users, edge_user_np))
        edge_item = self._t(self.train.indices.astype(np.int64))
        for k in range(1, K + 1):
            self.net.transmit(
                "warmup/download",
                SERVER,
                CLIENT,
                N * d * self.E.element_size(),
                count=len(users),
                kind="item-table",
                protected=False,
                receivers=users,
            )
            fresh = spmm(self.R, self.RT, self.E[k - 1])  # Eq. 6, every user its own row
            upload = SparseUpload(users, N * d)
            values = self.norm[:, None] * self.U[k - 1][edge_user].double()  # Eq. 7, row t of Ẽ_u
            upload.add(edge_pos, edge_item * d, values)
            result = self._aggregate("warmup/propagate", upload, f"fedgrec/warmup/{k}".encode())
            self.E[k] = result.total.view(N, d).to(self.dtype)  # Eq. 8
            self.U[k] = fresh

    # ------------------------------------------------------------------ Algorithm 1, lines 10–24
    def sample(self, round_index: int) -> RoundSample:
        """Step 1's draws for a round (deterministic in the run seed)."""
        s = self.settings
        return sample_round(
            self.train,
            round_index,
            seed=self.seed,
            clients_per_round=s.clients_per_round,
            n_negatives=s.n_negatives,
            local_steps=s.local_steps,
            dropout_before=s.dropout_before,
            dropout_after=s.dropout_after,
            batch_mode=s.batch_mode,
        )

    def _query(self, rs: RoundSample) -> None:
        """Step 1: item ids up, embeddings of every order down."""
        n_query = rs.n_queried
        payloads = [rs.queried(i) for i in range(len(rs.clients))] if self.net.transcript.enabled else None
        self.net.transmit(
            "train/query",
            CLIENT,
            SERVER,
            n_query * _ID_BYTES,
            kind="item-ids",
            protected=False,
            payloads=payloads,
            senders=rs.clients,
        )
        row_bytes = (self.settings.K + 1) * self.dim * self.E.element_size()
        self.net.transmit(
            "train/download",
            SERVER,
            CLIENT,
            n_query * row_bytes,
            kind="item-embeddings",
            protected=False,
            receivers=rs.clients,
        )

    def _latents(
        self, rs: RoundSample, seg: torch.Tensor, items: torch.Tensor, w: torch.Tensor
    ) -> list[torch.Tensor]:
        """Step 2 (Eq. 6 for ``k = 1..K`` from the downloaded snapshot): ``ẽ_u^k``, shape ``(S, d)``."""
        out = []
        for k in range(1, self.settings.K + 1):
            rows = w[:, None] * self.E[k - 1][items]
            zeros = torch.zeros((len(rs.clients), self.dim), dtype=self.dtype, device=self.device)
            out.append(zeros.index_add_(0, seg, rows))
        return out

    def train_round(self, round_index: int) -> RoundRecord:
        """One round of Algorithm 1 for the users sampled in ``round_index``."""
        s, K, N, d = self.settings, self.settings.K, self.n_items, self.dim
        rs = self.sample(round_index)
        self._query(rs)
        n_clients = len(rs.clients)
        clients_t = self._t(rs.clients)
        seg_np = rs.pos_seg
        seg = self._t(seg_np)
        pos_items = self._t(rs.pos_items)
        w = (1.0 / np.sqrt(self.deg_t[rs.pos_items] * self.deg_u[rs.clients][seg_np])).astype(np.float64)
        w64 = self._t(w)
        w_t = w64.to(self.dtype)
        lat = self._latents(rs, seg, pos_items, w_t)

        # Rows that get a gradient in some local step: positives and the negatives paired with them,
        # ordered by the step that first touches them, so step i only updates a prefix (Adam leaves a
        # row whose gradient and moments are still zero exactly where it is).
        pair_seg_np = rs.pair_seg
        neg_items = rs.neg_items[rs.pair_neg]  # (τ, Q)
        step_of = np.arange(s.local_steps)[:, None]
        keys = np.concatenate([seg_np * N + rs.pos_items, (pair_seg_np[None, :] * N + neg_items).ravel()])
        first = np.concatenate(
            [np.zeros(len(seg_np), dtype=np.int64), np.broadcast_to(step_of, neg_items.shape).ravel()]
        )
        uniq, inverse = np.unique(keys, return_inverse=True)
        first_touch = np.full(len(uniq), s.local_steps, dtype=np.int64)
        np.minimum.at(first_touch, inverse, first)
        order = np.lexsort((uniq, first_touch))
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        uniq, inverse = uniq[order], rank[inverse]
        n_active = np.searchsorted(first_touch[order], np.arange(s.local_steps), side="right")
        t_seg, t_item = self._t(uniq // N), self._t(uniq % N)
        pos_local = self._t(inverse[: len(seg_np)][rs.pair_pos])
        neg_local = self._t(inverse[len(seg_np) :].reshape(neg_items.shape))
        pair_seg = self._t(pair_seg_np)

        eu0 = self.U[0][clients_t].clone()
        it0_start = self.E[0][t_item].clone()
        it0 = it0_start.clone()
        objective = _LocalObjective(
            s, lat, [self.E[k][t_item] for k in range(1, K + 1)], t_seg, pair_seg, n_clients
        )
        pair_w = (1.0 / self._t(np.diff(rs.pair_ptr)).to(self.dtype))[pair_seg]
        opt_u, opt_t = _Optimizer(eu0, s.lr, s.optimizer), _Optimizer(it0, s.lr, s.optimizer)
        bpr_sum = reg_sum = 0.0
        for step in range(s.local_steps):  # Step 3
            n = int(n_active[step])
            bpr, reg, grad_u, grad_t = objective.gradients(eu0, it0[:n], pos_local, neg_local[step], pair_w)
            opt_u.step(grad_u)
            opt_t.step(grad_t, n)
            bpr_sum += bpr
            reg_sum += reg

        # Step 4: one secure aggregation of [Δ⁰ ; latent deltas 1..K (; query counts)].
        length = (K + 1) * N * d + (N if s.item_agg == "mean_touched" else 0)
        upload = SparseUpload(rs.clients, length)
        with torch.no_grad():
            upload.add(t_seg, t_item * d, (it0 - it0_start).double())  # Eq. 10 rows
            new = [eu0, *lat]
            for k in range(K):  # Eq. 11: order k+1 receives the change of e_u^k through Ŷ_u
                delta = (new[k] - self.U[k][clients_t]).double()
                upload.add(seg, (k + 1) * N * d + pos_items * d, w64[:, None] * delta[seg])
            if s.item_agg == "mean_touched":
                q_seg, q_items = rs.queries()
                upload.add(
                    self._t(q_seg),
                    (K + 1) * N * d + self._t(q_items),
                    torch.ones(len(q_seg), 1, device=self.device),
                )
        result = self._aggregate(
            "train/upload", upload, f"fedgrec/round/{round_index}".encode(), rs.drop_before, rs.drop_after
        )
        self._apply(result.total, len(result.included))
        keep = self._t(np.isin(rs.clients, result.included))
        committed = clients_t[keep]
        with torch.no_grad():  # users commit what they contributed (line 23)
            self.U[0][committed] = eu0[keep]
            for k in range(1, K + 1):
                self.U[k][committed] = lat[k - 1][keep]
        steps = s.local_steps * n_clients
        return RoundRecord(
            loss=(bpr_sum + reg_sum) / steps,
            bpr=bpr_sum / steps,
            reg=reg_sum / steps,
            clients=n_clients,
            lost=len(result.dropped),
            recovered=len(result.unresponsive),
        )

    def _apply(self, total: torch.Tensor, n_included: int) -> None:
        """Eqs. 10–11 on the server."""
        s, K, N, d = self.settings, self.settings.K, self.n_items, self.dim
        item_delta = total[: N * d].view(N, d)
        if s.item_agg == "mean_touched":
            item_delta = item_delta / total[(K + 1) * N * d :].clamp_min(1.0)[:, None]
        elif s.item_agg == "mean_S":
            item_delta = item_delta / max(n_included, 1)
        self.E[0] += (s.server_lr * item_delta).to(self.dtype)
        for k in range(1, K + 1):
            self.E[k] += (s.latent_lr * total[k * N * d : (k + 1) * N * d].view(N, d)).to(self.dtype)

    # ------------------------------------------------------------------ evaluation and state
    def user_latents(self) -> list[torch.Tensor]:
        """``e_u^0 … e_u^K`` for every user: stored base, latents refreshed (Eq. 6) or as stored."""
        if self.settings.eval_latents == "stored":
            return [self.U[k] for k in range(self.settings.K + 1)]
        fresh = [spmm(self.R, self.RT, self.E[k - 1]) for k in range(1, self.settings.K + 1)]
        return [self.U[0], *fresh]

    def final_embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Representations ``ē_u, ē_t`` the score ``⟨ē_u, ē_t⟩`` uses (spec §5.3)."""
        users = self.user_latents()
        if self.settings.aggregation == "concat":
            return torch.cat(users, dim=1), torch.cat(list(self.E), dim=1)
        a = self.settings.layer_weights()
        return (
            sum(a[k] * users[k] for k in range(len(a))),  # type: ignore[return-value]
            sum(a[k] * self.E[k] for k in range(len(a))),
        )

    def state_dict(self) -> dict[str, Any]:
        """Server tables, users' stored embeddings and the ledger."""
        return {"E": self.E.cpu().clone(), "U": self.U.cpu().clone(), "ledger": self.net.ledger.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (the warm-up is re-run deterministically by the constructor)."""
        self.E.copy_(state["E"])
        self.U.copy_(state["U"])
        self.net.ledger.load_state_dict(state["ledger"])
