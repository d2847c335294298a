"""GNN4FR's server role: relays sealed rows and routes them by the ciphertext graph.

What the server holds: public keys and wrapped keys (never S), every client's item *tokens* (the
ciphertext graph of Algorithm 3: which pseudonymous client holds which token, plus the tokens of the
items nobody holds, which the key-client keeps), and the ciphertexts it forwards. It holds no
embedding row and no gradient. Every stage is one
:meth:`~fedgraphrec.runtime.transport.Transport.round` (:class:`~.roles.Stage`); the client side is
:mod:`.client`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from fedgraphrec.protocols.base import StepStats
from fedgraphrec.protocols.gnn4fr.roles import (
    CLIENT,
    SERVER,
    Phase,
    Stage,
    token_ints,
)
from fedgraphrec.protocols.gnn4fr.server_setup import SetupServer
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part
from fedgraphrec.seeding import numpy_rng

__all__ = ["GNN4FRServer"]


class GNN4FRServer(SetupServer):
    """The relaying server (module docstring): the rounds of a minibatch and of a prediction."""

    # ------------------------------------------------------------------ one minibatch
    def _forward(self, replies: dict[int, Message], prefix: str) -> dict[int, Message]:
        for layer in range(self.settings.n_layers):
            part = self._concat(replies, "rows")
            assert part is not None
            replies = self._all(
                Stage.FORWARD,
                {"layer": layer, "prefix": prefix},
                self._relay(part, self._multicast_plan(part)),
            )
        return replies

    def train_step(self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> StepStats:
        """One minibatch: forward, negatives, loss, backward (transposed or paper-literal), Adam."""
        s, L = self.settings, self.settings.n_layers
        self.transport.begin_step(self.step)
        u, p, q = users.numpy(), pos.numpy(), neg.numpy()
        node = self.node_of[u]
        batches = {
            n: Message(
                fields={
                    "users": u[node == n].tolist(),
                    "pos": p[node == n].tolist(),
                    "neg": q[node == n].tolist(),
                    "batch": len(u),
                }
            )
            for n in self.nodes
        }
        replies = self._forward(self.transport.round(Stage.BEGIN, batches), "forward")
        replies = self._negatives(replies)
        bpr = sum(float(r.fields["bpr"]) for r in replies.values())
        reg = sum(float(r.fields["reg"]) for r in replies.values())
        grads = self._concat(replies, "grads")
        if s.paper_literal:
            replies = self._all(
                Stage.GRADIENTS,
                parts={
                    n: {"grads": grads.forward(pk, rc, CLIENT)}
                    for n, (pk, rc) in self._by_seal_to(grads).items()
                }
                if grads is not None
                else {},
            )
            for layer in range(L, 0, -1):
                part = self._concat(replies, "rows")
                replies = self._all(
                    Stage.BACKWARD, {"layer": layer}, self._relay(part, self._by_seal_to(part))
                )
            self._aggregate(replies)
        else:
            tokens = self._concat(replies, "tokens")
            replies = self.transport.round(Stage.GRADIENTS, self._route_gradients(grads, tokens))
            for layer in range(L, 0, -1):
                part = self._concat(replies, "rows")
                assert part is not None
                replies = self._all(
                    Stage.BACKWARD, {"layer": layer}, self._relay(part, self._multicast_plan(part))
                )
        self.step += 1
        return StepStats(loss=bpr + s.reg * reg, bpr=bpr, reg=reg, clients=len(np.unique(u)))

    def _negatives(self, replies: dict[int, Message]) -> dict[int, Message]:
        """Negatives' embeddings of all layers from their designated holder (the lowest id)."""
        req = self._concat(replies, "requests")
        handles = token_ints(list(req.value)) if req is not None else np.zeros(0, np.int64)
        requester = req.senders if req is not None and req.senders is not None else np.zeros(0, np.int64)
        holder = self.route.indices[self.route.indptr[self._cols_of(handles)]].astype(np.int64)
        serve = {
            n: Message(
                fields={
                    "holders": holder[sel].tolist(),
                    "requesters": requester[sel].tolist(),
                    "tokens": handles[sel].tolist(),
                }
            )
            for n in self.nodes
            for sel in [np.flatnonzero(self.node_of[holder] == n)]
        }
        emb = self._concat(self.transport.round(Stage.NEGATIVES, serve), "embeddings")
        assert emb is not None
        parts = {
            n: {"embeddings": emb.forward(pick, recv, CLIENT)}
            for n, (pick, recv) in self._by_seal_to(emb).items()
        }
        return self._all(Stage.LOSS, parts=parts)

    def _route_gradients(self, grads: Part | None, tokens: Part | None) -> dict[int, Message]:
        """Each direct item gradient to every holder of its item but the sender (its token alongside)."""
        if grads is None or tokens is None or grads.senders is None:
            raise RuntimeError(f"{Phase.ITEM_GRADIENTS}: a node sent no direct gradients part")
        handles = token_ints(list(tokens.value))
        cols = self._cols_of(handles)
        counts = np.diff(self.route.indptr)[cols]
        msg = np.repeat(np.arange(len(cols)), counts)
        start = np.repeat(self.route.indptr[cols], counts)
        recv = self.route.indices[
            start + np.arange(len(msg)) - np.repeat(np.cumsum(counts) - counts, counts)
        ].astype(np.int64)
        keep = (recv != grads.senders[msg]) | np.isin(cols[msg], self.custody)  # the custodian gets its own
        msg, recv = msg[keep], recv[keep]
        order = np.lexsort((msg, recv))
        msg, recv = msg[order], recv[order]
        node = self.node_of[recv]
        return {
            n: Message(
                {"grads": grads.forward(msg[node == n], recv[node == n], CLIENT)},
                {"tokens": handles[msg[node == n]].tolist()},
            )
            for n in self.nodes
        }

    def _aggregate(self, replies: dict[int, Message]) -> None:
        """Paper-literal: shares to the ring successors, uploads summed, the dense sum to everybody."""
        shares = self._concat(replies, "shares")
        assert shares is not None
        parts = {
            n: {"shares": shares.forward(pk, rc, CLIENT)} for n, (pk, rc) in self._by_seal_to(shares).items()
        }
        ups = self._concat(self._all(Stage.UPLOAD, parts=parts), "uploads")
        assert ups is not None
        total = np.sum(np.asarray(ups.value, dtype=np.uint64), axis=0, dtype=np.uint64)
        size = int(total.size) * 8
        out = {
            n: {
                "sum": Part(
                    Phase.SUM, "item_gradient", SERVER, CLIENT, total, shape="broadcast", receivers=ids
                ).with_sizes(np.full(len(ids), size))
            }
            for n, ids in self.shards.items()
        }
        self._all(Stage.UPDATE, parts=out)

    # ------------------------------------------------------------------ prediction (Algorithm 6)
    def predict(self) -> None:
        """A forward pass; one random holder per item uploads it; every client gets what it lacks.

        A prediction is a cycle of its own, at a step of its own (nodes refuse a stage run twice in
        a step): the next minibatch runs at the next step.
        """
        self.transport.begin_step(self.step)
        self._forward(self._all(Stage.BEGIN, {"prefix": "predict/forward"}), "predict/forward")
        rng = numpy_rng(self.settings.seed, "gnn4fr", "predict", self.step)
        deg = np.diff(self.route.indptr)
        pick = self.route.indices[
            self.route.indptr[:-1] + (rng.random(len(deg)) * deg).astype(np.int64)
        ].astype(np.int64)
        cols = np.arange(len(deg))
        node = self.node_of[pick]
        asks = {
            n: Message(
                fields={
                    "holders": pick[node == n].tolist(),
                    "tokens": self.col_handles[cols[node == n]].tolist(),
                }
            )
            for n in self.nodes
        }
        items = self._concat(self.transport.round(Stage.PREDICT_ITEMS, asks), "items")
        assert items is not None
        pos = np.empty(len(cols), dtype=np.int64)
        pos[np.concatenate([cols[node == n] for n in self.nodes])] = np.arange(len(cols))
        parts: dict[int, dict[str, Part]] = {}
        for n, ids in self.shards.items():
            lack = [
                np.setdiff1d(cols, self.holding.indices[self.holding.indptr[u] : self.holding.indptr[u + 1]])
                for u in ids.tolist()
            ]
            recv = np.repeat(ids, [len(x) for x in lack])
            pick = pos[np.concatenate(lack)] if lack else np.zeros(0, np.int64)
            parts[n] = {"items": items.forward(pick, recv, CLIENT)}
        self._all(Stage.PREDICT_DELIVER, parts=parts)
        self.step += 1

    def state_dict(self) -> dict[str, Any]:
        """The step counter and what the server learnt at set-up (it holds no parameter).

        The set-up's routing (token handles, holdings, neighbour pairs) is keyed by the clients' group
        key, which a resumed run restores from the checkpoint: the server's routing must be restored
        with it, not re-learnt from the resumed process's fresh set-up.
        """
        return {k: v for k, v in vars(self).items() if k not in ("transport", "settings", "tables")}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        vars(self).update(state)
        self.step = int(state["step"])
