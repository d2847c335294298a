"""FedPerGNN's server program (it also hosts the third party, a separate object it never reads).

The server holds the item table and averages each item's uploaded updates; the third party
(:class:`~.third_party.ThirdParty`) holds the token graph and the users' last embeddings. One round
(:meth:`FedPerGNNServer.train_round`) is two stages: ``train/query`` then ``train/local``
(``roles.py`` lists every stage).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from fedgraphrec.protocols.base import StepStats
from fedgraphrec.protocols.baselines.fedpergnn import roles as R
from fedgraphrec.protocols.baselines.fedpergnn.keys import agree_token_key
from fedgraphrec.protocols.baselines.fedpergnn.settings import FedPerGNNSettings
from fedgraphrec.protocols.baselines.fedpergnn.third_party import ThirdParty
from fedgraphrec.protocols.baselines.shard_sampling import RoundSampledServer
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part

__all__ = ["FedPerGNNServer"]


class FedPerGNNServer(RoundSampledServer):
    """The server role (module docstring); one communication round per epoch."""

    settings: FedPerGNNSettings

    def init_state(self) -> None:
        """The item table (from ``item_emb``, the server's own) and the third party."""
        self.item = self.own_table("item_emb")
        self.third_party = ThirdParty(self.n_clients)
        super().init_state()

    def setup(self) -> None:
        """Token key (when expanding), then every user's tokens and embedding to the third party."""
        self.transport.begin_step(0)
        if self.settings.local_graph:
            agree_token_key(self.transport, self.shards)
        replies = self.transport.round(R.ST_EXPAND, {n: Message() for n in self.nodes})
        self.enrol(replies)
        if self.settings.local_graph:
            self.third_party.receive_expand(Part.concat([replies[n][R.P_EXPAND] for n in self.nodes]))

    def next_step(self) -> None:
        """Open the next protocol step: every round and every prediction has a step of its own.

        A node runs each stage at most once per step (:mod:`.expect`), so a prediction never
        shares a step with a round, nor two predictions one step; the round's own index travels
        in the request (the node checks it is new).
        """
        self.transport.begin_step(self.transport.net.step + 1)

    def train_round(self, round_index: int) -> StepStats:
        """One round: neighbours and queries, then rows down, local steps, uploads and refreshes up."""
        s = self.settings
        self.next_step()
        clients = self.sample_clients(round_index)
        sampled = self.by_node(clients)
        requests = {}
        for node, users in sampled.items():
            msg = Message(fields={R.F_ROUND: round_index, R.F_CLIENTS: users.tolist()})
            if s.local_graph:
                msg.add(R.P_NEIGHBOURS, self.third_party.neighbours(users, R.PH_NEIGHBOURS, lists=True))
            requests[node] = msg
        queries = self.transport.round(R.ST_QUERY, requests)
        d, size = self.item.shape[1], self.item.element_size()
        downloads = {}
        for node, reply in queries.items():
            q = reply[R.P_QUERY]
            assert q.counts is not None and q.senders is not None
            rows = self.item[torch.as_tensor(q.value)]
            part = Part(
                R.PH_DOWNLOAD, R.K_DOWNLOAD, R.SERVER, R.CLIENT, rows, receivers=q.senders, counts=q.counts
            )
            downloads[node] = Message({R.P_DOWNLOAD: part.with_sizes(q.counts * d * size)})
        replies = self.transport.round(R.ST_LOCAL, downloads)
        upload = Part.concat([replies[n][R.P_UPLOAD] for n in sorted(replies)])
        self._aggregate(upload)
        if s.local_graph:
            self.third_party.refresh(Part.concat([replies[n][R.P_REFRESH] for n in sorted(replies)]))
        loss = sum(float(r.fields[R.F_LOSS]) for r in replies.values()) / (len(clients) * s.local_steps)
        return StepStats(loss, loss, 0.0, clients=len(clients))

    def _aggregate(self, upload: Part) -> None:
        """Each item moves by the mean of the rows uploaded for it (summed in client order).

        The upload's rows are ``(flat index, value)``: ``N·d`` item coordinates, then ``N`` counts.
        """
        assert upload.senders is not None and upload.counts is not None
        N, d = self.item.shape
        order = torch.from_numpy(np.argsort(np.repeat(upload.senders, upload.counts), kind="stable"))
        rows = torch.as_tensor(upload.value)[order]
        total = torch.zeros(N * d + N, dtype=torch.float64).index_add_(0, rows[:, 0].long(), rows[:, 1])
        with torch.no_grad():
            self.item += (total[: N * d].view(N, d) / total[N * d :].clamp_min(1.0)[:, None]).to(
                self.item.dtype
            )

    def predict(self) -> None:
        """Every user gets its neighbours (third party) and the item table (server): its ``h_u``.

        Evaluation traffic (phases ``predict/...``): the third party sends each user's per-item
        neighbour means as they are (not the lists a round books), the server one copy of the item
        table per node.
        """
        if not self.settings.local_graph:
            return
        self.next_step()  # evaluation follows in this step, once
        requests = {}
        for node, users in self.shards.items():
            items = Part(R.PH_PREDICT_ITEMS, R.K_ITEMS, R.SERVER, R.CLIENT, self.item, shape="broadcast")
            requests[node] = Message(
                {
                    R.P_NEIGHBOURS: self.third_party.neighbours(users, R.PH_PREDICT_NEIGHBOURS, lists=False),
                    R.P_ITEMS: items,
                }
            )
        self.transport.round(R.ST_PREDICT, requests)

    def evaluate(self, ks: list[int]) -> dict[str, dict[str, float]]:
        """Federated evaluation; without local graphs in a step of its own (there is no prediction)."""
        if not self.settings.local_graph:
            self.next_step()
        return super().evaluate(ks)

    def items_for_evaluation(self) -> torch.Tensor:
        """The server's item table."""
        return self.item.clone()

    def owned_rows(self) -> dict[str, tuple[np.ndarray, torch.Tensor]]:
        """The item table."""
        return {"item_emb": (np.arange(self.item.shape[0]), self.item)}

    def state_dict(self) -> dict[str, Any]:
        """The server's items and the third party's copies of the users' embeddings."""
        return {"item": self.item.clone(), "stale": self.third_party.stale.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.item.copy_(state["item"])
        self.third_party.stale.copy_(state["stale"])
