"""LP-GCN's client-side party program for a shard of users, and the types shared with the relay.

See :mod:`fedgraphrec.protocols.lpgcn.distributed` for the rounds and the deliberate differences
from the in-process engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto import (
    ClientKeyPair,
    ItemTokenizer,
    PublicKey,
    SharedKey,
    open_sealed,
    seal,
    unwrap_key,
    wrap_key,
)
from fedgraphrec.models.propagation import pair_weights, torch_csr
from fedgraphrec.protocols.common import TOKEN_BYTES, layer_mean, local_bpr
from fedgraphrec.protocols.lpgcn.roles import CLIENT, CONV_CLIENT
from fedgraphrec.protocols.lpgcn.setup import verification_aad
from fedgraphrec.runtime.codec import decode_tensor, encode_tensor
from fedgraphrec.runtime.rows import decode_rows, encode_rows
from fedgraphrec.runtime.sealing import Binding, GroupChannel, multicast, party_names
from fedgraphrec.seeding import numpy_rng

__all__ = [
    "DTYPES",
    "LostNodeError",
    "Msg",
    "ShardClient",
    "ShardSettings",
    "ShardSource",
    "Transport",
    "pack_blobs",
    "rounds_per_minibatch",
    "unpack_blobs",
]

Msg = tuple[dict[str, Any], dict[str, np.ndarray]]
"""A message: scalar fields and named NumPy arrays (binary payloads as ``uint8`` matrices)."""

DTYPES = {"float32": torch.float32, "float64": torch.float64}
_ANY_CONV = multicast(CONV_CLIENT)


def _owner_of(token: bytes) -> str:
    """The receiver bound into an item-gradient message: whichever convolution-client owns the item."""
    return f"{CONV_CLIENT}-of:{token.hex()}"


def rounds_per_minibatch(n_layers: int) -> int:
    """Rounds of one minibatch: ``L`` forward, loss, aggregate, ``L`` backward (the last updates)."""
    return 2 * n_layers + 2


class LostNodeError(RuntimeError):
    """A node did not answer a round; LP-GCN cannot continue without its users (no dropout recovery)."""


class Transport(Protocol):
    """One round: ``requests`` to nodes, their replies by node id (raises :class:`LostNodeError`)."""

    def round(self, op: str, requests: Mapping[int, Msg]) -> dict[int, Msg]:
        """Send every request, return every reply."""
        ...


@dataclass(frozen=True)
class ShardSettings:
    """What every party knows about the run (public hyper-parameters).

    Raises:
        ValueError: naming the parameter, if one is out of range.
    """

    n_layers: int
    dim: int
    dtype: str
    lr: float
    reg: float
    alpha: int
    seed: int
    n_items: int

    def __post_init__(self) -> None:
        if self.n_layers < 1:
            raise ValueError(
                f"n_layers: LP-GCN on separate nodes needs at least one layer, got {self.n_layers}"
            )
        if self.dim < 1:
            raise ValueError(f"dim must be positive, got {self.dim}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {self.dtype!r}")
        if self.alpha < 0:
            raise ValueError(f"alpha (virtual items per client) must be >= 0, got {self.alpha}")
        if self.lr <= 0 or self.reg < 0:
            raise ValueError(f"lr must be > 0 and reg >= 0, got lr={self.lr}, reg={self.reg}")
        if self.n_items < 1:
            raise ValueError(f"n_items must be positive, got {self.n_items}")

    @property
    def torch_dtype(self) -> torch.dtype:
        """The embeddings' torch dtype."""
        return DTYPES[self.dtype]


class ShardSource(Protocol):
    """What a node knows from outside the protocol: its users' data and their initial rows."""

    def real_items(self, users: np.ndarray) -> sp.csr_matrix:
        """Binary rows (training items) of ``users``, shape ``(len(users), n_items)``."""
        ...

    def initial_rows(self, users: np.ndarray, items: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer-0 rows of ``users`` and of ``items`` (the run's initial tables, drawn once)."""
        ...


def pack_blobs(blobs: Sequence[bytes], width: int) -> np.ndarray:
    """Equal-length byte strings as a ``(k, width)`` ``uint8`` matrix."""
    if not blobs:
        return np.zeros((0, width), dtype=np.uint8)
    return np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), -1).copy()


def unpack_blobs(blob: np.ndarray) -> list[bytes]:
    """The rows of a ``uint8`` matrix as byte strings (inverse of :func:`pack_blobs`)."""
    return [bytes(r) for r in np.asarray(blob, dtype=np.uint8)]


def _spmm(
    row: np.ndarray, col: np.ndarray, val: np.ndarray, n_rows: int, dense: torch.Tensor
) -> torch.Tensor:
    r""":math:`A\,X` for the shard's part ``A`` of the normalised graph (pairs ``row``/``col``, weights).

    The same CSR kernel as the centralized propagation (:func:`~.propagation.torch_csr`).
    """
    a = sp.csr_matrix((val, (row, col)), shape=(n_rows, dense.shape[0]))
    return torch_csr(a, dense.dtype) @ dense


class ShardClient:
    """The client program of one node: every user it hosts, as one shard (module docstring).

    Args:
        settings: the run's public hyper-parameters.
        state: the node's persistent state (read and updated in place).
        source: the users' data and initial rows (needed by ``keys`` and ``init`` only).
    """

    def __init__(
        self, settings: ShardSettings, state: dict[str, np.ndarray], source: ShardSource | None
    ) -> None:
        self.s = settings
        self.st = state
        self.source = source
        self.dtype = settings.torch_dtype

    # ------------------------------------------------------------------ helpers
    def handle(self, op: str, fields: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Msg:
        """Answer one request of round ``op``."""
        method: Callable[[Mapping[str, Any], Mapping[str, np.ndarray]], Msg] | None = getattr(
            self, f"_op_{op}", None
        )
        if method is None:
            raise ValueError(f"op: unknown LP-GCN round {op!r}")
        return method(fields, arrays)

    def _t(self, name: str) -> torch.Tensor:
        return torch.from_numpy(np.array(self.st[name], copy=True))

    def _put(self, name: str, value: torch.Tensor | np.ndarray) -> None:
        self.st[name] = (
            value.detach().numpy().copy() if isinstance(value, torch.Tensor) else np.asarray(value)
        )

    @property
    def users(self) -> np.ndarray:
        """The global ids of the users this node hosts (sorted)."""
        return self.st["users"]

    def _key(self) -> SharedKey:
        if "S" not in self.st:
            raise RuntimeError("this node has no shared key yet (the 'tokens' round has not run)")
        return SharedKey.from_bytes(bytes(self.st["S"]))

    def _channel(self) -> GroupChannel:
        """AES-GCM under per-step sub-keys of S, AD bound to phase, step, sender and receiver."""
        return GroupChannel(self._key(), "lpgcn")

    def _seal(
        self, phase: str, step: int, plain: list[bytes], senders: list[str], to: list[str]
    ) -> list[bytes]:
        b = Binding("lpgcn", phase, step)
        return self._channel().seal(b, plain, b.aads(senders, to))

    def _open(
        self, phase: str, step: int, blobs: list[bytes], senders: list[str], to: list[str]
    ) -> list[bytes]:
        b = Binding("lpgcn", phase, step)
        return self._channel().open(b, blobs, b.aads(senders, to), senders, to)

    def _held(self, k: int) -> np.ndarray:
        st = self.st
        real = st["real_idx"][st["real_ptr"][k] : st["real_ptr"][k + 1]]
        virt = st["virt_idx"][st["virt_ptr"][k] : st["virt_ptr"][k + 1]]
        return np.union1d(real, virt)

    def _seal_rows(self, rows: torch.Tensor, kind: str, t: int, layer: int, ids: np.ndarray) -> np.ndarray:
        names = party_names(CLIENT, ids.tolist())
        sealed = self._seal(f"{kind}/l={layer}", t, encode_rows(rows), names, [_ANY_CONV] * len(names))
        width = len(sealed[0]) if sealed else 0
        return pack_blobs(sealed, width)

    def _open_rows(self, blob: np.ndarray, kind: str, t: int, layer: int, ids: np.ndarray) -> torch.Tensor:
        if not len(ids):
            return torch.zeros((0, self.s.dim), dtype=self.dtype)
        names = party_names(CLIENT, ids.tolist())
        plain = self._open(f"{kind}/l={layer}", t, unpack_blobs(blob), names, [_ANY_CONV] * len(names))
        return decode_rows(plain, self.s.dim, self.dtype).clone()

    # ------------------------------------------------------------------ set-up (Algorithm 2, verification)
    def _op_keys(self, fields: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Msg:
        """Key pairs of the users and their virtual items (Alg. 2 lines 1–4, 8–11)."""
        if self.source is None:
            raise RuntimeError("the 'keys' round needs the node's data source")
        users = np.asarray(arrays["users"], dtype=np.int64)
        real = sp.csr_matrix(self.source.real_items(users))
        real.sort_indices()
        m = self.s.n_items
        if real.shape != (len(users), m):
            raise ValueError(f"real_items returned shape {real.shape}, expected {(len(users), m)}")
        virt: list[np.ndarray] = []
        for k, u in enumerate(users):
            mine = real.indices[real.indptr[k] : real.indptr[k + 1]]
            candidates = np.setdiff1d(np.arange(m), mine)
            rng = numpy_rng(self.s.seed, "lpgcn", "virtual", int(u))
            take = min(self.s.alpha, len(candidates))
            virt.append(np.sort(rng.choice(candidates, size=take, replace=False)) if take else candidates[:0])
        pairs = [ClientKeyPair.generate() for _ in users]
        st = self.st
        st.clear()
        st["users"] = users
        st["real_ptr"] = real.indptr.astype(np.int64)
        st["real_idx"] = real.indices.astype(np.int64)
        st["virt_ptr"] = np.concatenate([[0], np.cumsum([len(v) for v in virt])]).astype(np.int64)
        st["virt_idx"] = np.concatenate([np.zeros(0, np.int64), *virt]).astype(np.int64)
        st["priv"] = pack_blobs([p.private_bytes() for p in pairs], 32)
        return {}, {"pub": pack_blobs([p.public.to_bytes() for p in pairs], 32)}

    def _op_wrap(self, fields: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Msg:
        """The key-client draws :math:`S` and wraps it for every public key (Alg. 2 line 6)."""
        key_client = int(fields["key_client"])
        if key_client not in set(self.users.tolist()):
            raise ValueError(f"key_client {key_client} is not hosted on this node")
        shared = SharedKey.generate()
        roster = unpack_blobs(arrays["roster"])
        wrapped = [wrap_key(shared.to_bytes(), PublicKey.from_bytes(pk)) for pk in roster]
        return {}, {"wrapped": pack_blobs(wrapped, len(wrapped[0]))}

    def _op_tokens(self, fields: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Msg:
        r"""Users unwrap :math:`S`; upload held items' tokens and :math:`S(|\mathcal I_u|)` (lines 7–14)."""
        st = self.st
        keys = {
            unwrap_key(blob, ClientKeyPair.from_private_bytes(bytes(priv)))
            for blob, priv in zip(unpack_blobs(arrays["wrapped"]), st["priv"], strict=True)
        }
        if len(keys) != 1:
            raise RuntimeError("the users of this node unwrapped different shared keys")
        st["S"] = np.frombuffer(keys.pop(), dtype=np.uint8).copy()
        tokenizer = ItemTokenizer(self._key())
        known = np.unique(np.concatenate([st["real_idx"], st["virt_idx"]]))
        st["known"] = known
        st["known_tok"] = pack_blobs(tokenizer.tokens(known), TOKEN_BYTES)
        tok_of = dict(zip(known.tolist(), unpack_blobs(st["known_tok"]), strict=True))
        uploads: list[bytes] = []
        counts = []
        for k, u in enumerate(self.users):
            held = self._held(k)
            order = numpy_rng(self.s.seed, "lpgcn", "upload-order", int(u)).permutation(len(held))
            uploads.extend(tok_of[int(i)] for i in held[order])
            counts.append(len(held))
        degrees = np.diff(st["real_ptr"]).astype("<i8")
        names = party_names(CLIENT, self.users.tolist())
        sealed = self._seal(
            "setup/degree",
            -1,
            [int(d).to_bytes(8, "little") for d in degrees],
            names,
            [_ANY_CONV] * len(names),
        )
        return {}, {
            "tok": pack_blobs(uploads, TOKEN_BYTES),
            "count": np.asarray(counts, dtype=np.int64),
            "deg": pack_blobs(sealed, len(sealed[0]) if sealed else 0),
        }

    def _known_index(self, tokens: np.ndarray) -> np.ndarray:
        pos = {tok: j for j, tok in enumerate(unpack_blobs(self.st["known_tok"]))}
        try:
            return np.asarray([pos[tok] for tok in unpack_blobs(tokens)], dtype=np.int64)
        except KeyError:
            raise ValueError("the server named an item token that no user of this node holds") from None

    def _local(self, ids: np.ndarray) -> np.ndarray:
        users = self.users
        k = np.searchsorted(users, ids)
        if len(ids) and (k.max() >= len(users) or not np.array_equal(users[k], ids)):
            raise ValueError("the server named a user that this node does not host")
        return k.astype(np.int64)

    def _op_verify(self, fields: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Msg:
        """Accept the assigned convolution-items; answer "is it virtual for you?" sealed to the asker."""
        st = self.st
        conv_known = self._known_index(arrays["a_tok"])
        owner = self._local(np.asarray(arrays["a_user"], dtype=np.int64))
        items = st["known"][conv_known]
        for k, i in zip(owner, items, strict=True):
            if i not in self._held(int(k)):
                raise ValueError(
                    f"the server assigned item token to user {int(self.users[k])}, who does not hold it"
                )
        st["conv_items"], st["conv_owner"], st["conv_known"] = items, owner, conv_known
        st["conv_tok"] = np.asarray(arrays["a_tok"])
        q_known = self._known_index(arrays["q_tok"])
        q_user = self._local(np.asarray(arrays["q_user"], dtype=np.int64))
        answers = []
        questions = unpack_blobs(arrays["q_tok"])
        askers = np.asarray(arrays["q_asker"], dtype=np.int64)
        for k, j, pk, c, q in zip(
            q_user, q_known, unpack_blobs(arrays["q_pk"]), askers, questions, strict=True
        ):
            item = int(st["known"][j])
            real = st["real_idx"][st["real_ptr"][k] : st["real_ptr"][k + 1]]
            if item not in self._held(int(k)):
                raise ValueError(f"the server asked user {int(self.users[k])} about an item it does not hold")
            aad = verification_aad(int(self.users[k]), int(c), q)
            answers.append(seal(bytes([int(item not in real)]), PublicKey.from_bytes(pk), aad=aad))
        return {}, {"ans": pack_blobs(answers, len(answers[0]) if answers else 0)}

    def _op_init(self, fields: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Msg:
        """Learn real neighbours and degrees, initialise owned rows, publish layer 0 (Alg. 2 l. 16–24)."""
        if self.source is None:
            raise RuntimeError("the 'init' round needs the node's data source")
        st, users = self.st, self.users
        s, c = len(users), len(st["conv_items"])
        r_pos = np.asarray(arrays["r_pos"], dtype=np.int64)
        r_holder = np.asarray(arrays["r_holder"], dtype=np.int64)
        conv_tok = unpack_blobs(st["conv_tok"])
        flags = np.asarray(
            [
                open_sealed(
                    blob,
                    ClientKeyPair.from_private_bytes(bytes(st["priv"][st["conv_owner"][p]])),
                    aad=verification_aad(int(h), int(users[st["conv_owner"][p]]), conv_tok[p]),
                )[0]
                for blob, p, h in zip(unpack_blobs(arrays["r_ans"]), r_pos, r_holder, strict=True)
            ],
            dtype=np.int64,
        )
        nb_users = np.asarray(arrays["nb_users"], dtype=np.int64)
        nb_deg = np.asarray(
            [
                int.from_bytes(b, "little")
                for b in self._open(
                    "setup/degree",
                    -1,
                    unpack_blobs(arrays["nb_deg"]),
                    party_names(CLIENT, nb_users.tolist()),
                    [_ANY_CONV] * len(nb_users),
                )
            ],
            dtype=np.int64,
        )
        own_deg = np.diff(st["real_ptr"])
        # real holders (conv position, Utab column, degree): verified others, plus the owner if real for it
        real_pos = r_pos[flags == 0]
        real_holder = r_holder[flags == 0]
        on_node = np.isin(real_holder, users)
        col = np.where(on_node, np.searchsorted(users, real_holder), 0)
        deg = np.where(on_node, own_deg[np.minimum(col, s - 1)], 0)
        off = ~on_node
        k_nb = np.searchsorted(nb_users, real_holder[off])
        if off.any() and (
            k_nb.max() >= len(nb_users) or not np.array_equal(nb_users[k_nb], real_holder[off])
        ):
            raise ValueError("a verified holder's degree did not reach its convolution-client")
        col[off] = s + k_nb
        deg[off] = nb_deg[k_nb]
        own_real = np.asarray(
            [
                st["conv_items"][p]
                in st["real_idx"][
                    st["real_ptr"][st["conv_owner"][p]] : st["real_ptr"][st["conv_owner"][p] + 1]
                ]
                for p in range(c)
            ],
            dtype=bool,
        )
        self_pos = np.flatnonzero(own_real)
        a_row = np.concatenate([real_pos, self_pos]).astype(np.int64)
        a_col = np.concatenate([col, st["conv_owner"][self_pos]]).astype(np.int64)
        a_deg_u = np.concatenate([deg, own_deg[st["conv_owner"][self_pos]]])
        item_deg = np.bincount(a_row, minlength=c).astype(np.float64)
        st["a_row"], st["a_col"] = a_row, a_col
        st["a_val"] = pair_weights(a_deg_u, item_deg[a_row]) if len(a_row) else np.zeros(0)
        st["nb_users"] = nb_users
        known = st["known"]
        sync_known = self._known_index(arrays["sync_tok"])
        if len(np.intersect1d(sync_known, st["conv_known"])) or len(sync_known) + c != len(known):
            raise ValueError(
                "the server's synchronisation list does not complement this node's convolution-items"
            )
        st["sync_known"] = sync_known
        deg_known = np.full(len(known), np.nan)
        deg_known[st["conv_known"]] = item_deg
        st["deg_known"] = deg_known
        U0, V0 = self.source.initial_rows(users, st["conv_items"])
        self._put("U0", U0.to(self.dtype))
        self._put("V0", V0.to(self.dtype))
        for name, like in (("Um", "U0"), ("Uv", "U0"), ("Vm", "V0"), ("Vv", "V0")):
            st[name] = np.zeros_like(st[like])
        st["step"] = np.zeros((), dtype=np.int64)
        del st["priv"]  # the key pairs served set-up only
        return {}, {
            "conv": st["V0"],
            "conv_deg": item_deg,
            "ct": self._seal_rows(self._t("U0"), "u-emb", 0, 0, users),
        }

    # ------------------------------------------------------------------ Algorithm 4 (forward)
    def _user_weights(self) -> None:
        """:math:`c_{ui}` of every user's real items, once all their items' degrees are known."""
        st = self.st
        known = st["known"]
        deg_u = np.diff(st["real_ptr"])
        rows = np.repeat(np.arange(len(self.users)), deg_u)
        cols = np.searchsorted(known, st["real_idx"])
        st["r_row"], st["r_col"] = rows.astype(np.int64), cols.astype(np.int64)
        st["r_val"] = pair_weights(deg_u[rows], st["deg_known"][cols]) if len(rows) else np.zeros(0)

    def _apply_r(self, dense: torch.Tensor) -> torch.Tensor:
        st = self.st
        return _spmm(st["r_row"], st["r_col"], st["r_val"], len(self.users), dense)

    def _apply_a(self, dense: torch.Tensor) -> torch.Tensor:
        st = self.st
        return _spmm(st["a_row"], st["a_col"], st["a_val"], len(st["conv_items"]), dense)

    def _op_forward(self, fields: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Msg:
        """Layer k: users by Eq. 7 from their items' layer k-1, convolution-items by Eq. 8."""
        st, L = self.st, self.s.n_layers
        t, k = int(fields["t"]), int(fields["k"])
        s, nk, d = len(self.users), len(st["known"]), self.s.dim
        out: dict[str, np.ndarray] = {}
        if "deg" in arrays:
            st["deg_known"][st["sync_known"]] = np.asarray(arrays["deg"], dtype=np.float64)
            self._user_weights()
        if "r_val" not in st:
            raise RuntimeError("item degrees never reached this node")
        if k == 1:
            Ul = np.zeros((L + 1, s, d), dtype=st["U0"].dtype)
            Vk = np.zeros((L + 1, nk, d), dtype=st["U0"].dtype)
            Ul[0] = st["U0"]
            Vk[0][st["conv_known"]] = st["V0"]
            st["Ul"], st["Vk"] = Ul, Vk
            if "b_user" in arrays:  # the minibatch's triples; the negatives are requested by token
                st["b_user"] = self._local(np.asarray(arrays["b_user"], dtype=np.int64))
                st["b_pos"] = np.asarray(arrays["b_pos"], dtype=np.int64)
                st["b_neg"] = np.asarray(arrays["b_neg"], dtype=np.int64)
                st["B"] = np.asarray(int(fields["B"]))
                negs = np.unique(st["b_neg"])
                st["neg_items"] = negs
                out["neg_tok"] = pack_blobs(ItemTokenizer(self._key()).tokens(negs), TOKEN_BYTES)
        Ul, Vk = st["Ul"], st["Vk"]
        Vk[k - 1][st["sync_known"]] = np.asarray(arrays["rows"], dtype=Vk.dtype)
        u_next = self._apply_r(torch.from_numpy(Vk[k - 1]))
        nb = self._open_rows(arrays["nb_ct"], "u-emb", t, k - 1, st["nb_users"])
        v_next = self._apply_a(torch.cat([torch.from_numpy(Ul[k - 1]), nb]))
        Ul[k] = u_next.numpy()
        Vk[k][st["conv_known"]] = v_next.numpy()
        out["conv"] = v_next.numpy()
        if k < L:
            out["ct"] = self._seal_rows(u_next, "u-emb", t, k, self.users)
        elif fields.get("final"):  # prediction: the final embeddings (exported for evaluation)
            U = layer_mean([torch.from_numpy(Ul[j]) for j in range(L + 1)])
            conv = st["conv_known"]
            V = layer_mean([torch.from_numpy(Vk[j][conv]) for j in range(L + 1)])
            out.update(users=self.users, U=U.numpy(), items=st["conv_items"], V=V.numpy())
            out.update(U0=st["U0"], V0=st["V0"])
        return {}, out

    # ------------------------------------------------------------------ Algorithms 5 and 9 (loss)
    def _op_loss(self, fields: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Msg:
        """Local BPR of the node's triples; direct item gradients to their owners under :math:`S`."""
        st, L = self.st, self.s.n_layers
        t = int(fields["t"])
        Ul, Vk = st["Ul"], st["Vk"]
        Vk[L][st["sync_known"]] = np.asarray(arrays["rows"], dtype=Vk.dtype)
        known, negs = st["known"], st["neg_items"]
        extra = np.setdiff1d(negs, known)
        items_all = np.concatenate([known, extra])
        order = np.argsort(items_all, kind="stable")
        neg_rows = np.asarray(arrays["neg_rows"], dtype=Vk.dtype)
        extra_rows = neg_rows[:, np.searchsorted(negs, extra)]
        layers = [torch.from_numpy(np.concatenate([Vk[j], extra_rows[j]])) for j in range(L + 1)]
        us = [torch.from_numpy(Ul[j]) for j in range(L + 1)]
        U0, V0 = us[0].clone(), layers[0].clone()
        U, V = layer_mean(us), layer_mean(layers)

        def local_items(ids: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(order[np.searchsorted(items_all[order], ids)])

        users = torch.from_numpy(st["b_user"])
        loc = local_bpr(
            U, V, U0, V0, users, local_items(st["b_pos"]), local_items(st["b_neg"]), self.s.reg, int(st["B"])
        )
        c = len(st["conv_items"])
        conv_of_local = np.full(len(items_all), -1, dtype=np.int64)
        conv_of_local[st["conv_known"]] = np.arange(c)
        item_loc = loc.items.numpy()
        conv_pos = conv_of_local[item_loc]
        own = np.zeros(len(item_loc), dtype=bool)
        if c:
            own = (conv_pos >= 0) & (st["conv_owner"][np.maximum(conv_pos, 0)] == loc.item_senders)
        dV = torch.zeros((c, self.s.dim), dtype=self.dtype)
        rV = torch.zeros_like(dV)
        if own.any():
            ix, pos = torch.from_numpy(np.flatnonzero(own)), torch.from_numpy(conv_pos[own])
            dV.index_add_(0, pos, loc.d_rows[ix])
            rV.index_add_(0, pos, loc.r_rows[ix])
        remote = np.flatnonzero(~own)
        # one message per (sender, item): the sender's rows summed (its own arithmetic)
        key = loc.item_senders[remote].astype(np.int64) * len(items_all) + item_loc[remote]
        uniq, inv = np.unique(key, return_inverse=True)
        d_sum = torch.zeros((len(uniq), self.s.dim), dtype=self.dtype)
        r_sum = torch.zeros_like(d_sum)
        if len(remote):
            d_sum.index_add_(0, torch.from_numpy(inv), loc.d_rows[torch.from_numpy(remote)])
            r_sum.index_add_(0, torch.from_numpy(inv), loc.r_rows[torch.from_numpy(remote)])
        senders = self.users[uniq // len(items_all)]
        tokens = ItemTokenizer(self._key()).tokens(items_all[uniq % len(items_all)])
        bodies = [encode_tensor(torch.stack([d_sum[j], r_sum[j]])) for j in range(len(uniq))]
        sealed = self._seal(
            "loss/item-gradients",
            t,
            bodies,
            party_names(CLIENT, senders.tolist()),
            [_owner_of(k) for k in tokens],
        )
        self._put("dU", loc.dU)
        self._put("rU", loc.rU)
        self._put("dV", dV)
        self._put("rV", rV)
        for name in ("Ul", "Vk", "b_user", "b_pos", "b_neg", "neg_items"):
            del st[name]  # LightGCN's backward pass needs no embeddings
        return {"bpr": float(loc.bpr), "reg": float(loc.reg)}, {
            "g_user": senders.astype(np.int64),
            "g_tok": pack_blobs(tokens, TOKEN_BYTES),
            "g_ct": pack_blobs(sealed, len(sealed[0]) if sealed else 0),
        }

    # ------------------------------------------------------------------ Algorithm 6 (backward) and update
    def _op_aggregate(self, fields: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Msg:
        r"""Convolution-items sum their direct gradients; :math:`G^{(L)}` of items and users out."""
        st, L = self.st, self.s.n_layers
        t = int(fields["t"])
        dV, rV = self._t("dV"), self._t("rV")
        g_user = np.asarray(arrays["g_user"], dtype=np.int64)
        if len(g_user):
            tokens = unpack_blobs(arrays["g_tok"])
            bodies = self._open(
                "loss/item-gradients",
                t,
                unpack_blobs(arrays["g_ct"]),
                party_names(CLIENT, g_user.tolist()),
                [_owner_of(k) for k in tokens],
            )
            rows = torch.stack([decode_tensor(b) for b in bodies]).to(self.dtype)
            conv_of_known = np.full(len(st["known"]), -1, dtype=np.int64)
            conv_of_known[st["conv_known"]] = np.arange(len(st["conv_items"]))
            pos = conv_of_known[self._known_index(arrays["g_tok"])]
            if (pos < 0).any():
                raise ValueError("the server routed an item gradient to a node that does not own the item")
            dV.index_add_(0, torch.from_numpy(pos), rows[:, 0])
            rV.index_add_(0, torch.from_numpy(pos), rows[:, 1])
        w = 1.0 / (L + 1)
        wdU, wdV = w * self._t("dU"), w * dV
        self._put("wdU", wdU)
        self._put("wdV", wdV)
        self._put("rV", rV)
        self._put("gU", wdU)
        self._put("gV", wdV)
        del st["dU"], st["dV"]
        return {}, {"conv": wdV.numpy(), "ct": self._seal_rows(wdU, "u-grad", t, L, self.users)}

    def _op_backward(self, fields: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Msg:
        r"""Layer k of the adjoint recursion (spec §2.4); at k = 0 every owner runs Adam."""
        st = self.st
        t, k = int(fields["t"]), int(fields["k"])
        g_known = torch.zeros((len(st["known"]), self.s.dim), dtype=self.dtype)
        g_known[torch.from_numpy(st["conv_known"])] = self._t("gV")
        g_known[torch.from_numpy(st["sync_known"])] = torch.from_numpy(np.asarray(arrays["rows"])).to(
            self.dtype
        )
        nb = self._open_rows(arrays["nb_ct"], "u-grad", t, k + 1, st["nb_users"])
        gU = self._t("wdU") + self._apply_r(g_known)  # Eqs. 18, 21, 22, 25, 26
        gV = self._t("wdV") + self._apply_a(torch.cat([self._t("gU"), nb]))  # Eqs. 19, 20, 24, 27
        if k > 0:
            self._put("gU", gU)
            self._put("gV", gV)
            return {}, {"conv": gV.numpy(), "ct": self._seal_rows(gU, "u-grad", t, k, self.users)}
        gU = gU + self._t("rU")
        gV = gV + self._t("rV")
        self._adam(gU, gV)
        for name in ("wdU", "wdV", "rU", "rV", "gU", "gV"):
            del st[name]
        return {}, {"conv": st["V0"], "ct": self._seal_rows(self._t("U0"), "u-emb", t + 1, 0, self.users)}

    def _adam(self, gU: torch.Tensor, gV: torch.Tensor) -> None:
        """PyTorch's Adam on the owned rows (users', convolution-items'), stepping every row."""
        st = self.st
        U0 = torch.nn.Parameter(self._t("U0"))
        V0 = torch.nn.Parameter(self._t("V0"))
        opt = torch.optim.Adam([U0, V0], lr=self.s.lr)
        step = float(st["step"])
        if step > 0:
            scalar = torch.tensor(step, dtype=torch.float32)
            opt.state[U0] = {"step": scalar.clone(), "exp_avg": self._t("Um"), "exp_avg_sq": self._t("Uv")}
            opt.state[V0] = {"step": scalar.clone(), "exp_avg": self._t("Vm"), "exp_avg_sq": self._t("Vv")}
        U0.grad, V0.grad = gU, gV
        opt.step()
        self._put("U0", U0)
        self._put("V0", V0)
        for p, (m, v) in ((U0, ("Um", "Uv")), (V0, ("Vm", "Vv"))):
            self._put(m, opt.state[p]["exp_avg"])
            self._put(v, opt.state[p]["exp_avg_sq"])
        st["step"] = np.asarray(int(step) + 1)
