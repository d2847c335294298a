r"""LP-GCN (LightGCN and LightGCN+ backbones): Algorithms 1 and 7 and their per-minibatch phases.

Wu, Pan, Yang, Ming, "Lossless and Privacy-Preserving Graph Convolution Network for Federated Item
Recommendation", arXiv:2412.01141 (spec ``lpgcn.md``). Every client is a user; the server relays.
Each minibatch runs, in order (phase names as in the ledger):

1. ``sync/l=0`` — convolution-clients publish their convolution-items' layer-0 embeddings, the
   server forwards them to every other holder (Alg. 1 lines 3–6);
2. ``forward/l=k/...`` (Algorithm 4) — each client computes its layer-(k+1) user embedding from its
   real items (Eq. 7); each client sends :math:`S(e^{(k)}_u)`; the server forwards to every
   convolution-client the ciphertexts of every holder of its items (it cannot tell real holders
   from virtual ones); the convolution-client decrypts and computes its items' layer-(k+1)
   embeddings from the verified-real holders (Eq. 8, own term only for real items), which the
   server synchronises to all holders;
3. ``loss/...`` (Algorithms 5 and 9) — each client in the batch receives its negatives' embeddings
   of all layers, computes its BPR loss and the direct gradients :math:`D^{(l)}` (spec §2.4), and
   sends its items' direct gradients (all layers) to their convolution-clients, encrypted under
   :math:`S`;
4. ``backward/l=k/...`` (Algorithm 6) — for :math:`k = L-1..0`: each client sends
   :math:`S(G^{(k+1)}_u)` to the convolution-clients that need it; each convolution-client forms its
   items' gradient :math:`G^{(k)}_{\tilde i} = D^{(k)}_{\tilde i} + \sum_{u\in\mathcal U_{\tilde i}}
   c_{u\tilde i} G^{(k+1)}_u` (Eqs. 19, 20, 24, 27) and synchronises :math:`G^{(k+1)}_{\tilde i}` to
   the holders, who form :math:`G^{(k)}_u = D^{(k)}_u + \sum_{i\in\mathcal I_u} c_{ui}
   G^{(k+1)}_i` (Eqs. 18, 21, 22, 25, 26);
5. ``update`` — every parameter owner runs Adam on its rows (users on clients, convolution-items on
   their convolution-client, items nobody holds on the server), every minibatch.

With the LightGCN+ backbone (Algorithms 7–8) the server owns the item table :math:`W` and sends each
client the rows of its held items (``sync/W``); clients build :math:`U^{(0)}_u` by Eq. 6 from their
real items; after the backward pass the gradient of :math:`W` (Eq. 29) is aggregated at the
convolution-clients from the routed, encrypted user gradients and handed to the server
(``update/...``), which runs Adam on :math:`W` (:meth:`LPGCN.w_gradients`).

Deliberate choices (see spec §11 and the issue note):

- Gradient messages follow option (B) of §4.10: what a holder sends about a user is encrypted
  under :math:`S`, so the server never sees a user embedding *or* a user gradient in the clear.
  The holder sends its user gradient :math:`G^{(k+1)}_u` once per layer (forwarded like the forward
  pass) and the convolution-client applies the public weights :math:`c_{ui}` itself; the
  neighbour-user terms of Eq. 21 reach users as the convolution-items' layer gradients, synchronised
  like item embeddings (item-level aggregates, which the paper's server sees in Eq. 24 anyway).
  This mirrors the forward pass message for message and is exact.
- Virtual items take part in every synchronisation (so the server cannot tell them apart) but never
  in Eq. 7, Eq. 8, the loss or a gradient (their holders send nothing about them to the
  convolution-client, which knows them from verification).
- Adam is element-wise, so one Adam over the user table and one over the item table is the union of
  the owners' own optimisers (each owner steps every minibatch, as PyTorch's dense Adam does).

In crypto mode ``real`` every protected payload is encrypted and decrypted for real and the
receiving party computes with the decrypted values; in ``accounted`` mode the same values are used
without the cipher and bytes are counted with the exact ciphertext sizes. Both execute the same
arithmetic in the same order, so their numbers are identical.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto import ItemTokenizer, ciphertext_size
from fedgraphrec.models.lightgcn import fism_operator
from fedgraphrec.models.propagation import NormalizedBipartite, torch_csr
from fedgraphrec.protocols.common import StepRecord, layer_mean, local_bpr
from fedgraphrec.protocols.lpgcn.roles import CLIENT, CONV_CLIENT, SERVER
from fedgraphrec.protocols.lpgcn.setup import TOKEN_BYTES, Topology, initialization
from fedgraphrec.runtime import (
    CryptoMode,
    Network,
    decode_tensor,
    encoded_size,
    relay_rows,
    tensor_header,
)
from fedgraphrec.runtime.network import Adversary
from fedgraphrec.runtime.sealing import party_names
from fedgraphrec.seeding import numpy_rng

__all__ = ["LPGCN", "StepRecord"]


class LPGCN:
    r"""LP-GCN (LightGCN backbone) over the in-process runtime.

    Args:
        train: binary user×item training matrix (client u holds row u).
        user0: initial user table ``(n, d)`` (row u handed to client u).
        item0: initial item table ``(m, d)`` (row i handed to item i's convolution-client).
        n_layers: LightGCN layers :math:`L`.
        alpha: virtual items per client :math:`\alpha`.
        seed: run seed (virtual items, assignment).
        lr: Adam learning rate of every owner.
        reg: :math:`\lambda` of the layer-0 L2 term.
        crypto: ``"real"`` or ``"accounted"``.
        transcripts: keep what each role received (for audits).
        adversary: an active server that may alter relayed sealed messages (integrity audits).
        secret_cover: virtual items and upload order from the OS CSPRNG, not the run seed (the
            numbers are the same; the ledger's byte counts vary from run to run).
    """

    def __init__(
        self,
        train: sp.csr_matrix,
        user0: torch.Tensor | None,
        item0: torch.Tensor,
        n_layers: int,
        alpha: int = 0,
        seed: int = 0,
        lr: float = 0.001,
        reg: float = 1e-4,
        crypto: CryptoMode = "accounted",
        transcripts: bool = False,
        *,
        item_w0: torch.Tensor | None = None,
        paper_literal: bool = False,
        adversary: Adversary | None = None,
        secret_cover: bool = False,
    ) -> None:
        self.backbone = "lightgcn+" if item_w0 is not None else "lightgcn"
        if (user0 is None) == (item_w0 is None):
            raise ValueError("give user0 (LightGCN backbone) or item_w0 (LightGCN+ backbone), not both")
        first = item_w0 if user0 is None else user0
        assert first is not None
        if first.dtype != item0.dtype or first.shape[1] != item0.shape[1]:
            raise ValueError("the initial tables must share dtype and embedding size")
        self.n_layers = n_layers
        self.reg = reg
        self.seed = seed
        self.paper_literal = paper_literal
        self._steps = 0
        self.dtype = item0.dtype
        self.dim = int(item0.shape[1])
        self.net = Network(train.shape[0], crypto=crypto, transcripts=transcripts, protocol="lpgcn")
        self.net.adversary = adversary  # an active server, for integrity audits
        setup = initialization(train, alpha, seed, self.net, secret_cover=secret_cover)
        self.topology: Topology = setup.topology
        self.shared_key = setup.shared_key
        m = train.shape[1]
        tokens = ItemTokenizer(setup.shared_key).tokens(np.arange(m)) if setup.shared_key is not None else []
        self._token_table = np.frombuffer(b"".join(tokens), dtype=np.uint8).reshape(len(tokens), TOKEN_BYTES)
        self.graph = NormalizedBipartite.from_train(self.topology.real, dtype=self.dtype)
        self.item_emb = torch.nn.Parameter(item0.detach().clone())
        if user0 is not None:  # LightGCN: each client owns its user row
            self.user_emb: torch.nn.Parameter | None = torch.nn.Parameter(user0.detach().clone())
            self.item_w: torch.nn.Parameter | None = None
            owned = [self.user_emb, self.item_emb]
        else:  # LightGCN+ (Alg. 7/8): the server owns W, users are built from it (Eq. 6)
            assert item_w0 is not None
            self.user_emb = None
            self.item_w = torch.nn.Parameter(item_w0.detach().clone())
            fism = fism_operator(self.topology.real)
            self._F = torch_csr(fism, self.dtype)
            self._FT = torch_csr(fism.T.tocsr(), self.dtype)
            owned = [self.item_w, self.item_emb]
        self.optimizer = torch.optim.Adam(owned, lr=lr)
        self._row_bytes = encoded_size((1, self.dim), self.dtype)
        self._row_ct = ciphertext_size(self._row_bytes)
        self._all_clients = np.arange(train.shape[0])
        self._row_payload = self.dim * torch.empty((), dtype=self.dtype).element_size()
        t = self.topology
        self._conv_clients = t.convolution_clients
        self._receivers = np.flatnonzero(t.held_not_own > 0)

    # ------------------------------------------------------------------ messages
    def _sync_items(self, phase: str, rows: torch.Tensor, kind: str) -> None:
        """Convolution-clients → server → other holders: plaintext item rows (embeddings or gradients)."""
        t = self.topology
        per_conv = t.conv_items_per_client[self._conv_clients]
        sizes_up = self._matrix_bytes(per_conv)
        payloads = None
        if self.net.transcript.enabled:
            order = np.argsort(t.conv_of_item, kind="stable")
            owned = order[t.conv_of_item[order] >= 0]
            split = np.cumsum(per_conv)[:-1]
            payloads = [rows[torch.from_numpy(ix)].detach() for ix in np.split(owned, split)]
        self.net.transmit(
            phase,
            CONV_CLIENT,
            SERVER,
            sizes_up,
            kind=kind,
            protected=False,
            payloads=payloads,
            senders=self._conv_clients,
        )
        sizes_down = self._matrix_bytes(t.held_not_own[self._receivers])
        self.net.transmit(
            phase, SERVER, CLIENT, sizes_down, kind=kind, protected=False, receivers=self._receivers
        )

    def _matrix_bytes(self, n_rows: np.ndarray) -> np.ndarray:
        """``encoded_size((k, d))`` for every k in ``n_rows`` (vectorised; the codec's formula)."""
        return len(tensor_header((0, 0), self.dtype)) + np.asarray(n_rows, dtype=np.int64) * self._row_payload

    def _send_user_rows(self, phase: str, rows: torch.Tensor, kind: str) -> torch.Tensor:
        r"""Clients → server → convolution-clients: :math:`S(\text{row}_u)`, routed by neighbourhood.

        The server forwards to each convolution-client the ciphertexts of its neighbours
        :math:`\mathcal N_{\tilde u}`. Returns the table the convolution-clients compute with: each
        received row as decrypted, own rows local.
        """
        t = self.topology
        received = relay_rows(
            self.net,
            phase,
            rows,
            (t.nb_user, t.nb_conv),
            sender_role=CLIENT,
            receiver_role=CONV_CLIENT,
            kind=kind,
            row_ciphertext_bytes=self._row_ct,
        )
        if received is None:
            return rows
        table = rows.detach().clone()  # own rows are local; every received row as decrypted
        table[torch.from_numpy(t.nb_user)] = received
        return table

    # ------------------------------------------------------------------ phases
    def forward_propagation(self, prefix: str = "") -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Algorithm 4: every layer's user and item embeddings (all copies are equal)."""
        us = [self.user_layer0()]
        vs = [self.item_emb.detach()]
        self._sync_items(f"{prefix}sync/l=0", vs[0], "item_embedding")
        for layer in range(self.n_layers):
            u_next = self.graph.R @ vs[layer]  # Eq. 7 at every client, real items only
            received = self._send_user_rows(
                f"{prefix}forward/l={layer}/user-embeddings", us[layer], "user_embedding"
            )
            v_next = self.graph.RT @ received  # Eq. 8 at the convolution-clients
            self._sync_items(f"{prefix}forward/l={layer + 1}/item-embeddings", v_next, "item_embedding")
            us.append(u_next)
            vs.append(v_next)
        return us, vs

    def user_layer0(self) -> torch.Tensor:
        """Layer-0 user embeddings: the clients' own rows, or Eq. 6 from the server's W (Alg. 8).

        For LightGCN+ the server first sends every client the rows :math:`W_i` of all its held items
        (virtual ones included, so the request reveals nothing); the client averages its real ones.
        """
        if self.user_emb is not None:
            return self.user_emb.detach()
        assert self.item_w is not None
        t = self.topology
        held = np.diff((t.real + t.virtual).tocsr().indptr)
        self.net.transmit(
            "sync/W",
            SERVER,
            CLIENT,
            self._matrix_bytes(held),
            kind="item_embedding",
            protected=False,
            receivers=self._all_clients,
        )
        return self._F @ self.item_w.detach()

    def w_gradients(self, gU: torch.Tensor) -> torch.Tensor:
        r"""Alg. 7 lines 10–16: the server's gradient of W, Eq. 29 summed over holders.

        :math:`\nabla W_i = \sum_{u\in\mathcal U_i} G^{(0)}_u/\sqrt{|\mathcal I_u|}`.

        Lossless default (spec §11.1): every client sends :math:`S(G^{(0)}_u)` routed like the
        backward pass; each convolution-client sums Eq. 29 over its items' verified-real holders
        and hands the server the per-item aggregate. With ``paper_literal`` each client instead sends
        the server :math:`\nabla w_i` for all held items in plaintext, random for virtual items
        (Alg. 7 line 11), and the server sums them: inexact whenever :math:`\alpha > 0`.
        """
        t = self.topology
        if not self.paper_literal:
            received = self._send_user_rows("update/user-gradients", gU, "user_gradient")
            grad_w = self._FT @ received
            per_conv = t.conv_items_per_client[self._conv_clients]
            self.net.transmit(
                "update/w-gradients",
                CONV_CLIENT,
                SERVER,
                self._matrix_bytes(per_conv),
                kind="item_gradient",
                protected=False,
                senders=self._conv_clients,
            )
            return grad_w
        grad_w = self._FT @ gU
        virtual = t.virtual.tocoo()
        if virtual.nnz:
            rng = numpy_rng(self.seed, "lpgcn", "paper-literal-virtual-grad", self._steps)
            scale = (gU[torch.from_numpy(virtual.row.astype(np.int64))].std(dim=1, keepdim=True)).numpy()
            noise = rng.standard_normal((virtual.nnz, self.dim)) * scale
            grad_w = grad_w.index_add(
                0, torch.from_numpy(virtual.col.astype(np.int64)), torch.from_numpy(noise).to(self.dtype)
            )
        held = np.diff((t.real + t.virtual).tocsr().indptr)
        self.net.transmit(
            "update/w-gradients",
            CLIENT,
            SERVER,
            self._matrix_bytes(held) + TOKEN_BYTES * held,
            kind="item_gradient",
            protected=False,
            senders=self._all_clients,
        )
        return grad_w

    def loss_and_gradients(
        self,
        users: torch.Tensor,
        pos: torch.Tensor,
        neg: torch.Tensor,
        us: list[torch.Tensor],
        vs: list[torch.Tensor],
    ) -> tuple[StepRecord, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Algorithms 5 and 9: local BPR losses and direct gradients.

        Returns the record, the user-side direct gradients of the combined embedding ``dU`` and of
        layer 0 ``rU`` (regulariser), and the item-side ones ``dV``/``rV`` as aggregated at the
        items' owners.
        """
        U, V = layer_mean(us), layer_mean(vs)
        self._ship_negatives(users.numpy(), neg.numpy())
        loc = local_bpr(U, V, us[0], vs[0], users, pos, neg, self.reg)
        # item-side contributions computed by client users[b]; non-own ones travel to the owner
        d_rows, r_rows = self._send_item_gradients(
            loc.items.numpy(), loc.item_senders, loc.d_rows, loc.r_rows
        )
        dV = torch.zeros_like(V).index_add_(0, loc.items, d_rows)
        rV = torch.zeros_like(V).index_add_(0, loc.items, r_rows)
        dU, rU = loc.dU, loc.rU
        record = StepRecord(loss=float(loc.bpr + self.reg * loc.reg), bpr=float(loc.bpr), reg=float(loc.reg))
        return record, dU, rU, dV, rV

    def _ship_negatives(self, users: np.ndarray, neg: np.ndarray) -> None:
        m = self.topology.n_items
        pairs = np.unique(users.astype(np.int64) * m + neg)
        clients, counts = np.unique(pairs // m, return_counts=True)
        requests = None
        if self.net.real:  # each client's negatives' tokens, one message per client
            flat = self._token_table[pairs % m].tobytes()
            ends = np.cumsum(counts) * TOKEN_BYTES
            requests = [flat[a:b] for a, b in zip(np.r_[0, ends[:-1]].tolist(), ends.tolist(), strict=True)]
        self.net.transmit(
            "loss/negative-requests",
            CLIENT,
            SERVER,
            counts * TOKEN_BYTES,
            kind="item_token",
            protection="pseudonymous",
            payloads=requests,
            senders=clients,
        )
        sizes = self._matrix_bytes(counts * (self.n_layers + 1))
        self.net.transmit(
            "loss/negative-embeddings",
            SERVER,
            CLIENT,
            sizes,
            kind="item_embedding",
            protected=False,
            receivers=clients,
        )

    def _send_item_gradients(
        self, items: np.ndarray, senders: np.ndarray, d_rows: torch.Tensor, r_rows: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Direct item gradients of all layers to each item's owner, one ciphertext per (client, owner).

        Layer l's direct gradient is :math:`\alpha_l`·``d_row`` (+ ``r_row`` at l = 0), so the
        :math:`L+1` rows of Alg. 9 are sent as the two rows they are made of. Items nobody holds go
        to the server (their owner) in plaintext.
        """
        t = self.topology
        owner = t.conv_of_item[items]
        remote = owner != senders
        ids = np.flatnonzero(remote)
        if not len(ids):
            return d_rows, r_rows
        key = senders[ids].astype(np.int64) * (t.n_clients + 1) + (owner[ids] + 1)
        order = np.argsort(key, kind="stable")
        ids, key = ids[order], key[order]
        bounds = np.flatnonzero(np.diff(key)) + 1
        starts = np.concatenate([[0], bounds])
        lens = np.diff(np.concatenate([starts, [len(ids)]]))
        src, dst = senders[ids[starts]], owner[ids[starts]]
        to_server = dst < 0
        row = self._row_payload
        plain = len(tensor_header((0, 0), self.dtype)) + 2 * lens * row + TOKEN_BYTES * lens
        sizes = np.where(to_server, plain, plain + ciphertext_size(0))
        payloads: list[bytes] | None = None
        sealed_from: list[str] = []
        sealed_to: list[str] = []
        if self.net.real:
            sealed_from = party_names(CLIENT, src[~to_server].tolist())
            sealed_to = party_names(CONV_CLIENT, dst[~to_server].tolist())
            tid = torch.from_numpy(ids)
            dbuf = d_rows[tid].contiguous().numpy().tobytes()
            rbuf = r_rows[tid].contiguous().numpy().tobytes()
            tbuf = self._token_table[items[ids]].tobytes()
            bodies = [
                tensor_header((2 * int(k), self.dim), self.dtype)
                + dbuf[s0 * row : (s0 + k) * row]
                + rbuf[s0 * row : (s0 + k) * row]
                + tbuf[s0 * TOKEN_BYTES : (s0 + k) * TOKEN_BYTES]
                for s0, k in zip(starts.tolist(), lens.tolist(), strict=True)
            ]
            enc = [k for k in range(len(bodies)) if not to_server[k]]
            sealed = self.net.seal("loss/item-gradients", [bodies[k] for k in enc], sealed_from, sealed_to)
            assert sealed is not None
            payloads = list(bodies)
            for k, blob in zip(enc, sealed, strict=True):
                payloads[k] = blob
            if [len(p) for p in payloads] != sizes.tolist():
                raise RuntimeError("loss/item-gradients: payload sizes differ from the accounted sizes")
        for srv in (True, False):  # plaintext to the server (its own items); S-encrypted to conv-clients
            sel = to_server == srv
            if not sel.any():
                continue
            self.net.transmit(
                "loss/item-gradients",
                CLIENT,
                SERVER,
                sizes[sel],
                kind="item_gradient",
                protection="plain" if srv else "sealed",
                payloads=None if payloads is None else [b for b, k in zip(payloads, sel, strict=True) if k],
                senders=src[sel],
            )
        fwd = ~to_server
        delivered = self.net.transmit(
            "loss/item-gradients",
            SERVER,
            CONV_CLIENT,
            sizes[fwd],
            kind="item_gradient",
            protected=True,
            payloads=None if payloads is None else [b for b, k in zip(payloads, fwd, strict=True) if k],
            receivers=dst[fwd],
        )
        if payloads is None or delivered is None:
            return d_rows, r_rows
        fwd_ids = np.flatnonzero(fwd)
        opened = dict(
            zip(
                fwd_ids.tolist(),
                self.net.open("loss/item-gradients", delivered, sealed_from, sealed_to),
                strict=True,
            )
        )
        d_parts, r_parts = [], []
        for k, (_s0, n_rows) in enumerate(
            zip(starts.tolist(), lens.tolist(), strict=True)
        ):  # owners open their mail
            body = payloads[k] if to_server[k] else opened[k]
            rows = decode_tensor(body[: len(body) - TOKEN_BYTES * n_rows])
            d_parts.append(rows[:n_rows])
            r_parts.append(rows[n_rows:])
        tid = torch.from_numpy(ids)
        d_rows, r_rows = d_rows.clone(), r_rows.clone()
        d_rows[tid] = torch.cat(d_parts)
        r_rows[tid] = torch.cat(r_parts)
        return d_rows, r_rows

    def backward_propagation(
        self, dU: torch.Tensor, rU: torch.Tensor, dV: torch.Tensor, rV: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Algorithm 6: layer-0 gradients of every user and item, via the adjoint recursion."""
        L = self.n_layers
        w = 1.0 / (L + 1)
        wdU, wdV = w * dU, w * dV  # D^(l) = α_l ∂L/∂(final), the same for every l > 0
        gU = wdU + rU if L == 0 else wdU
        gV = wdV + rV if L == 0 else wdV
        for layer in range(L - 1, -1, -1):
            received = self._send_user_rows(f"backward/l={layer + 1}/user-gradients", gU, "user_gradient")
            self._sync_items(f"backward/l={layer + 1}/item-gradients", gV, "item_gradient")
            gU_next = wdU + self.graph.R @ gV  # at every client (Eqs. 18, 21, 22, 25, 26)
            gV_next = wdV + self.graph.RT @ received  # at the convolution-clients (Eqs. 19, 20, 24, 27)
            if layer == 0:
                gU_next = gU_next + rU
                gV_next = gV_next + rV
            gU, gV = gU_next, gV_next
        return gU, gV

    # ------------------------------------------------------------------ Algorithm 1 body
    def train_step(
        self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, keep_layers: bool = False
    ) -> StepRecord:
        """One minibatch of Algorithm 1: sync, forward, loss, backward, Adam update."""
        self.net.begin_step(self._steps)
        with torch.no_grad():
            us, vs = self.forward_propagation()
            record, dU, rU, dV, rV = self.loss_and_gradients(users, pos, neg, us, vs)
            gU, gV = self.backward_propagation(dU, rU, dV, rV)
            grad_w = self.w_gradients(gU) if self.item_w is not None else None
        if keep_layers:
            record.user_layers = [us[0].clone(), *us[1:]]  # layer 0 may be the live parameter
            record.item_layers = [vs[0].clone(), *vs[1:]]
            record.user_grad, record.item_grad, record.w_grad = gU, gV, grad_w
        self.optimizer.zero_grad(set_to_none=True)
        if self.user_emb is not None:
            self.user_emb.grad = gU
        if self.item_w is not None:
            self.item_w.grad = grad_w
        self.item_emb.grad = gV
        self.optimizer.step()
        self._steps += 1
        return record

    def parameters_by_name(self) -> dict[str, torch.nn.Parameter]:
        """The owned parameters under the oracle's names (``user_emb`` or ``item_w``, ``item_emb``)."""
        named = {"user_emb": self.user_emb, "item_w": self.item_w, "item_emb": self.item_emb}
        return {k: v for k, v in named.items() if v is not None}

    @torch.no_grad()
    def final_embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Prediction (§4.6): a forward pass, then the server sends every client all final item embeddings.

        The server holds every item's embedding of every layer (they are synchronised through it), so
        it can publish the final item table; each client ranks its non-interacted items with its own
        final user embedding. Both the forward pass and the download are counted in the ledger.
        """
        self.net.begin_step(self._steps)
        with torch.no_grad():
            us, vs = self.forward_propagation(prefix="predict/")
        U, V = layer_mean(us), layer_mean(vs)
        n, m = self.topology.n_clients, self.topology.n_items
        self.net.transmit(
            "predict/item-embeddings",
            SERVER,
            CLIENT,
            self._matrix_bytes(np.full(n, m)),
            kind="item_embedding",
            protected=False,
            receivers=self._all_clients,
        )
        return U, V
