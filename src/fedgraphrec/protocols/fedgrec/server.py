r"""FedGRec's server program: the item tables, the round's users, and Algorithm 1 driven round by round.

The server holds the item tables ``E^0 … E^K`` (base and latent item embeddings) and nothing of a
user's: it draws each round's users from a public stream, answers their queries, and receives their
updates only as a secure sum.

* :meth:`FedGRecServer.warm_up` — Algorithm 1 lines 2–9. Item degrees by secure aggregation
  (Eq. 9), broadcast once, then ``K`` propagation rounds in which every user downloads the whole
  table ``E^{k-1}`` (hiding which rows it needs), computes ``e_u^k`` (Eq. 6) and uploads
  ``D_u Y_uᵀ (e_u^{k-1})ᵀ`` (Eq. 7) under secure aggregation, which sums to ``E^k`` (Eq. 8).
  Afterwards ``E^k`` and ``e_u^k`` are exactly LightGCN's layer-``k`` embeddings of the initial
  tables (up to the fixed-point resolution of the secure sum).
* :meth:`FedGRecServer.train_round` — lines 10–24. :meth:`~FedGRecServer.step1_query` (sample
  ``S`` users; each queries its positives and ``n_negatives`` random negatives),
  :meth:`~FedGRecServer.step2_3_local` (the queried rows of every order down; each node refreshes
  its users' latents (Eq. 6) and trains them locally, :func:`.local.local_round`),
  :meth:`~FedGRecServer.step4_aggregate` (one secure sum of ``[Δ⁰_u ; latent deltas 1..K]``,
  applied as Eqs. 10–11).

Deviations and decisions (spec §6): server learning rates default to 1 (``latent_lr = 1`` keeps
``E^{k+1} = R̂ᵀ E_U^{k,stored}``); one negative of the same user per positive per local step; a
fresh optimizer per user per round; the degree vector ``|N_t|`` is broadcast once after Eq. 9 (it is
an aggregate), so training-round downloads do not single out a user's positives. The queries still
do, across rounds: see :func:`fedgraphrec.attacks.query_intersection`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from fedgraphrec.protocols.base import ServerProgram, StepStats
from fedgraphrec.protocols.fedgrec.roles import (
    DEGREES,
    ENROLL,
    PREDICT,
    PREDICT_PHASE,
    PROPAGATE,
    QUERY,
    ROUND_DOWNLOAD,
    UPLOAD,
    WARMUP_DOWNLOAD,
    session,
)
from fedgraphrec.protocols.fedgrec.sampling import sample_clients
from fedgraphrec.protocols.fedgrec.settings import FedGRecSettings
from fedgraphrec.protocols.secagg.policy import threshold_for
from fedgraphrec.protocols.secagg.server import SumResult, plain_sum, secure_sum
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part

__all__ = ["FedGRecServer"]


class FedGRecServer(ServerProgram):
    """FedGRec's server (module docstring; built as any :class:`~.base.ServerProgram`)."""

    schedule = "round"
    settings: FedGRecSettings

    def init_state(self) -> None:
        """The item tables ``E^0 … E^K`` (``E^0``: the initial ``item_emb``, public ``init`` stream)."""
        s, item0 = self.settings, self.tables["item_emb"].detach()
        self.device = torch.device(s.device)
        self.dtype = item0.dtype
        self.dim = int(item0.shape[1])
        self.E = torch.zeros((s.K + 1, self.n_items, self.dim), dtype=self.dtype, device=self.device)
        self.E[0] = item0
        self.active = np.zeros(0, dtype=np.int64)
        self.deg_t = np.zeros(self.n_items, dtype=np.int64)

    # ------------------------------------------------------------------ helpers
    def _sum(
        self, phase: str, label: str, users: np.ndarray, length: int, n_sampled: int | None = None
    ) -> SumResult:
        """``SecAgg(·)`` of the paper over ``users`` (or, with ``secure_aggregation`` off, in the clear).

        ``n_sampled``: the users the threshold is taken over (default ``len(users)``); users of nodes
        lost earlier in the round count as dropped.
        """
        participants = self.by_node(users)
        n = len(users) if n_sampled is None else n_sampled
        if not self.settings.secure_aggregation:
            return plain_sum(
                self.transport, phase=phase, session=label, participants=participants, length=length,
                device=self.device,
            )  # fmt: skip
        return secure_sum(
            self.transport, phase=phase, session=label, participants=participants, length=length,
            threshold=threshold_for(n, self.settings.secagg_threshold),
            frac_bits=self.settings.frac_bits, device=self.device,
        )  # fmt: skip

    def _to_users(self, phase: str, kind: str, value: Any, users: np.ndarray, size: int) -> dict[int, Part]:
        """A copy of ``value`` for each user in ``users``, one part per node, each booked at ``size``."""
        return {
            node: Part(phase, kind, "server", "client", value, shape="broadcast", receivers=ids).with_sizes(
                np.full(len(ids), size, dtype=np.int64)
            )
            for node, ids in self.by_node(users).items()
        }

    # ------------------------------------------------------------------ Algorithm 1, lines 2–9
    def setup(self) -> None:
        """Enrolment, then the warm-up."""
        replies = self.transport.round(ENROLL, {n: Message() for n in self.nodes})
        self.active = np.sort(np.concatenate([np.asarray(r.fields["active"], dtype=np.int64) for r in
                                              replies.values()] or [np.zeros(0, np.int64)]))  # fmt: skip
        self.warm_up()

    def warm_up(self) -> None:
        """Item degrees (Eq. 9) and ``K`` rounds of secure message passing (Eqs. 6–8)."""
        N, d, users = self.n_items, self.dim, self.active
        degrees = self._sum(DEGREES, session("warmup/degrees"), users, N)  # Eq. 9: |N_t| = SecAgg(Y_u)
        self.deg_t = degrees.total.round().to(torch.int64).cpu().numpy()
        deg = self.deg_t.astype(np.int32)
        parts = self._to_users(DEGREES, "degrees", deg, users, deg.nbytes)
        self.transport.round(DEGREES, {n: Message({"degrees": p}) for n, p in parts.items()})
        for k in range(1, self.settings.K + 1):
            size = N * d * self.E.element_size()
            parts = self._to_users(WARMUP_DOWNLOAD, "item-table", self.E[k - 1], users, size)
            requests = {n: Message({"items": p}, {"k": k}) for n, p in parts.items()}
            self.transport.round(WARMUP_DOWNLOAD, requests)
            result = self._sum(PROPAGATE, session("warmup", k), users, N * d)  # Eq. 7 uploads
            self.E[k] = result.total.view(N, d).to(self.dtype)  # Eq. 8

    # ------------------------------------------------------------------ Algorithm 1, lines 10–24
    def train_round(self, round_index: int) -> StepStats:
        """One round of Algorithm 1 for the users sampled in ``round_index``."""
        self.transport.begin_step(round_index)
        s = self.settings
        clients = sample_clients(self.active, round_index, seed=s.seed, clients_per_round=s.clients_per_round)
        queries = self.step1_query(round_index, clients)
        bpr_sum, reg_sum, trained = self.step2_3_local(queries)
        result = self.step4_aggregate(round_index, trained, len(clients))
        steps = s.local_steps * len(clients)
        return StepStats(
            loss=(bpr_sum + reg_sum) / steps,
            bpr=bpr_sum / steps,
            reg=reg_sum / steps,
            clients=len(clients),
            clients_lost=len(clients) - len(result.included),
            clients_recovered=len(result.unresponsive),
        )

    def step1_query(self, round_index: int, clients: np.ndarray) -> dict[int, Part]:
        """Step 1: the sampled users (public) to their nodes; each user's query up (item ids)."""
        requests = {
            node: Message(fields={"round": round_index, "clients": ids.tolist(), "sampled": clients.tolist()})
            for node, ids in self.by_node(clients).items()
        }
        replies = self.transport.round(QUERY, requests, allow_loss=True)  # a lost node's users drop out
        return {node: reply["query"] for node, reply in replies.items()}

    def step2_3_local(self, queries: Mapping[int, Part]) -> tuple[float, float, np.ndarray]:
        """Steps 2–3: each query's rows of every order down; the nodes train.

        Returns the local loss sums and the users whose nodes answered (who can upload).
        """
        row_bytes = (self.settings.K + 1) * self.dim * self.E.element_size()
        requests = {}
        for node, query in queries.items():
            union = np.unique(np.asarray(query.value))
            full = len(union) == self.n_items  # the whole table: no gather
            rows = self.E if full else self.E[:, torch.from_numpy(union).to(self.device)]
            assert query.counts is not None and query.senders is not None
            part = Part(ROUND_DOWNLOAD, "item-embeddings", "server", "client", rows, shape="broadcast",
                        receivers=query.senders).with_sizes(query.counts * row_bytes)  # fmt: skip
            requests[node] = Message({"rows": part}, {"full": full})
        replies = self.transport.round(ROUND_DOWNLOAD, requests, allow_loss=True)
        bpr = sum(float(r.fields["bpr"]) for r in replies.values())
        reg = sum(float(r.fields["reg"]) for r in replies.values())
        trained = [np.asarray(queries[n].senders, dtype=np.int64) for n in replies]
        return bpr, reg, np.sort(np.concatenate(trained or [np.zeros(0, dtype=np.int64)]))

    def step4_aggregate(self, round_index: int, clients: np.ndarray, n_sampled: int) -> SumResult:
        """Step 4: one secure sum of every user's ``[Δ⁰ ; latent deltas (; query counts)]``; Eqs. 10–11.

        ``t`` is taken over the ``n_sampled`` users of the round; ``clients`` are those still online.
        """
        K, N, d = self.settings.K, self.n_items, self.dim
        length = (K + 1) * N * d + (N if self.settings.item_agg == "mean_touched" else 0)
        result = self._sum(UPLOAD, session("round", round_index), clients, length, n_sampled)
        self._apply(result.total, len(result.included))
        return result

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
    def predict(self) -> None:
        """The tables down once per node (latent refresh); every node combines its users' ``ē_u``."""
        request = Message()
        if self.settings.eval_latents == "refresh" and self.settings.K:  # K = 0: no latent to refresh
            tables = Part(PREDICT_PHASE, "item-table", "server", "client", self.E, shape="broadcast")
            request.add("items", tables)
        live = [n for n in self.nodes if n not in self.transport.lost]
        self.transport.round(PREDICT, dict.fromkeys(live, request), allow_loss=True)

    def items_for_evaluation(self) -> torch.Tensor:
        """``ē_t`` (spec §5.3): the layer combination of the item tables."""
        if self.settings.aggregation == "concat":
            return torch.cat(list(self.E), dim=1)
        a = self.settings.layer_weights()
        return sum(a[k] * self.E[k] for k in range(len(a)))  # type: ignore[return-value]

    def owned_rows(self) -> dict[str, tuple[np.ndarray, torch.Tensor]]:
        """The base item embeddings ``E^0`` (the oracle's ``item_emb``)."""
        return {"item_emb": (np.arange(self.n_items), self.E[0])}

    def state_dict(self) -> dict[str, Any]:
        """The item tables (the warm-up is re-run deterministically at set-up)."""
        return {"E": self.E.cpu().clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.E.copy_(state["E"])
