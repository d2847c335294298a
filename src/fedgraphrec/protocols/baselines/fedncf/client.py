"""FedNCF's client program: a shard of users, each keeping its GMF and MLP rows on its device."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.secagg.wire import ID_BYTES
from fedgraphrec.protocols.base import ClientProgram
from fedgraphrec.protocols.baselines.fedncf import expect as E
from fedgraphrec.protocols.baselines.fedncf import roles as R
from fedgraphrec.protocols.baselines.fedncf.local import LocalDeltas, local_train, neumf_scores
from fedgraphrec.protocols.baselines.fedncf.settings import FedNCFSettings
from fedgraphrec.protocols.baselines.fedpergnn.expect import check_download, sampled_users
from fedgraphrec.protocols.baselines.shard_sampling import ShardRound, sample_shard
from fedgraphrec.protocols.secagg.client import SecAggState
from fedgraphrec.protocols.secagg.expect import CheckedSecureSumClient, SumSite
from fedgraphrec.protocols.secagg.upload import SparseUpload
from fedgraphrec.runtime.expect import Expectation, StageFlow
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part

__all__ = ["FedNCFClient", "FedNCFState"]


@dataclass
class FedNCFState:
    """A node's state between messages.

    Attributes:
        user_gmf / user_mlp: the shard's user rows ``(n, d)``.
        round: the current round's sample (``train/query`` to ``train/local``).
        deltas: the sampled users' updates (``train/local`` to the secure sum).
        secagg: the open secure-aggregation session.
        last_round: the last round the node trained (a round is never run twice; ``-1``: none).
    """

    user_gmf: torch.Tensor
    user_mlp: torch.Tensor
    round: ShardRound | None = None
    deltas: LocalDeltas | None = None
    secagg: SecAggState = field(default_factory=SecAggState)
    last_round: int = -1


class FedNCFClient(CheckedSecureSumClient, ClientProgram[FedNCFState]):
    """The client role for a shard of users (the package docstring describes a round)."""

    settings: FedNCFSettings

    def init_state(self) -> None:
        """The shard's training rows and its users' initial GMF and MLP rows (its own only)."""
        self.rows = self.own_train("a FedNCF node needs its users' interactions and initial embeddings")
        self.n_items = int(self.rows.shape[1])
        self.state = FedNCFState(self.initial_rows("user_gmf"), self.initial_rows("user_mlp"))

    # ------------------------------------------------------------------ what the node accepts
    def stage_flow(self) -> StageFlow:
        """The node's stage order (:func:`.expect.stage_flow`)."""
        return E.stage_flow()

    def expect(self, stage: str) -> Expectation:
        """The parts the node expects in ``stage`` (:func:`.expect.expectation`)."""
        sums = self.secagg_expect(stage) if stage.startswith("secagg/") else None
        return E.expectation(stage, self.state.user_gmf, sums)

    def secagg_site(self, stage: str, step: int | None = None) -> SumSite:
        """The round's secure sum of this node's deltas (:func:`.expect.sum_site`)."""
        s, st = self.settings, self.state
        n_weights = E.weights_length(s.weight_shapes())
        length = 2 * self.n_items * s.dim + n_weights + self.n_items
        return E.sum_site(stage, self.occurrence, st.round, st.deltas is not None, length, s.frac_bits)

    def _unflatten(self, flat: torch.Tensor) -> list[torch.Tensor]:
        """The shared weights from their flat list (which must have exactly their length)."""
        want = E.weights_length(self.settings.weight_shapes())
        if flat.numel() != want:
            raise IntegrityError(f"fedncf: {flat.numel()} shared weights; this node's model has {want}")
        out, offset = [], 0
        for shape in self.settings.weight_shapes():
            n = int(np.prod(shape))
            out.append(flat[offset : offset + n].reshape(shape))
            offset += n
        return out

    def stage_setup(self, step: int, request: Message) -> Message:
        """Name the users with at least one item."""
        return Message(fields={R.F_ACTIVE: self.clients[np.diff(self.rows.indptr) > 0].tolist()})

    def stage_train_query(self, step: int, request: Message) -> Message:
        """Draw negatives and local pairs; ask for the rows of the queried items."""
        s = self.settings
        ids, round_index = sampled_users(request, self.rows, self.clients, self.state.last_round)
        sr = sample_shard(
            self.rows, self.positions(ids), ids, round_index,
            protocol="fedncf", seed=s.seed, n_negatives=s.n_negatives, local_steps=s.local_steps,
            secure=s.secure_cover,
        )  # fmt: skip
        self.state.round, self.state.last_round = sr, round_index
        seg, items = sr.queries()
        counts = np.bincount(seg, minlength=len(ids)).astype(np.int64)
        part = Part(R.PH_QUERY, R.K_QUERY, R.CLIENT, R.SERVER, items, senders=ids, counts=counts)
        return Message({R.P_QUERY: part.with_sizes(counts * ID_BYTES)})

    def stage_train_local(self, step: int, request: Message) -> Message:
        """``τ`` local steps; the users keep their rows, the deltas wait for the secure sum."""
        s, sr = self.settings, self.state.round
        if sr is None:
            raise IntegrityError("train/local before train/query")
        download = request[R.P_DOWNLOAD]
        seg, _ = sr.queries()
        check_download(download, sr.clients, np.bincount(seg, minlength=len(sr.clients)))
        rows = torch.as_tensor(download.value)
        weights = self._unflatten(torch.tensor(request.fields[R.F_WEIGHTS], dtype=rows.dtype))
        pos = torch.from_numpy(self.positions(sr.clients))
        st = self.state
        res = local_train(
            sr, (st.user_gmf[pos], st.user_mlp[pos]), rows, weights, n_items=self.n_items, lr=s.lr,
            reg=s.reg, local_steps=s.local_steps,
        )  # fmt: skip
        with torch.no_grad():  # users keep their own embeddings
            st.user_gmf[pos] = res.user_gmf
            st.user_mlp[pos] = res.user_mlp
        st.deltas = res
        return Message(fields={R.F_LOSS: res.loss_sum})

    # ------------------------------------------------------------------ secure sum hooks
    def secagg_input(self, session: str) -> SparseUpload:
        """Item-row deltas, weight deltas and a count of 1 per queried item, per sampled user."""
        sr, res = self.state.round, self.state.deltas
        if sr is None or res is None:
            raise ValueError(f"{session}: no local update to aggregate")
        N, d = self.n_items, self.settings.dim
        n_weights = int(res.d_weights.shape[1])
        S = len(sr.clients)
        upload = SparseUpload(sr.clients, 2 * N * d + n_weights + N)
        t_seg, t_item = torch.from_numpy(res.t_seg), torch.from_numpy(res.t_item)
        upload.add(t_seg, t_item * d, res.d_gmf)
        upload.add(t_seg, N * d + t_item * d, res.d_mlp)
        upload.add(torch.arange(S), torch.full((S,), 2 * N * d), res.d_weights)
        q_seg, q_items = sr.queries()
        upload.add(
            torch.from_numpy(q_seg),
            torch.from_numpy(2 * N * d + n_weights + q_items),
            torch.ones(len(q_seg), 1),
        )
        return upload

    def secagg_included(self, session: str, included: np.ndarray) -> None:
        """The round is over for this node."""
        self.state.round, self.state.deltas = None, None

    # ------------------------------------------------------------------ evaluation
    def scorer(self, request: Message) -> Callable[[torch.Tensor], torch.Tensor]:
        """NeuMF scores of the shard's users from their own rows and the server's items and weights."""
        items = torch.as_tensor(request[R.P_ITEMS].value)
        weights = self._unflatten(torch.as_tensor(request[R.P_WEIGHTS].value))
        d = items.shape[1] // 2
        st = self.state

        def score(rows: torch.Tensor) -> torch.Tensor:
            return neumf_scores(
                st.user_gmf[rows], st.user_mlp[rows], items[:, :d], items[:, d:], weights
            ).float()

        return score

    def owned_rows(self) -> dict[str, tuple[np.ndarray, torch.Tensor]]:
        """The users' rows."""
        return {
            "user_gmf": (self.clients, self.state.user_gmf),
            "user_mlp": (self.clients, self.state.user_mlp),
        }
