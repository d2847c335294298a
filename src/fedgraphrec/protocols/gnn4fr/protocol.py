r"""GNN4FR: lossless federated LightGCN by sub-graph expansion (spec ``gnn4fr.md``).

Every client is a user; the server only relays. Where LP-GCN computes each item once on a
convolution-client, GNN4FR lets every holder of an item compute it redundantly from its 2-hop ego
graph, so no item embedding is ever synchronised; only users' embeddings (forward) and gradients
(backward) travel between neighbours, encrypted under the shared key :math:`S`, and item gradients
are summed by the server through additive secret sharing. The phases of one minibatch (ledger names):

- ``setup/...`` (Algorithms 2–3, once): key pairs, :math:`S`, item tokens; the server tells each
  client its neighbouring users :math:`\mathcal N_u` (users sharing an item), their degrees and the
  connectivity of its items;
- ``forward/l=k/user-embeddings`` (Algorithm 4): every client sends :math:`S(U^{(k)}_u)`, the
  server forwards it to the client's neighbours, each client convolves its expanded sub-graph:
  :math:`U^{(k+1)}_u` from its items and :math:`V^{(k+1)}_i` of *all its items* from all their users;
- ``loss/...``: a negative item's embeddings of all layers come from its designated holder (the
  lowest-numbered one) under :math:`S`; the client's direct gradient for a negative goes back to
  that holder (items nobody holds are kept by the server, in the clear);
- ``backward/l=k/neighbour-gradients`` (Algorithm 5): each client back-propagates *its own share*
  of every item gradient, :math:`g^{(k)}_{i(u)} = D^{(k)}_{i(u)} + c_{ui} G^{(k+1)}_u` — the edge
  accounting that counts each chain-rule term once — into its neighbours' user gradients and sends
  them :math:`S(\sum_{i\in\mathcal I_u\cap\mathcal I_{u'}} c_{u'i}\, g^{(k+1)}_{i(u)})`;
- ``aggregate/...``: every client fixed-point encodes its layer-0 item-gradient shares over
  :math:`\mathbb Z_{2^{64}}`, splits them into two additive shares, sends one under :math:`S` to its
  successor in a seeded single cycle, and uploads kept + received; the server's sum is
  :math:`\sum_u g^{(0)}_{i(u)}` exactly (in fixed point) while each upload is uniform in the ring;
  every holder applies the same Adam step to its copy.

Both crypto modes run the same arithmetic: ``real`` encrypts, shares and decrypts for real;
``accounted`` counts the same bytes and applies the same fixed-point rounding, so the numbers are
identical.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto import FixedPoint, IntegrityError, ItemTokenizer, ciphertext_size, pair_clients, split
from fedgraphrec.models.propagation import NormalizedBipartite, sym_norm_values, torch_csr
from fedgraphrec.protocols.common import (
    CLIENT,
    SERVER,
    TOKEN_BYTES,
    StepRecord,
    distribute_shared_key,
    layer_mean,
    local_bpr,
    upload_item_tokens,
)
from fedgraphrec.runtime import (
    CryptoMode,
    Network,
    decode_rows,
    decode_tensor,
    encode_rows,
    encoded_size,
    relay_rows,
    tensor_header,
)
from fedgraphrec.runtime.network import Adversary
from fedgraphrec.runtime.sealing import multicast, party, party_names
from fedgraphrec.seeding import numpy_rng

__all__ = ["GNN4FR"]


def _same_item_edge_pairs(train: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """All ordered pairs (e, e') of distinct edges on the same item (e = (u, i), e' = (u', i))."""
    csc = train.tocsc()
    csc.sort_indices()
    deg = np.diff(csc.indptr)
    # edge ids in CSR order for each CSC position
    csr = sp.csr_matrix(train)
    csr.sort_indices()
    edge_id = sp.csr_matrix((np.arange(csr.nnz) + 1, csr.indices, csr.indptr), shape=csr.shape).tocsc()
    edge_id.sort_indices()
    ids = edge_id.data.astype(np.int64) - 1
    reps = np.repeat(deg, deg)  # each position repeated |U_i| times
    first = np.repeat(ids, reps)
    starts = np.repeat(csc.indptr[:-1], deg)
    within = np.arange(reps.sum()) - np.repeat(np.cumsum(reps) - reps, reps)
    second = ids[np.repeat(starts, reps) + within]
    keep = first != second
    return first[keep], second[keep]


class GNN4FR:
    """GNN4FR over the in-process runtime (LightGCN backbone).

    Args:
        train: binary user×item training matrix (client u holds row u).
        user0, item0: the initial tables (item copies are equal on every holder: common seed).
        n_layers: LightGCN layers.
        seed: run seed (key-client, upload order, share pairing, shares).
        lr: Adam learning rate.
        reg: λ of the layer-0 L2 term.
        crypto: ``real`` or ``accounted``.
        transcripts: keep what each role received.
        frac_bits: fixed-point fraction bits of the secret-shared sums (52 keeps float64 accuracy
            for gradients below 2^10 in magnitude).
    """

    def __init__(
        self,
        train: sp.csr_matrix,
        user0: torch.Tensor,
        item0: torch.Tensor,
        n_layers: int,
        seed: int = 0,
        lr: float = 0.001,
        reg: float = 1e-4,
        crypto: CryptoMode = "accounted",
        transcripts: bool = False,
        frac_bits: int = 52,
        *,
        adversary: Adversary | None = None,
    ) -> None:
        train = sp.csr_matrix(train, dtype=np.float32)
        train.sum_duplicates()
        train.sort_indices()
        n, m = train.shape
        self.n_layers, self.reg, self.seed = n_layers, reg, seed
        self.dtype, self.dim = item0.dtype, int(item0.shape[1])
        self.train = train
        self.net = Network(n, crypto=crypto, transcripts=transcripts, protocol="gnn4fr")
        self.net.adversary = adversary  # an active server, for integrity audits
        keys = distribute_shared_key(
            n, self.net, key_client=int(numpy_rng(seed, "gnn4fr", "setup").integers(0, n))
        )
        upload_item_tokens(train, self.net, keys.shared_key, numpy_rng(seed, "gnn4fr", "upload-order"))
        self.shared_key = keys.shared_key
        tokens = ItemTokenizer(keys.shared_key).tokens(np.arange(m)) if keys.shared_key is not None else []
        self._token_table = np.frombuffer(b"".join(tokens), dtype=np.uint8).reshape(len(tokens), TOKEN_BYTES)
        self.fixed = FixedPoint(frac_bits)
        # --- Algorithm 3: neighbour lists, connectivity, degrees ---------------------------------
        self.edge_user = np.repeat(np.arange(n), np.diff(train.indptr))
        self.edge_item = train.indices.astype(np.int64)
        self.edge_c = sym_norm_values(train)
        e1, e2 = _same_item_edge_pairs(train)  # e1's owner sends to e2's owner about item of e1
        self._e1, self._e2 = e1, e2
        pair_key = self.edge_user[e1] * n + self.edge_user[e2]
        pairs, self._pair_of = np.unique(pair_key, return_inverse=True)
        self.pair_sender, self.pair_receiver = pairs // n, pairs % n
        holders = np.diff(train.tocsc().indptr)
        connectivity = np.bincount(self.edge_user, weights=holders[self.edge_item] - 1, minlength=n).astype(
            np.int64
        )
        nb_counts = np.bincount(self.pair_sender, minlength=n)
        self.net.transmit(
            "setup/neighbours",
            SERVER,
            CLIENT,
            nb_counts * 16 + connectivity * 8,
            kind="graph",
            protected=False,
            receivers=np.arange(n),
        )
        self.owner = np.full(m, n, dtype=np.int64)  # designated holder: the lowest-numbered one
        np.minimum.at(self.owner, self.edge_item, self.edge_user)
        self.owner[self.owner == n] = -1  # nobody holds it: the server keeps it
        self.graph = NormalizedBipartite.from_train(train, dtype=self.dtype)
        dt = self.dtype
        E = len(self.edge_item)
        # pair rows = M @ per-edge gradient shares; own user terms = own @ shares
        self._M = torch_csr(sp.csr_matrix((self.edge_c[e2], (self._pair_of, e1)), shape=(len(pairs), E)), dt)
        P = len(pairs)
        self._Q = torch_csr(sp.csr_matrix((np.ones(P), (self.pair_receiver, np.arange(P))), shape=(n, P)), dt)
        self._own = torch_csr(sp.csr_matrix((self.edge_c, (self.edge_user, np.arange(E))), shape=(n, E)), dt)
        self._succ = pair_clients(n, numpy_rng(seed, "gnn4fr", "pairing"))
        self._pred_of = np.empty(n, dtype=np.int64)
        self._pred_of[self._succ] = np.arange(n)
        self.user_emb = torch.nn.Parameter(user0.detach().clone())
        self.item_emb = torch.nn.Parameter(item0.detach().clone())
        self.optimizer = torch.optim.Adam([self.user_emb, self.item_emb], lr=lr)
        self._row_payload = self.dim * torch.empty((), dtype=dt).element_size()
        self._row_ct = ciphertext_size(encoded_size((1, self.dim), dt))
        self._steps = 0

    # ------------------------------------------------------------------ messages
    def _to_neighbours(self, phase: str, rows: torch.Tensor) -> torch.Tensor:
        """Each client's row under S to each neighbour; returns the rows as the neighbours decrypted them."""
        received = relay_rows(
            self.net,
            phase,
            rows,
            (self.pair_sender, self.pair_receiver),
            sender_role=CLIENT,
            receiver_role=CLIENT,
            kind="user_embedding",
            row_ciphertext_bytes=self._row_ct,
        )
        if received is None:
            return rows
        table = rows.detach().clone()
        table[torch.from_numpy(self.pair_sender)] = received
        return table

    def _pairwise(self, phase: str, pair_rows: torch.Tensor) -> torch.Tensor:
        """Per-(sender, neighbour) gradient rows under S; returns them as the receivers decrypted them."""
        received = relay_rows(
            self.net,
            phase,
            pair_rows,
            (np.arange(len(pair_rows)), self.pair_receiver),
            sender_role=CLIENT,
            receiver_role=CLIENT,
            kind="user_gradient",
            row_ciphertext_bytes=self._row_ct,
            senders=self.pair_sender,
            unicast=True,
        )
        return pair_rows if received is None else received

    def _negatives(self, users: np.ndarray, neg: np.ndarray, vs: list[torch.Tensor]) -> None:
        """Negatives' embeddings of all layers from their designated holders (or the server).

        Each request is answered by the item's designated holder, sealed for the requester (bound to
        the phase, step, holder and requester); the requester opens it and checks it got the item's
        rows. Items nobody holds come from the server, which keeps them in the clear.
        """
        m = self.train.shape[1]
        req = np.unique(users.astype(np.int64) * m + neg)
        requester, item = req // m, req % m
        held = self.owner[item] >= 0
        rows = self.n_layers + 1
        size = ciphertext_size(encoded_size((1, rows * self.dim), self.dtype))
        requests = [bytes(t) for t in self._token_table[item]] if self.net.real else None
        self.net.transmit(
            "loss/negative-requests", CLIENT, SERVER, TOKEN_BYTES, count=len(req), kind="item_token",
            protection="pseudonymous", payloads=requests, senders=requester,
        )  # fmt: skip
        phase = "loss/negative-embeddings"
        held_t = torch.from_numpy(np.flatnonzero(held))
        stacked = torch.cat([v[torch.from_numpy(item)] for v in vs], dim=1)[held_t]
        holders, asking = self.owner[item[held]], requester[held]
        from_names = party_names(CLIENT, holders.tolist()) if self.net.real else []
        to_names = party_names(CLIENT, asking.tolist()) if self.net.real else []
        sealed = self.net.seal(phase, encode_rows(stacked), from_names, to_names) if self.net.real else None
        up = self.net.transmit(
            phase, CLIENT, SERVER, size, count=len(asking), kind="item_embedding", protection="sealed",
            payloads=sealed, senders=holders,
        )  # fmt: skip
        got = self.net.transmit(
            phase, SERVER, CLIENT, size, count=len(asking), kind="item_embedding", protection="sealed",
            payloads=up, receivers=asking,
        )  # fmt: skip
        self.net.transmit(
            phase, SERVER, CLIENT, encoded_size((1, rows * self.dim), self.dtype), count=int((~held).sum()),
            kind="item_embedding", protection="plain", receivers=requester[~held],
        )  # fmt: skip
        if got is not None:
            opened = decode_rows(self.net.open(phase, got, from_names, to_names), rows * self.dim, self.dtype)
            if not torch.equal(opened, stacked):
                raise RuntimeError(f"{phase}: an opened row differs from the holder's row")

    def _negative_gradients(
        self, users: np.ndarray, neg: np.ndarray, d_rows: torch.Tensor, r_rows: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Direct gradients of negatives (both parts) sealed to their designated holders.

        ``d_rows``/``r_rows`` hold the positives' rows then the negatives'. Returns them as the
        holders compute with them: in ``real`` mode the negatives' rows are the ones they opened.
        """
        holder = self.owner[neg]
        sel = np.flatnonzero(holder >= 0)
        size = ciphertext_size(encoded_size((2, self.dim), self.dtype) + TOKEN_BYTES)
        phase = "loss/negative-gradients"
        B = len(users)
        sealed = None
        from_names: list[str] = []
        to_names: list[str] = []
        if self.net.real:
            from_names = party_names(CLIENT, users[sel].tolist())
            to_names = party_names(CLIENT, holder[sel].tolist())
            rows_at = torch.from_numpy(B + sel)
            d_b = d_rows[rows_at].contiguous().numpy()
            r_b = r_rows[rows_at].contiguous().numpy()
            header = tensor_header((2, self.dim), self.dtype)
            bodies = [
                header + d_b[k].tobytes() + r_b[k].tobytes() + self._token_table[neg[j]].tobytes()
                for k, j in enumerate(sel.tolist())
            ]
            sealed = self.net.seal(phase, bodies, from_names, to_names)
        up = self.net.transmit(
            phase, CLIENT, SERVER, size, count=len(sel), kind="item_gradient", protection="sealed",
            payloads=sealed, senders=users[sel],
        )  # fmt: skip
        got = self.net.transmit(
            phase, SERVER, CLIENT, size, count=len(sel), kind="item_gradient", protection="sealed",
            payloads=up, receivers=holder[sel],
        )  # fmt: skip
        if got is None:
            return d_rows, r_rows
        opened = self.net.open(phase, got, from_names, to_names)
        d_rows, r_rows = d_rows.clone(), r_rows.clone()
        if opened:
            parts = torch.stack([decode_tensor(b[: len(b) - TOKEN_BYTES]) for b in opened])
            at = torch.from_numpy(B + sel)
            d_rows[at], r_rows[at] = parts[:, 0], parts[:, 1]
        return d_rows, r_rows

    # ------------------------------------------------------------------ phases
    def forward_propagation(self, prefix: str = "forward") -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Algorithm 4: every layer (every holder's copy of an item is identical)."""
        us, vs = [self.user_emb.detach()], [self.item_emb.detach()]
        for layer in range(self.n_layers):
            received = self._to_neighbours(f"{prefix}/l={layer}/user-embeddings", us[layer])
            us.append(self.graph.R @ vs[layer])
            vs.append(self.graph.RT @ received)
        return us, vs

    def backward_propagation(
        self, dU: torch.Tensor, rU: torch.Tensor, dE: torch.Tensor, rE: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        r"""Algorithm 5: users' layer-0 gradients and every client's layer-0 item-gradient shares.

        Each client u holds, for each of its items i, its share :math:`g^{(l)}_{i(u)} = D^{(l)}_{i(u)}
        + c_{ui} G^{(l+1)}_u` of the item gradient; summed over holders it is exactly
        :math:`G^{(l)}_i`, so every chain-rule term is counted once. A user's gradient is its own
        direct part, its own shares pushed back through its edges, and what its neighbours send.
        """
        L = self.n_layers
        w = 1.0 / (L + 1)
        c = torch.from_numpy(self.edge_c).to(self.dtype).unsqueeze(1)
        eu = torch.from_numpy(self.edge_user)
        gU = w * dU + (rU if L == 0 else 0)
        g_edge = w * dE + (rE if L == 0 else 0)
        for layer in range(L - 1, -1, -1):
            sent = self._M @ g_edge  # client u -> u': sum over shared items of c_{u'i} g_{i(u)}
            received = self._pairwise(f"backward/l={layer + 1}/neighbour-gradients", sent)
            from_neighbours = self._Q @ received  # each user sums what its neighbours sent
            gU_next = w * dU + self._own @ g_edge + from_neighbours
            g_next = w * dE + c * gU[eu]
            if layer == 0:
                gU_next = gU_next + rU
                g_next = g_next + rE
            gU, g_edge = gU_next, g_next
        return gU, g_edge

    def _aggregate(self, g_edge: torch.Tensor) -> torch.Tensor:
        """Secret-shared sum over clients of their layer-0 item-gradient shares (fixed point)."""
        n, m, d = self.train.shape[0], self.train.shape[1], self.dim
        holders = int(np.diff(self.train.tocsc().indptr).max(initial=0))
        self.fixed.check_sum(
            holders, float(g_edge.detach().abs().max()) if g_edge.numel() else 0.0, "aggregate"
        )
        enc = self.fixed.encode(g_edge.detach().to(torch.float64))  # (E, d) uint64
        vec_bytes = m * d * 8
        clients = np.arange(n)
        kept: list[np.ndarray] = []
        sent: list[bytes] | None = None
        share_from = party_names(CLIENT, clients.tolist())
        share_to = party_names(CLIENT, self._succ.tolist())
        if self.net.real:  # every client splits its dense vector into kept + sent shares (CSPRNG)
            shares = []
            for u in range(n):
                vec = np.zeros((m, d), dtype=np.uint64)
                a, b = self.train.indptr[u], self.train.indptr[u + 1]
                vec[self.edge_item[a:b]] = enc[a:b]
                keep, share = split(vec, 2)
                kept.append(keep)
                shares.append(share.tobytes())
            sent = self.net.seal("aggregate/shares", shares, share_from, share_to)
        share_ct = ciphertext_size(vec_bytes)
        up = self.net.transmit(
            "aggregate/shares",
            CLIENT,
            SERVER,
            share_ct,
            count=n,
            kind="gradient_share",
            protected=True,
            payloads=sent,
            senders=clients,
        )
        fwd = None if up is None else [up[self._pred(v)] for v in range(n)]
        got = self.net.transmit(
            "aggregate/shares",
            SERVER,
            CLIENT,
            share_ct,
            count=n,
            kind="gradient_share",
            protected=True,
            payloads=fwd,
            receivers=clients,
        )
        uploads: list[np.ndarray] | None = None
        if got is not None:  # kept share + the predecessor's share, opened and checked
            opened = self.net.open(
                "aggregate/shares", got, [share_from[self._pred(v)] for v in range(n)], share_from
            )
            uploads = [kept[v] + np.frombuffer(opened[v], dtype=np.uint64).reshape(m, d) for v in range(n)]
        self.net.transmit(
            "aggregate/uploads",
            CLIENT,
            SERVER,
            vec_bytes,
            count=n,
            kind="gradient_share",
            protection="masked",
            payloads=None if uploads is None else [x.tobytes() for x in uploads],
            senders=clients,
        )
        total = np.zeros((m, d), dtype=np.uint64)
        if uploads is not None:
            for upload in uploads:  # the server's sum, mod 2^64
                total += upload
        else:  # accounted: the masks cancel in the ring, so the sum is the sum of the encodings
            order = np.argsort(self.edge_item, kind="stable")
            items = self.edge_item[order]
            starts = np.flatnonzero(np.r_[True, items[1:] != items[:-1]])
            total[items[starts]] = np.add.reduceat(enc[order], starts, axis=0)
        self.net.transmit(
            "aggregate/sum",
            SERVER,
            CLIENT,
            vec_bytes,
            count=n,
            kind="item_gradient",
            protected=False,
            receivers=np.arange(n),
        )
        return torch.from_numpy(self.fixed.decode(total)).to(self.dtype)

    def _pred(self, v: int) -> int:
        """The client whose share ``v`` receives (inverse of the seeded single cycle)."""
        return int(self._pred_of[v])

    def train_step(
        self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, keep_layers: bool = False
    ) -> StepRecord:
        """One minibatch: forward, local losses, backward, secret-shared item-gradient sum, Adam."""
        L, d = self.n_layers, self.dim
        w = 1.0 / (L + 1)
        self.net.begin_step(self._steps)
        with torch.no_grad():
            us, vs = self.forward_propagation()
            U, V = layer_mean(us), layer_mean(vs)
            self._negatives(users.numpy(), neg.numpy(), vs)
            loc = local_bpr(U, V, us[0], vs[0], users, pos, neg, self.reg)
            bpr, reg, dU, rU = loc.bpr, loc.reg, loc.dU, loc.rU
            # direct item gradients land on an edge: positives on the client's own edge, negatives on
            # the designated holder's edge (sent there under S), unheld negatives at the server
            items = loc.items
            d_rows, r_rows = self._negative_gradients(users.numpy(), neg.numpy(), loc.d_rows, loc.r_rows)
            holder = np.concatenate([users.numpy(), self.owner[neg.numpy()]])
            on_edge = holder >= 0
            key = holder[on_edge] * self.train.shape[1] + items.numpy()[on_edge]
            edge_keys = self.edge_user * self.train.shape[1] + self.edge_item
            edge_of = torch.from_numpy(np.searchsorted(edge_keys, key))
            E = len(self.edge_item)
            dE = torch.zeros(E, d, dtype=self.dtype).index_add_(0, edge_of, d_rows[on_edge])
            rE = torch.zeros(E, d, dtype=self.dtype).index_add_(0, edge_of, r_rows[on_edge])
            server_items = items[~torch.from_numpy(on_edge)]
            dS = torch.zeros_like(V).index_add_(0, server_items, d_rows[~torch.from_numpy(on_edge)])
            rS = torch.zeros_like(V).index_add_(0, server_items, r_rows[~torch.from_numpy(on_edge)])
            gU, g_edge = self.backward_propagation(dU, rU, dE, rE)
            item_grad = self._aggregate(g_edge) + w * dS + rS  # items nobody holds: the server's own
        loss = float(bpr + self.reg * reg)
        step = StepRecord(loss=loss, bpr=float(bpr), reg=float(reg))
        if keep_layers:
            step.user_layers = [us[0].clone(), *us[1:]]
            step.item_layers = [vs[0].clone(), *vs[1:]]
            step.user_grad, step.item_grad = gU, item_grad
        self.optimizer.zero_grad(set_to_none=True)
        self.user_emb.grad, self.item_emb.grad = gU, item_grad
        self.optimizer.step()
        self._steps += 1
        return step

    def parameters_by_name(self) -> dict[str, torch.nn.Parameter]:
        """The owned parameters under the oracle's names."""
        return {"user_emb": self.user_emb, "item_emb": self.item_emb}

    @torch.no_grad()
    def final_embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Algorithm 6 (predict): the final embeddings every client ranks with.

        A forward pass (Algorithm 4) gives every client its final user embedding and its items'
        final embeddings; for each item the server picks one holder at random (seeded), which
        uploads the item's final embedding under :math:`S`; the server sends every client the
        ciphertexts of the items it has not interacted with, and the client decrypts and ranks
        locally. Returns what the clients hold: their user embeddings and the item table (items
        nobody holds come from the server, which keeps them).
        """
        self.net.begin_step(self._steps)
        us, vs = self.forward_propagation(prefix="predict/forward")
        U, V = layer_mean(us), layer_mean(vs)
        n, m = self.train.shape
        holders = self.train.tocsc()
        rng = numpy_rng(self.seed, "gnn4fr", "predict", self._steps)
        deg = np.diff(holders.indptr)
        held = np.flatnonzero(deg > 0)
        pick = holders.indices[holders.indptr[held] + (rng.random(len(held)) * deg[held]).astype(np.int64)]
        # uploads: one ciphertext per held item; downloads: every client gets the items it lacks
        phase = "predict/item-embeddings"
        relay_items = V[torch.from_numpy(held)]
        item_names = party_names("holder-of-item", held.tolist())  # receivers know the item, not its holder
        anyone = [multicast(CLIENT)] * len(held)
        sealed = self.net.seal(phase, encode_rows(relay_items), item_names, anyone) if self.net.real else None
        up = self.net.transmit(
            phase, CLIENT, SERVER, self._row_ct, count=len(held), kind="item_embedding", protection="sealed",
            payloads=sealed, senders=pick,
        )  # fmt: skip
        lacking = m - np.diff(self.train.indptr)  # each client gets the items it has not interacted with
        slot = np.full(m, -1, dtype=np.int64)
        slot[held] = np.arange(len(held))
        wanted = (
            [
                np.setdiff1d(held, self.train.indices[a:b])
                for a, b in zip(self.train.indptr[:-1], self.train.indptr[1:], strict=True)
            ]
            if up is not None
            else []
        )
        bundles = None if up is None else [[up[k] for k in slot[w]] for w in wanted]
        got = self.net.transmit(
            phase, SERVER, CLIENT, lacking * self._row_ct, kind="item_embedding", protection="sealed",
            payloads=bundles, receivers=np.arange(n),
        )  # fmt: skip
        if got is not None:  # each client opens its bundle; byte-identical copies share one opening
            opened: dict[tuple[int, bytes | None], bytes] = {}
            for u, (items, bundle) in enumerate(zip(wanted, got, strict=True)):
                copies = list(bundle) if bundle is not None else [None] * len(items)
                if len(copies) != len(items):
                    raise IntegrityError(
                        f"gnn4fr {phase}: the bundle for client:{u} holds {len(copies)} messages for "
                        f"the {len(items)} items it lacks (re-routed or truncated); the receiver rejected it"
                    )
                todo = [
                    (int(slot[i]), c)
                    for i, c in zip(items, copies, strict=True)
                    if (int(slot[i]), c) not in opened
                ]
                if todo:
                    plain = self.net.open(
                        phase,
                        [c for _, c in todo],
                        [item_names[k] for k, _ in todo],
                        [anyone[k] for k, _ in todo],
                        delivered_to=[party(CLIENT, u)] * len(todo),
                    )
                    opened.update(zip(todo, plain, strict=True))
            rows_of = {k: b for (k, _), b in opened.items()}
            V = V.clone()
            V[torch.from_numpy(held)] = decode_rows(
                [rows_of[k] for k in range(len(held))], self.dim, self.dtype
            )
        return U, V
