"""FedPerGNN's client program: a shard of users, each with its embedding, its items and its local GNN.

A user never sends an item id in the clear to the third party (tokens under :math:`S`), and
uploads to the server only its padded, clipped, noised item updates (the package docstring
describes the mechanisms; ``roles.py`` lists the stages).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.crypto.group_key import client_keys, unwrap_all, wrap_for_all
from fedgraphrec.crypto.keys import SharedKey
from fedgraphrec.crypto.tokens import TOKEN_BYTES, ItemTokenizer
from fedgraphrec.protocols.base import ClientProgram
from fedgraphrec.protocols.baselines.fedpergnn import expect as E
from fedgraphrec.protocols.baselines.fedpergnn import roles as R
from fedgraphrec.protocols.baselines.fedpergnn.keys import KEY_HOLDER_ID
from fedgraphrec.protocols.baselines.fedpergnn.local import local_train, protected_rows
from fedgraphrec.protocols.baselines.fedpergnn.settings import FedPerGNNSettings
from fedgraphrec.protocols.baselines.shard_sampling import ShardRound, sample_shard
from fedgraphrec.protocols.secagg.upload import SparseUpload, flat_entries, plain_sizes
from fedgraphrec.runtime.endpoint import require_senders
from fedgraphrec.runtime.expect import Expectation, StageFlow
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part
from fedgraphrec.runtime.state import SECRET

__all__ = ["FedPerGNNClient", "FedPerGNNState"]


@dataclass
class FedPerGNNState:
    """A node's state between messages.

    Attributes:
        user: the shard's user embeddings :math:`e_u` ``(n, d)``.
        final: the shard's local-GNN representations :math:`h_u` after ``predict``.
        key: the token key :math:`S` (``real`` mode, once agreed).
        private_keys: the shard's X25519 private keys, only between ``setup/keys`` and ``setup/unwrap``.
        round: the current round's sample, between ``train/query`` and ``train/local``.
        last_round: the last round the node trained (a round is never run twice; ``-1``: none).
    """

    user: torch.Tensor
    final: torch.Tensor = field(default_factory=lambda: torch.zeros(0))
    key: bytes | None = field(default=None, metadata=SECRET)
    private_keys: bytes | None = field(default=None, metadata=SECRET)
    round: ShardRound | None = None
    last_round: int = -1


def plain_upload(
    clients: np.ndarray, seg: np.ndarray, items: np.ndarray, rows: torch.Tensor, n_items: int
) -> Part:
    """Every user's rows in the clear, laid out as the secure-sum baseline's (``protocols.secagg``).

    The input vector has ``N·d`` item coordinates and ``N`` counts (1 per uploaded item); each user
    sends its nonzero entries as rows ``(flat index, value)``, booked as a 4-byte index and 4-byte
    floats per row of the vector (``kind="plain-upload"``, what ``upload_inference`` reads).
    """
    d = int(rows.shape[1])
    upload = SparseUpload(clients, n_items * d + n_items)
    seg_t, items_t = torch.from_numpy(seg), torch.from_numpy(items)
    upload.add(seg_t, items_t * d, rows)
    upload.add(seg_t, n_items * d + items_t, torch.ones(len(seg), 1, dtype=torch.float64))
    keep = np.ones(len(clients), dtype=bool)
    pos, idx, val = flat_entries(upload, keep)
    value = np.stack([idx.astype(np.float64), val], axis=1)
    counts = np.bincount(pos, minlength=len(clients)).astype(np.int64)
    part = Part(R.PH_UPLOAD, R.K_UPLOAD, R.CLIENT, R.SERVER, value, senders=clients, counts=counts)
    return part.with_sizes(plain_sizes(upload))


class FedPerGNNClient(ClientProgram[FedPerGNNState]):
    """The client role for a shard of users (module docstring)."""

    settings: FedPerGNNSettings

    def init_state(self) -> None:
        """The shard's training rows and its users' initial embeddings (its own rows only)."""
        self.rows = self.own_train("a FedPerGNN node needs its users' interactions and initial embeddings")
        self.n_items = int(self.rows.shape[1])
        self.state = FedPerGNNState(user=self.initial_rows("user_emb"))

    def group_key(self) -> SharedKey | None:
        """The token key :math:`S` (``None`` in ``accounted`` mode)."""
        return None if self.state.key is None else SharedKey.from_bytes(self.state.key)

    # ------------------------------------------------------------------ what the node accepts
    def stage_flow(self) -> StageFlow:
        """The node's stage order (:func:`.expect.stage_flow`)."""
        return E.stage_flow(self.settings.local_graph, KEY_HOLDER_ID in self.clients)

    def expect(self, stage: str) -> Expectation:
        """The parts the node expects in ``stage`` (:func:`.expect.expectation`)."""
        return E.expectation(stage, self.settings.local_graph, self.state.user)

    # ------------------------------------------------------------------ set-up
    def stage_setup_keys(self, step: int, request: Message) -> Message:
        """Every user's public key, up."""
        self.state.private_keys, public = client_keys(len(self.clients), self.settings.real)
        part = Part(
            R.PH_PUBLIC_KEYS, R.K_PUBLIC_KEY, R.CLIENT, R.SERVER, public, shape="blobs", senders=self.clients
        )
        return Message({R.P_PUBLIC_KEYS: part})

    def stage_setup_wrap(self, step: int, request: Message) -> Message:
        """The key holder draws :math:`S` and wraps it for every user."""
        if KEY_HOLDER_ID not in self.clients:
            raise ValueError("setup/wrap: this node does not host the key holder")
        n_users = int(self.node_data("setup/wrap: the key holder needs the run's size").train.shape[0])
        bundle = E.check_public_keys(request[R.P_PUBLIC_KEYS], n_users)
        raw, wrapped = wrap_for_all(bundle, self.settings.real)
        self.state.key = raw or None
        senders = np.full(len(wrapped), KEY_HOLDER_ID)
        part = Part(
            R.PH_WRAPPED_KEY, R.K_WRAPPED_KEY, R.KEY_HOLDER, R.SERVER, wrapped, shape="blobs", senders=senders
        )
        return Message({R.P_WRAPPED: part})

    def stage_setup_unwrap(self, step: int, request: Message) -> Message:
        """Every user unwraps :math:`S`; the private keys are dropped."""
        part = request[R.P_WRAPPED]
        require_senders(part, np.full(len(self.clients), KEY_HOLDER_ID), "wrapped keys from the key holder")
        if part.receivers is None or not np.array_equal(part.receivers, self.clients):
            raise ValueError(f"{part.phase}: expected one wrapped key for each user of this node")
        key = unwrap_all(
            list(part.value),
            self.state.private_keys or b"",
            self.settings.real,
            phase=part.phase,
            clients=self.clients.tolist(),
        )
        if self.state.key is not None and key != self.state.key:
            raise ValueError(f"{part.phase}: the key holder unwrapped a key other than the one it drew")
        self.state.key, self.state.private_keys = key, None
        return Message()

    def _tokens(self) -> list[bytes]:
        """Each user's item tokens (its items in order, 16 bytes each)."""
        items = self.rows.indices.astype(np.int64)
        if self.state.key is not None:
            flat = b"".join(ItemTokenizer(SharedKey.from_bytes(self.state.key)).tokens(items))
        else:  # accounted: the item ids stand in for tokens, with the tokens' size
            flat = np.stack([items, np.zeros_like(items)], axis=1).astype("<u8").tobytes()
        ptr = self.rows.indptr * TOKEN_BYTES
        return [flat[a:b] for a, b in zip(ptr[:-1].tolist(), ptr[1:].tolist(), strict=True)]

    def stage_setup_expand(self, step: int, request: Message) -> Message:
        """Tokens and embedding to the third party (when expanding); who has items, to the server."""
        active = self.clients[np.diff(self.rows.indptr) > 0]
        reply = Message(fields={R.F_ACTIVE: active.tolist()})
        if self.settings.local_graph:
            user = self.state.user
            blobs = [t + user[k].numpy().tobytes() for k, t in enumerate(self._tokens())]
            part = Part(
                R.PH_EXPAND_UPLOAD, R.K_TOKENS, R.CLIENT, R.THIRD_PARTY, blobs, shape="blobs",
                protection="pseudonymous", senders=self.clients,
                meta={"dim": int(user.shape[1]), "dtype": str(user.numpy().dtype)},
            )  # fmt: skip
            reply.add(R.P_EXPAND, part)
        return reply

    # ------------------------------------------------------------------ a round
    def stage_train_query(self, step: int, request: Message) -> Message:
        """Draw negatives and local pairs; ask for the rows of the queried items."""
        s = self.settings
        ids, round_index = E.sampled_users(request, self.rows, self.clients, self.state.last_round)
        sr = sample_shard(
            self.rows, self.positions(ids), ids, round_index,
            protocol="fedpergnn", seed=s.seed, n_negatives=s.n_negatives, local_steps=s.local_steps,
            secure=s.secure_cover,
        )  # fmt: skip
        if s.local_graph:
            part = request[R.P_NEIGHBOURS]
            if part.receivers is None or not np.array_equal(part.receivers, ids):
                raise IntegrityError(f"{part.phase}: neighbours for users other than the sampled ones")
            if part.counts is None or not np.array_equal(part.counts, np.diff(sr.pos_ptr)):
                raise IntegrityError(f"{part.phase}: one neighbour row per item of each user expected")
            sr.neighbours = torch.as_tensor(part.value)
        self.state.round, self.state.last_round = sr, round_index
        seg, items = sr.queries()
        counts = np.bincount(seg, minlength=len(ids)).astype(np.int64)
        part = Part(R.PH_QUERY, R.K_QUERY, R.CLIENT, R.SERVER, items, senders=ids, counts=counts)
        return Message({R.P_QUERY: part.with_sizes(counts * 4)})

    def stage_train_local(self, step: int, request: Message) -> Message:
        """``τ`` local steps; protected item updates to the server, new embeddings to the third party."""
        s, sr = self.settings, self.state.round
        if sr is None:
            raise IntegrityError("train/local before train/query")
        seg, _ = sr.queries()
        E.check_download(request[R.P_DOWNLOAD], sr.clients, np.bincount(seg, minlength=len(sr.clients)))
        pos = torch.from_numpy(self.positions(sr.clients))
        user = self.state.user
        res = local_train(
            sr, user[pos], torch.as_tensor(request[R.P_DOWNLOAD].value),
            n_items=self.n_items, expand=s.local_graph, loss_name=s.loss, lr=s.lr, reg=s.reg,
            local_steps=s.local_steps,
        )  # fmt: skip
        seg, items, rows = protected_rows(
            res, sr.clients, self.n_items, sr.round_index, seed=s.seed, n_pseudo=s.n_pseudo,
            ldp_clip=s.ldp_clip, ldp_scale=s.ldp_scale, secure_noise=bool(s.secure_noise),
            secure_cover=s.secure_cover,
        )  # fmt: skip
        with torch.no_grad():
            user[pos] = res.user.to(user.dtype)
        reply = Message(
            {R.P_UPLOAD: plain_upload(sr.clients, seg, items, rows, self.n_items)},
            fields={R.F_LOSS: res.loss_sum},
        )
        if s.local_graph:
            d, size = int(user.shape[1]), user.element_size()
            refresh = Part(R.PH_REFRESH, R.K_REFRESH, R.CLIENT, R.THIRD_PARTY, res.user, senders=sr.clients)
            reply.add(R.P_REFRESH, refresh.with_sizes(np.full(len(sr.clients), d * size, dtype=np.int64)))
        self.state.round = None
        return reply

    # ------------------------------------------------------------------ prediction
    def stage_predict(self, step: int, request: Message) -> Message:
        r"""Every user's :math:`h_u = e_u + \operatorname{mean}_i (e_i + \bar n_{ui})`."""
        items, neigh = torch.as_tensor(request[R.P_ITEMS].value), request[R.P_NEIGHBOURS]
        if items.shape[0] != self.n_items:
            raise IntegrityError(
                f"{R.PH_PREDICT_ITEMS}: {items.shape[0]} item rows; the run has {self.n_items}"
            )
        held = np.diff(self.rows.indptr) > 0
        holders = self.clients[held]
        if neigh.receivers is None or not np.array_equal(neigh.receivers, holders):
            raise IntegrityError(f"{neigh.phase}: neighbours for users other than this node's")
        if neigh.counts is None or not np.array_equal(neigh.counts, np.diff(self.rows.indptr)[held]):
            raise IntegrityError(f"{neigh.phase}: one neighbour row per item of each user expected")
        seg = np.repeat(np.arange(len(self.clients)), np.diff(self.rows.indptr))
        rows = items[torch.from_numpy(self.rows.indices.astype(np.int64))] + torch.as_tensor(neigh.value)
        n = torch.from_numpy(np.maximum(np.diff(self.rows.indptr), 1)).to(rows.dtype)[:, None]
        user = self.state.user
        item_hat = torch.zeros_like(user).index_add_(0, torch.from_numpy(seg), rows) / n
        self.state.final = user + item_hat
        return Message()

    def prediction(self) -> tuple[np.ndarray, torch.Tensor, torch.Tensor | None]:
        """The users' :math:`h_u` (:math:`e_u` without expansion); the item table is the server's."""
        if not self.settings.local_graph:
            return self.clients, self.state.user.clone(), None
        return self.clients, self.state.final.clone(), None

    def owned_rows(self) -> dict[str, tuple[np.ndarray, torch.Tensor]]:
        """The users' embeddings."""
        return {"user_emb": (self.clients, self.state.user)}
