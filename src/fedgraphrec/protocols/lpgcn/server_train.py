r"""The LP-GCN server's training and prediction rounds: routing, synchronisation, what it owns.

Per minibatch (Algorithm 1 body; Algorithm 7 for LightGCN+), ``2L + 3`` rounds (``2L + 4`` with
LightGCN+'s update): layer 0, :math:`L` forward layers, loss, aggregate, :math:`L` backward layers.
Between rounds the server only moves messages: it forwards every sealed user row along the routing
pairs (it cannot read them), synchronises every plaintext item row to the holders that need it
(the rows a node computed itself are not sent back to it: the ledger still books each logical
message per client), answers negative-item requests by token with the rows of every layer
(Algorithm 9 line 1) and, at the end, runs Adam on what it owns — the rows of items nobody holds
and, for LightGCN+, :math:`W`.

Every cycle — a minibatch or a prediction pass — runs in a protocol step of its own (the step after
the last one used), so each node can hold every stage to its count per step (:mod:`.expect`).
"""

from __future__ import annotations

import numpy as np
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.tokens import TOKEN_BYTES
from fedgraphrec.protocols.base import StepStats
from fedgraphrec.protocols.common import CLIENT, SERVER, regulariser_by_use
from fedgraphrec.protocols.lpgcn.holdings import token_order
from fedgraphrec.protocols.lpgcn.lookup import in_first_order
from fedgraphrec.protocols.lpgcn.roles import (
    AGGREGATE,
    BACKWARD,
    CONV_CLIENT,
    FINAL,
    FORWARD,
    LAYER0,
    LOSS,
    UPDATE,
    item_phase,
)
from fedgraphrec.protocols.lpgcn.server_setup import SetupRounds
from fedgraphrec.protocols.optim import adam_step
from fedgraphrec.runtime.blobs import blob_lengths, joined_blobs
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part

__all__ = ["TrainingRounds"]


class TrainingRounds(SetupRounds):
    """Training and prediction rounds of the LP-GCN server (module docstring)."""

    steps: int = 0

    def _begin_cycle(self) -> None:
        """Every cycle (a minibatch, a prediction pass) runs in a protocol step of its own.

        A node runs each stage at most as often per step as the protocol says (a cycle's), so a
        prediction pass between two minibatches, or two in a row, needs its own step: the number
        after the last one the transport used (set-up runs at ``-1``; a resumed run continues from
        the restored step). Adam's counter is :attr:`steps`, so the trained numbers do not depend
        on how many prediction passes ran; only the step bound into sealed messages does.
        """
        self.transport.begin_step(max(self.transport.net.step + 1, 0))

    # ------------------------------------------------------------------ routing helpers
    def _sync(self, phase: str, kind: str, layer_rows: list[torch.Tensor | None]) -> dict[int, Part]:
        """Item rows to the holders that need them; a node gets only rows other nodes computed."""
        out: dict[int, Part] = {}
        for j, (node, plan) in enumerate(zip(self.node_ids, self.plans, strict=True)):
            if not len(plan.sync_to):
                continue
            # one node: every row is its own, none travels (the ledger still books the messages)
            n_rows = len(plan.sync_cols)
            rows = torch.zeros((n_rows, self.dim), dtype=self.dtype) if n_rows else self._no_rows()
            for k in np.unique(plan.sync_node).tolist() if len(plan.sync_node) else []:
                sel = np.flatnonzero(plan.sync_node == k)
                src = layer_rows[k]
                assert src is not None and k != j
                rows.index_copy_(
                    0,
                    torch.from_numpy(sel),
                    torch.as_tensor(src).index_select(0, torch.from_numpy(plan.sync_pos[sel])),
                )
            out[node] = Part(
                phase,
                kind,
                SERVER,
                CLIENT,
                rows,
                shape="broadcast",
                counts=plan.sync_counts,
                receivers=plan.sync_to,
            )
        return out

    def _no_rows(self) -> torch.Tensor:
        """An empty row table (shared: a table without rows cannot be written to)."""
        empty = vars(self).get("_empty")
        if empty is None or empty.dtype != self.dtype or int(empty.shape[1]) != self.dim:
            empty = vars(self)["_empty"] = torch.zeros((0, self.dim), dtype=self.dtype)
        assert isinstance(empty, torch.Tensor)
        return empty

    def _relay(self, ups: dict[int, Message]) -> dict[int, Part]:
        """Sealed user rows along the routing pairs (views of what each node sent, never opened)."""
        out: dict[int, Part] = {}
        for node, plan in zip(self.node_ids, self.plans, strict=True):
            parts = [self._route(ups[self.node_ids[k]]["users"], pick, to) for k, pick, to in plan.relay]
            if parts:
                out[node] = Part.concat(parts)
        return out

    def _route(self, part: Part, pick: np.ndarray, to: np.ndarray) -> Part:
        """``part.forward`` along a static route; the route's senders are gathered once (read-only).

        A node then recognises a route it has already checked by identity (:meth:`_eq8` of the
        client); any other array — a new upload's senders, a deployment's decoded copy — is
        gathered and checked again.
        """
        if part.senders is None:
            return part.forward(pick, to, CONV_CLIENT)
        cache: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = vars(self).setdefault("_routes", {})
        hit = cache.get(id(pick))
        if hit is None or hit[0] is not pick or hit[1] is not part.senders:
            senders = part.senders[pick]
            senders.flags.writeable = to.flags.writeable = pick.flags.writeable = False
            hit = cache[id(pick)] = (pick, part.senders, senders)
        return part.forward(pick, to, CONV_CLIENT, senders=hit[2])

    def _conv_rows(self, replies: dict[int, Message]) -> list[torch.Tensor | None]:
        return [
            torch.as_tensor(replies[node]["items"].value) if "items" in replies[node] else None
            for node in self.node_ids
        ]

    def _requests(
        self, syncs: dict[int, Part], relays: dict[int, Part], fields: dict[str, object] | None = None
    ) -> dict[int, Message]:
        out = {}
        for node in self.node_ids:
            msg = Message(fields=dict(fields or {}))
            if node in syncs:
                msg.add("items", syncs[node])
            if node in relays:
                msg.add("users", relays[node])
            out[node] = msg
        return out

    def _row_of_column(
        self, layers: list[list[torch.Tensor | None]], cols: np.ndarray, layer: int
    ) -> torch.Tensor:
        """Layer ``layer`` rows of columns (convolved on a node, or owned here)."""
        out = torch.zeros((len(cols), self.dim), dtype=self.dtype)
        node = self.conv_node[cols]
        for k in np.unique(node[node >= 0]).tolist():
            sel = np.flatnonzero(node == k)
            src = layers[layer][k]
            assert src is not None
            out[torch.from_numpy(sel)] = torch.as_tensor(src)[torch.from_numpy(self.conv_pos[cols[sel]])]
        own = np.flatnonzero(node < 0)
        if len(own) and layer == 0:
            out[torch.from_numpy(own)] = self.own_rows[torch.from_numpy(cols[own] - self.n_held)]
        return out

    # ------------------------------------------------------------------ forward (Algorithm 4)
    def _forward(
        self, prefix: str, triples: dict[int, dict[str, object]] | None
    ) -> tuple[dict[int, Message], list[list[torch.Tensor | None]]]:
        L = self.settings.n_layers
        requests: dict[int, Message] = {}
        for node, plan in zip(self.node_ids, self.plans, strict=True):
            msg = Message(fields={"predict": triples is None, **(triples[node] if triples else {})})
            if self.settings.plus:  # Alg. 8: W rows of every held item, for Eq. 6
                held = np.diff(self.hold_ptr)[plan.clients]
                msg.add("W", Part("sync/W", "item_embedding", SERVER, CLIENT, self.W, shape="broadcast",
                                  counts=held, receivers=plan.clients))  # fmt: skip
            requests[node] = msg
        replies = self._round(LAYER0, requests)
        layers = [self._conv_rows(replies)]
        for k in range(1, L + 1):
            syncs = self._sync(item_phase(prefix, "embedding", k - 1), "item_embedding", layers[k - 1])
            replies = self._round(FORWARD, self._requests(syncs, self._relay(replies), {"k": k}))
            layers.append(self._conv_rows(replies))
        return replies, layers

    # ------------------------------------------------------------------ one minibatch
    @torch.inference_mode()
    def train_step(self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor) -> StepStats:
        """One minibatch of Algorithm 1 (Algorithm 7 for LightGCN+); no autograd (gradients by hand).

        Under ``torch.inference_mode`` like the clients' stages (:meth:`.LPGCNClient.handle`): the
        tables the server keeps were made at set-up and are only updated in place.
        """
        s, L = self.settings, self.settings.n_layers
        w = 1.0 / (L + 1)
        self._begin_cycle()
        u, p, q = (np.asarray(x, dtype=np.int64) for x in (users, pos, neg))
        triples: dict[int, dict[str, object]] = {}
        for j, node in enumerate(self.node_ids):
            mine = self.node_index[u] == j
            triples[node] = {"users": u[mine], "pos": p[mine], "neg": q[mine], "batch_size": len(u)}
        last, layers = self._forward("", triples)
        # --- Algorithms 5 and 9: negatives by token; local losses and direct gradients
        syncs = self._sync(item_phase("", "embedding", L), "item_embedding", layers[L])
        requests = self._requests(syncs, {})
        for node in self.node_ids:
            self._answer_negatives(node, last[node], requests[node], layers)
        replies = self._round(LOSS, requests)
        bpr = sum(float(r.fields["bpr"]) for r in replies.values())
        reg = sum(float(r.fields["reg"]) for r in replies.values())
        d_own = torch.zeros_like(self.own_rows)
        uses = np.zeros(int(self.own_rows.shape[0]), dtype=np.int64)
        for part in Message.merge(replies, "grads-server"):
            self._own_gradients(part, d_own, uses)
        # the owner adds the regulariser's term of its items (as a client owner does): senders send D only
        r_own = regulariser_by_use(self.own_rows, uses, s.reg, len(u))
        # --- Eqs. 16-17: direct gradients to the convolution-clients (sealed; forwarded unopened)
        requests = {}
        for j, node in enumerate(self.node_ids):
            parts = []
            for part in Message.merge(replies, "grads"):
                assert part.seal_to is not None
                pick = np.flatnonzero(self.node_index[part.seal_to] == j)
                if len(pick):
                    parts.append(part.forward(pick, part.seal_to[pick], CONV_CLIENT))
            requests[node] = Message({"grads": Part.concat(parts)} if parts else {})
        replies = self._round(AGGREGATE, requests)
        # --- Algorithm 6: layers L-1 .. 0
        for k in range(L - 1, -1, -1):
            syncs = self._sync(item_phase("", "gradient", k + 1), "item_gradient", self._conv_rows(replies))
            replies = self._round(BACKWARD, self._requests(syncs, self._relay(replies), {"k": k}))
        if s.plus:
            self._update_w(replies)
        self.steps += 1
        adam_step(self.own_rows, d_own * w + r_own, self.own_m, self.own_v, self.steps, s.lr)
        if s.plus:
            adam_step(self.W, self._grad_w, self.W_m, self.W_v, self.steps, s.lr)
        return StepStats(
            loss=bpr + s.reg * reg, bpr=bpr, reg=reg, clients=int(np.count_nonzero(np.bincount(u)))
        )

    def _answer_negatives(
        self, node: int, reply: Message, request: Message, layers: list[list[torch.Tensor | None]]
    ) -> None:
        """Algorithm 9 line 1: every layer's rows of the negatives the node holds no row of."""
        if "negatives" not in reply:
            return
        part = reply["negatives"]
        assert part.senders is not None
        lengths = blob_lengths(part.value)
        if (lengths % TOKEN_BYTES).any():
            raise IntegrityError("loss/negative-requests: a request is not a whole number of item tokens")
        counts = lengths // TOKEN_BYTES
        tokens = np.frombuffer(joined_blobs(part.value), dtype=np.uint8).reshape(-1, TOKEN_BYTES)
        cols = self.token_index.find(tokens)
        if (cols < 0).any():
            raise IntegrityError("loss/negative-requests: a client asked for an item token nobody knows")
        plan = self.plans[self.node_ids.index(node)]
        held = np.zeros(self.n_items, dtype=bool)
        held[plan.held_cols] = True
        extra = in_first_order(cols[~held[cols]])
        L = self.settings.n_layers
        rows = (
            torch.cat([self._row_of_column(layers, extra, layer) for layer in range(L + 1)])
            if len(extra)
            else self._no_rows()  # the node holds every item asked for
        )
        request.add("negatives", Part(
            "loss/negative-embeddings", "item_embedding", SERVER, CLIENT, rows, shape="broadcast",
            counts=counts * (L + 1), receivers=part.senders,
        ))  # fmt: skip
        request.fields["neg_owner"] = self.conv_of_col[cols]

    def _own_gradients(self, part: Part, d_own: torch.Tensor, uses: np.ndarray) -> None:
        """Direct gradients of the items the server owns (sent to it in the clear); their uses counted."""
        rows = torch.as_tensor(part.rows())
        d = self.dim
        cols = self.token_index.find(_tokens_in(rows, d))
        if (cols < self.n_held).any():
            raise IntegrityError(
                "loss/item-gradients: the server got a gradient of an item a client convolves"
            )
        at = torch.from_numpy(cols - self.n_held)
        d_own.index_add_(0, at, rows[:, :d].contiguous())  # contiguous sources: scatters run faster
        np.add.at(uses, cols - self.n_held, 1)

    def _update_w(self, replies: dict[int, Message]) -> None:
        r"""Algorithm 7 lines 10-16: :math:`\nabla W`, from convolution-clients (lossless) or clients."""
        grad = torch.zeros_like(self.W)
        if self.settings.paper_literal:
            for part in Message.merge(replies, "w-grads"):
                rows = torch.as_tensor(part.rows())
                tokens = (
                    np.ascontiguousarray(rows[:, self.dim :].numpy()).view(np.uint8).reshape(-1, TOKEN_BYTES)
                )
                grad.index_add_(
                    0, torch.from_numpy(self.token_index.find(tokens)), rows[:, : self.dim].contiguous()
                )
        else:
            replies = self._round(UPDATE, self._requests({}, self._relay(replies)))
            for node, plan in zip(self.node_ids, self.plans, strict=True):
                if "items" in replies[node]:
                    grad[torch.from_numpy(plan.conv_cols)] = torch.as_tensor(replies[node]["items"].value)
        self._grad_w = grad

    # ------------------------------------------------------------------ §4.6 prediction
    @torch.inference_mode()
    def predict(self) -> None:
        """A forward pass without a batch; every final item embedding to every client (token order)."""
        self._begin_cycle()
        _, layers = self._forward("predict/", None)
        L = self.settings.n_layers
        syncs = self._sync(item_phase("predict/", "embedding", L), "item_embedding", layers[L])
        cols = np.arange(self.n_items)
        w = 1.0 / (L + 1)
        final = self._row_of_column(layers, cols, 0) * w
        for layer in range(1, L + 1):
            final.add_(self._row_of_column(layers, cols, layer), alpha=w)
        table = final[torch.from_numpy(token_order(self.col_tokens))]
        requests = {}
        for node, plan in zip(self.node_ids, self.plans, strict=True):
            msg = Message({"final": Part("predict/item-embeddings", "item_embedding", SERVER, CLIENT, table,
                                         shape="broadcast", receivers=plan.clients)})  # fmt: skip
            if node in syncs:  # the last layer reaches the holders as every layer does (Alg. 4 line 11)
                msg.add("items", syncs[node])
            requests[node] = msg
        self._round(FINAL, requests)


def _tokens_in(rows: torch.Tensor, start: int) -> np.ndarray:
    """The item tokens carried as trailing columns of message rows (from column ``start`` on)."""
    return np.ascontiguousarray(rows[:, start:].numpy()).view(np.uint8).reshape(-1, TOKEN_BYTES)
