"""FedNCF's server program: the item tables and the weights; it learns only secure sums of the updates."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from fedgraphrec.protocols.base import StepStats
from fedgraphrec.protocols.baselines.fedncf import roles as R
from fedgraphrec.protocols.baselines.fedncf.expect import session
from fedgraphrec.protocols.baselines.fedncf.local import weights_of
from fedgraphrec.protocols.baselines.fedncf.settings import FedNCFSettings
from fedgraphrec.protocols.baselines.shard_sampling import RoundSampledServer
from fedgraphrec.protocols.secagg.policy import threshold_for
from fedgraphrec.protocols.secagg.server import secure_sum
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part

__all__ = ["FedNCFServer"]


class FedNCFServer(RoundSampledServer):
    """The server role; one communication round per epoch (stages in :mod:`.roles`)."""

    settings: FedNCFSettings

    def init_state(self) -> None:
        """The item tables and weights, from the initial tables (:class:`~fedgraphrec.models.NCF`'s names)."""
        self.item_gmf = self.own_table("item_gmf")
        self.item_mlp = self.own_table("item_mlp")
        self.weights = [w.detach().clone() for w in weights_of(self.tables)]
        super().init_state()

    def setup(self) -> None:
        """Who has items (may be sampled)."""
        self.transport.begin_step(0)
        self.enrol(self.transport.round(R.ST_SETUP, {n: Message() for n in self.nodes}))

    def _flat_weights(self) -> list[float]:
        return torch.cat([w.reshape(-1) for w in self.weights]).tolist()

    def next_step(self) -> None:
        """Open the next protocol step: every round and every evaluation has a step of its own.

        A node runs each stage at most once per step (:mod:`.expect`); the round's own index
        travels in the request (the node checks it is new).
        """
        self.transport.begin_step(self.transport.net.step + 1)

    def evaluate(self, ks: list[int]) -> dict[str, dict[str, float]]:
        """Federated evaluation (:meth:`ServerProgram.evaluate`) in a step of its own."""
        self.next_step()
        return super().evaluate(ks)

    def train_round(self, round_index: int) -> StepStats:
        """Queries, rows and weights down, local steps, then the secure sum of the deltas."""
        s = self.settings
        self.next_step()
        clients = self.sample_clients(round_index)
        by_node = self.by_node(clients)
        fields = {R.F_ROUND: round_index}
        queries = self.transport.round(
            R.ST_QUERY, {n: Message(fields={**fields, R.F_CLIENTS: u.tolist()}) for n, u in by_node.items()}
        )
        N, d = self.item_gmf.shape
        n_weights = sum(w.numel() for w in self.weights)
        size = self.item_gmf.element_size()
        weights = self._flat_weights()  # public; each client's download is booked with them
        requests = {}
        for node, reply in queries.items():
            q = reply[R.P_QUERY]
            assert q.counts is not None and q.senders is not None
            at = torch.as_tensor(q.value)
            rows = torch.cat([self.item_gmf[at], self.item_mlp[at]], dim=1)
            part = Part(
                R.PH_DOWNLOAD, R.K_DOWNLOAD, R.SERVER, R.CLIENT, rows, receivers=q.senders, counts=q.counts
            )
            part = part.with_sizes((2 * q.counts * d + n_weights) * size)
            requests[node] = Message({R.P_DOWNLOAD: part}, fields={**fields, R.F_WEIGHTS: weights})
        replies = self.transport.round(R.ST_LOCAL, requests)
        loss = sum(float(r.fields[R.F_LOSS]) for r in replies.values())
        result = secure_sum(
            self.transport, phase=R.PH_UPLOAD, session=session(round_index), participants=by_node,
            length=2 * N * d + n_weights + N, threshold=threshold_for(len(clients), s.secagg_threshold),
            frac_bits=s.frac_bits,
        )  # fmt: skip
        self._apply(result.total, len(result.included), n_weights)
        mean = loss / (len(clients) * s.local_steps)
        return StepStats(mean, mean, 0.0, clients=len(result.included))

    @torch.no_grad()
    def _apply(self, total: torch.Tensor, n_included: int, n_weights: int) -> None:
        """Item rows move by their mean over the users that queried them; weights by the FedAvg mean."""
        N, d = self.item_gmf.shape
        counts = total[2 * N * d + n_weights :].clamp_min(1.0)[:, None]
        self.item_gmf.add_((total[: N * d].view(N, d) / counts).to(self.item_gmf.dtype))
        self.item_mlp.add_((total[N * d : 2 * N * d].view(N, d) / counts).to(self.item_mlp.dtype))
        offset = 2 * N * d
        for w in self.weights:
            w.add_((total[offset : offset + w.numel()].view(w.shape) / max(n_included, 1)).to(w.dtype))
            offset += w.numel()

    def evaluation_parts(self) -> dict[str, Part]:
        """The item tables and the weights: each user scores every item through NeuMF on its node."""
        items = torch.cat([self.item_gmf, self.item_mlp], dim=1)
        flat = torch.cat([w.reshape(-1) for w in self.weights])
        return {
            R.P_ITEMS: Part("evaluate/items", "item_embedding", R.SERVER, R.CLIENT, items, shape="broadcast"),
            R.P_WEIGHTS: Part("evaluate/weights", "weights", R.SERVER, R.CLIENT, flat, shape="broadcast"),
        }

    def owned_rows(self) -> dict[str, tuple[np.ndarray, torch.Tensor]]:
        """The item tables."""
        ids = np.arange(self.item_gmf.shape[0])
        return {"item_gmf": (ids, self.item_gmf), "item_mlp": (ids, self.item_mlp)}

    def state_dict(self) -> dict[str, Any]:
        """The item tables and the weights."""
        return {"item_gmf": self.item_gmf.clone(), "item_mlp": self.item_mlp.clone(),
                "weights": [w.clone() for w in self.weights]}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.item_gmf.copy_(state["item_gmf"])
        self.item_mlp.copy_(state["item_mlp"])
        for w, saved in zip(self.weights, state["weights"], strict=True):
            w.copy_(saved)
