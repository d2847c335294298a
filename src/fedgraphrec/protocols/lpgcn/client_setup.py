r"""The client shard's set-up stages: Algorithm 2 (keys, S, tokens), verification, initial rows.

Stages, in order (the server program drives them, :mod:`.server_setup`):

1. ``setup/keys`` — key pairs, virtual items :math:`\mathcal I'_u` and upload order (Alg. 2 lines
   1-4, 8-11); public keys up.
2. ``setup/wrap`` — on the key-client's node only: draw :math:`S`, wrap it for every public key
   (X25519 key wrapping, Alg. 2 line 6).
3. ``setup/tokens`` — unwrap :math:`S` (every client checks it got the same key), upload the tokens
   :math:`S(ID_i)` of :math:`\mathcal I_u \cup \mathcal I'_u` (lines 12-14) and the degree
   :math:`|\mathcal I_u|` sealed under :math:`S` for the convolution-clients (spec §11.2).
4. ``setup/unheld`` — on the key-client's node: name the items that have no holder to the server
   (token and id), which owns them (§11.17), and seal the same list under :math:`S` for every
   client (:mod:`.unheld`; an empty list when every item has a holder).
5. ``setup/verify`` — check and keep the key-client's list of unheld items, learn the assigned
   convolution-items (Algorithm 3's result) and answer every "is this item virtual for you?"
   question, sealed to the asking convolution-client's public key and bound to both parties and
   the item's token (lines 16-18, gap G4).
6. ``setup/init`` — convolution-clients open the answers and the neighbours' degrees: real holders
   :math:`\mathcal U_{\tilde i}`, real degrees, Eq. 8's weights; owners take their initial rows.
7. ``setup/degrees`` — holders learn the real degrees of the items others convolve, hence
   :math:`c_{ui}` for Eq. 7.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto.agreement import PUBLIC_KEY_BYTES, ClientKeyPair, PublicKey
from fedgraphrec.crypto.ecies import open_sealed, seal, sealed_size, unwrap_key, wrap_key
from fedgraphrec.crypto.errors import DecryptionError, IntegrityError
from fedgraphrec.crypto.keys import SHARED_KEY_BYTES, SharedKey
from fedgraphrec.crypto.tokens import TOKEN_BYTES
from fedgraphrec.protocols.common import CLIENT, KEY_HOLDER, SERVER
from fedgraphrec.protocols.lpgcn.expect import ExpectedParts
from fedgraphrec.protocols.lpgcn.holdings import (
    TokenIndex,
    keyed,
    upload_order,
    verification_aad,
    virtual_items,
)
from fedgraphrec.protocols.lpgcn.roles import CONV_CLIENT, SETUP_INIT, SETUP_UNHELD, SETUP_WRAP
from fedgraphrec.protocols.lpgcn.unheld import read_unheld_list, unheld_list_part
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part

__all__ = ["SetupStages", "grouped"]


def grouped(owners: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values of a sorted id array and how many times each occurs."""
    ids, counts = np.unique(owners, return_counts=True)
    return ids.astype(np.int64), counts.astype(np.int64)


class SetupStages(ExpectedParts):
    """Set-up stages of the LP-GCN client shard (module docstring)."""

    def stage_setup_keys(self, step: int, request: Message) -> Message:
        """Algorithm 2 lines 1-4, 8-11: key pairs, virtual items, upload order; public keys up."""
        assert self.data is not None, "set-up needs the node's data"
        s = self.settings
        real = sp.csr_matrix(self.data.train[self.clients], dtype=np.float32)
        real.sum_duplicates()
        real.sort_indices()
        real.data[:] = 1.0
        virtual = virtual_items(real, self.clients, s.alpha, s.seed, bool(s.secure_virtual_items))
        held = sp.csr_matrix(real + virtual)
        held.sort_indices()
        ptr, idx = upload_order(held, self.clients, s.seed, bool(s.secure_virtual_items))
        rows = np.repeat(np.arange(len(self.clients)), np.diff(ptr))
        st = self.state
        st.real_ptr, st.real_idx = real.indptr.astype(np.int64), real.indices.astype(np.int64)
        st.held_ptr, st.held_idx = ptr, idx
        st.held_virtual = np.asarray(virtual[rows, idx]).ravel() > 0 if len(idx) else np.zeros(0, bool)
        st.held_owner = np.full(len(idx), -1, dtype=np.int64)
        self.remember_table_type(self.data.tables["item_emb"])
        blobs = None
        if s.real:
            pairs = [ClientKeyPair.generate() for _ in self.clients]
            st.private_keys = np.frombuffer(
                b"".join(p.private_bytes() for p in pairs), dtype=np.uint8
            ).reshape(-1, SHARED_KEY_BYTES)
            blobs = [p.public.to_bytes() for p in pairs]
        keys = Part(
            "setup/public-keys", "public_key", CLIENT, SERVER, blobs, shape="blobs", senders=self.clients
        ).with_sizes(np.full(len(self.clients), PUBLIC_KEY_BYTES))
        return Message({"public-keys": keys})

    def stage_setup_wrap(self, step: int, request: Message) -> Message:
        """Algorithm 2 line 6 (key-client only): draw :math:`S`, wrap it for every public key."""
        self.check_roster(SETUP_WRAP, request.fields)  # the key-client is here (expect.py)
        key_client, n = self.key_client(), int(request.fields["n_clients"])
        blobs = None
        sizes = np.full(n, sealed_size(SHARED_KEY_BYTES))
        if self.settings.real:
            roster = request["public-keys"].value[0]
            if len(roster) != n * PUBLIC_KEY_BYTES:
                raise ValueError(f"setup/public-keys: {len(roster)} bytes for {n} public keys")
            shared = SharedKey.generate().to_bytes()
            blobs = [
                wrap_key(shared, PublicKey.from_bytes(roster[k : k + PUBLIC_KEY_BYTES]))
                for k in range(0, len(roster), PUBLIC_KEY_BYTES)
            ]
            sizes = np.fromiter((len(b) for b in blobs), dtype=np.int64, count=n)
        wrapped = Part(
            "setup/wrapped-key", "wrapped_key", KEY_HOLDER, SERVER, blobs, shape="blobs",
            protection="asymmetric", senders=np.full(n, key_client), seal_to_role=CLIENT,
            seal_to=np.arange(n),
        ).with_sizes(sizes)  # fmt: skip
        return Message({"wrapped": wrapped})

    def stage_setup_tokens(self, step: int, request: Message) -> Message:
        """Algorithm 2 lines 7, 12-14: unwrap :math:`S`; upload item tokens and sealed degrees."""
        st = self.state
        if self.settings.real:
            part = request["wrapped"]
            if part.receivers is None or not np.array_equal(part.receivers, self.clients):
                raise IntegrityError("setup/wrapped-key: the wrapped keys do not match this node's clients")
            got = set()
            for k, blob in enumerate(part.value):
                if blob is None:
                    raise IntegrityError(
                        f"setup/wrapped-key: the wrapped key for client:{int(self.clients[k])} never arrived "
                        "(dropped); the receiver rejected the set-up"
                    )
                try:
                    got.add(unwrap_key(blob, self.keypair(k)))
                except DecryptionError:
                    raise IntegrityError(
                        f"setup/wrapped-key: the wrapped key for client:{int(self.clients[k])} failed "
                        "authentication; the receiver rejected it"
                    ) from None
            if len(got) != 1:
                raise IntegrityError("setup/wrapped-key: the clients unwrapped different keys")
            st.key = got.pop()
            self._cache.pop("tokens", None)
        flat = self.tokens_of(st.held_idx).tobytes()
        ends = st.held_ptr * TOKEN_BYTES
        tokens = [flat[a:b] for a, b in zip(ends[:-1].tolist(), ends[1:].tolist(), strict=True)]
        degrees = [int(d).to_bytes(8, "little") for d in np.diff(st.real_ptr).tolist()]
        return Message(
            {
                "tokens": Part(
                    "setup/item-tokens", "item_token", CLIENT, SERVER, tokens, shape="blobs",
                    protection="pseudonymous", senders=self.clients,
                ),
                "degrees": Part(
                    "setup/neighbour-degrees", "user_degree", CLIENT, SERVER, degrees, shape="blobs",
                    protection="sealed", senders=self.clients, seal_to_role=CONV_CLIENT,
                ),
            }
        )  # fmt: skip

    def stage_setup_unheld(self, step: int, request: Message) -> Message:
        """The key-client names the items nobody holds: token and id of each (ids ascending)."""
        self.check_roster(SETUP_UNHELD, request.fields)
        key_client, n_items = self.key_client(), int(request.fields["n_items"])
        blob = request["held-tokens"].value[0]
        held = np.frombuffer(blob, dtype=np.uint8).reshape(-1, TOKEN_BYTES)
        all_tokens = self.tokens_of(np.arange(n_items))
        unheld = np.flatnonzero(TokenIndex(held).find(all_tokens) < 0)
        body = np.concatenate(
            [all_tokens[unheld], unheld.astype("<i8").view(np.uint8).reshape(-1, 8)], axis=1
        ).tobytes()
        part = Part(
            "setup/unheld-items", "item_token", KEY_HOLDER, SERVER, [body], shape="blobs",
            senders=np.array([key_client]),
        )  # fmt: skip
        assert self.data is not None, "set-up needs the node's data"  # (the roster was checked above)
        listed = unheld_list_part(all_tokens[unheld], key_client, int(self.data.train.shape[0]))
        return Message({"unheld": part, "unheld-list": listed})

    def stage_setup_verify(self, step: int, request: Message) -> Message:
        """Learn the assigned convolution-items; answer verification questions (Alg. 2 l. 16-18)."""
        st = self.state
        assert self.data is not None, "set-up needs the node's data"
        st.unheld_items = read_unheld_list(
            request["unheld-list"], self.clients, self.key_client(),
            self.tokens_of(np.arange(int(self.data.train.shape[1]))), st.held_idx,
        )  # fmt: skip
        s = len(self.clients)
        held_rows = np.repeat(np.arange(s), np.diff(st.held_ptr))
        held_keys = TokenIndex(keyed(held_rows, self.tokens_of(st.held_idx)))
        # --- Algorithm 3's result: the convolution-items of each of this node's convolution-clients
        assign = request.get("assignment")
        owners: list[np.ndarray] = []
        entries: list[np.ndarray] = []
        if assign is not None and assign.receivers is not None:
            for owner, blob in zip(assign.receivers.tolist(), assign.value, strict=True):
                toks = np.frombuffer(blob, dtype=np.uint8).reshape(-1, TOKEN_BYTES)
                pos = int(self.position(np.array([owner]))[0])
                at = held_keys.find(keyed(np.full(len(toks), pos), toks))
                if (at < 0).any():
                    raise IntegrityError(
                        f"setup/assignment: conv-client:{owner} got an item it does not hold"
                    )
                owners.append(np.full(len(toks), owner, dtype=np.int64))
                entries.append(at)
        conv_entries = np.concatenate([np.zeros(0, np.int64), *entries])
        st.conv_owner = np.concatenate([np.zeros(0, np.int64), *owners])
        st.conv_items = st.held_idx[conv_entries]
        st.held_owner[conv_entries] = st.conv_owner
        # --- verification: "is this item virtual for you?", answered sealed to the asker
        q = request.get("questions")
        if q is None or q.receivers is None or not len(q.receivers):
            answers = Part(
                "setup/verification-answer", "virtual_flag", CLIENT, SERVER, [], shape="blobs",
                protection="asymmetric", senders=np.zeros(0, np.int64), seal_to_role=CONV_CLIENT,
                seal_to=np.zeros(0, np.int64),
            )  # fmt: skip
            self._check_owners()
            return Message({"answers": answers})
        assert q.senders is not None
        toks = np.frombuffer(b"".join(q.value), dtype=np.uint8).reshape(-1, TOKEN_BYTES)
        at = held_keys.find(keyed(self.position(q.receivers), toks))
        if (at < 0).any():
            bad = int(q.receivers[int(np.flatnonzero(at < 0)[0])])
            raise IntegrityError(
                f"setup/verification-question: client:{bad} was asked about an item it does not hold"
            )
        st.held_owner[at] = q.senders
        self._check_owners()
        flags = st.held_virtual[at]
        if self.settings.real:
            keys = request["asker-keys"]
            assert keys.receivers is not None and keys.senders is not None
            pk = {
                (int(a), int(c)): PublicKey.from_bytes(b)
                for a, c, b in zip(keys.receivers.tolist(), keys.senders.tolist(), keys.value, strict=True)
            }
            blobs = [
                seal(bytes([int(f)]), pk[(int(a), int(c))], aad=verification_aad(int(a), int(c), bytes(t)))
                for f, a, c, t in zip(
                    flags.tolist(), q.receivers.tolist(), q.senders.tolist(), toks, strict=True
                )
            ]
            sizes = np.fromiter((len(b) for b in blobs), dtype=np.int64, count=len(blobs))
        else:
            blobs = [bytes([int(f)]) for f in flags.tolist()]
            sizes = np.full(len(blobs), sealed_size(1))
        answers = Part(
            "setup/verification-answer", "virtual_flag", CLIENT, SERVER, blobs, shape="blobs",
            protection="asymmetric", senders=q.receivers, seal_to_role=CONV_CLIENT, seal_to=q.senders,
        ).with_sizes(sizes)  # fmt: skip
        return Message({"answers": answers})

    def _check_owners(self) -> None:
        st = self.state
        if (st.held_owner < 0).any():
            raise IntegrityError(
                "setup/verify: a held item is neither convolved here nor asked about by its conv-client"
            )

    def stage_setup_init(self, step: int, request: Message) -> Message:
        """Open the answers and degrees: real holders, Eq. 8 weights; owners take their initial rows."""
        assert self.data is not None, "set-up needs the node's data"
        st = self.state
        st.held_col = np.asarray(request.fields["held_col"], dtype=np.int64)
        assert self.data is not None
        st.n_columns = self.known_field(
            SETUP_INIT, request.fields, "n_columns", int(self.data.train.shape[1])
        )
        c = len(st.conv_items)
        own_deg = np.diff(st.real_ptr)
        conv_col = st.held_col[self._conv_entries()]
        conv_pos = TokenIndex(keyed(st.conv_owner, conv_col.astype(">i8").view(np.uint8).reshape(-1, 8)))
        # neighbours' degrees, relayed along the routing pairs (every holder of my items but me)
        deg = request.get("degrees")
        if deg is not None and deg.receivers is not None and len(deg.receivers):
            assert deg.senders is not None
            st.nb_conv, st.nb_user = deg.receivers.copy(), deg.senders.copy()
            nb_deg = np.array([int.from_bytes(bytes(b), "little") for b in deg.value], dtype=np.int64)
        else:
            nb_deg = np.zeros(0, dtype=np.int64)
        pair = TokenIndex(keyed(st.nb_conv, st.nb_user.astype(">i8").view(np.uint8).reshape(-1, 8)))
        # verification answers: which holders of each convolution-item are real
        real_pos, real_holder = self._real_holders(request, conv_pos)
        at = pair.find(
            keyed(st.conv_owner[real_pos], real_holder.astype(">i8").view(np.uint8).reshape(-1, 8))
        )
        if (at < 0).any():
            raise IntegrityError(
                "setup/neighbour-degrees: a verified holder's degree never reached its conv-client"
            )
        self_real = ~st.held_virtual[self._conv_entries()]
        self_pos = np.flatnonzero(self_real)
        item_deg = (np.bincount(real_pos, minlength=c) + self_real).astype(np.float64)
        d_nb = nb_deg[at].astype(np.float64)
        d_own = own_deg[self.position(st.conv_owner[self_pos])].astype(np.float64)
        st.conv_degree = item_deg
        st.a_row, st.a_col = real_pos.astype(np.int64), at
        st.a_val = 1.0 / np.sqrt(d_nb * item_deg[real_pos])
        st.aw_val = 1.0 / np.sqrt(d_nb)
        st.own_row, st.own_col = self_pos.astype(np.int64), self.position(st.conv_owner[self_pos])
        st.own_val = 1.0 / np.sqrt(d_own * item_deg[self_pos])
        st.ownw_val = 1.0 / np.sqrt(d_own)
        # owned rows, from the run's initial tables (spec §11.19: drawn once, rows handed to owners)
        tables = self.data.tables
        conv = torch.from_numpy(st.conv_items)
        st.item_emb = tables["item_emb"][conv].clone()
        st.item_m, st.item_v = torch.zeros_like(st.item_emb), torch.zeros_like(st.item_emb)
        out = Message()
        senders, counts = grouped(st.conv_owner)
        if self.settings.plus:
            w0 = tables["item_w"][conv].clone()
            if not self.settings.paper_literal:
                st.item_w, st.w_m, st.w_v = w0.clone(), torch.zeros_like(w0), torch.zeros_like(w0)
            if c:
                initial = Part("setup/initial-w", "item_embedding", CONV_CLIENT, SERVER, w0, counts=counts)
                out.add("initial-w", replace(initial, senders=senders))
        else:
            st.user_emb = tables["user_emb"][torch.from_numpy(self.clients)].clone()
            st.user_m, st.user_v = torch.zeros_like(st.user_emb), torch.zeros_like(st.user_emb)
        if c:
            degrees = Part(
                "setup/item-degrees", "item_degree", CONV_CLIENT, SERVER, item_deg.reshape(-1, 1),
                counts=counts, senders=senders,
            ).with_sizes(counts * 8)  # fmt: skip
            out.add("item-degrees", degrees)
        self.forget_operators()
        return out

    def _conv_entries(self) -> np.ndarray:
        """Held entries (positions in ``held_idx``) of the convolution-items, in their order."""
        st = self.state
        owner_pos = self.position(st.conv_owner)
        rows = np.repeat(np.arange(len(self.clients)), np.diff(st.held_ptr))
        keys = rows.astype(np.int64) * (1 << 40) + st.held_idx
        order = np.argsort(keys, kind="stable")
        return order[np.searchsorted(keys[order], owner_pos * (1 << 40) + st.conv_items)]

    def _real_holders(self, request: Message, conv_pos: TokenIndex) -> tuple[np.ndarray, np.ndarray]:
        """(convolution-item position, holder) of every holder that answered "real"."""
        st = self.state
        ans = request.get("answers")
        if ans is None or ans.receivers is None or not len(ans.receivers):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        assert ans.senders is not None
        cols = np.asarray(request.fields["answer_cols"], dtype=np.int64)
        pos = conv_pos.find(keyed(ans.receivers, cols.astype(">i8").view(np.uint8).reshape(-1, 8)))
        if (pos < 0).any():
            raise IntegrityError(
                "setup/verification-answer: an answer names an item its receiver does not convolve"
            )
        tokens = self.tokens_of(st.conv_items[pos])
        flags = np.empty(len(pos), dtype=bool)
        for k, (blob, a, c) in enumerate(
            zip(ans.value, ans.senders.tolist(), ans.receivers.tolist(), strict=True)
        ):
            who = f"setup/verification-answer: the answer from client:{a} to conv-client:{c}"
            if blob is None:
                raise IntegrityError(f"{who} never arrived (dropped); the receiver rejected the set-up")
            if not self.settings.real:
                flags[k] = bool(blob[0])
                continue
            try:
                keypair = self.keypair(int(self.position(np.array([c]))[0]))
                flags[k] = open_sealed(blob, keypair, aad=verification_aad(a, c, bytes(tokens[k])))[0] > 0
            except DecryptionError:
                raise IntegrityError(
                    f"{who} failed authentication (modified, replayed or re-routed); the receiver rejected it"
                ) from None
        real = ~flags
        return pos[real], ans.senders[real]

    def stage_setup_degrees(self, step: int, request: Message) -> Message:
        """Real degrees of the items other nodes convolve; with them every :math:`c_{ui}` (Eq. 7)."""
        st = self.state
        elsewhere = ~np.isin(st.held_owner, self.clients)
        cols, first = np.unique(st.held_col[elsewhere], return_index=True)
        st.sync_items = st.held_idx[elsewhere][first]
        part = request.get("degrees")
        values = np.zeros(0) if part is None else np.asarray(part.value, dtype=np.float64).ravel()
        if len(values) != len(cols):
            raise IntegrityError(
                f"setup/item-degrees: {len(values)} degrees for {len(cols)} synchronised items"
            )
        if not np.array_equal(np.asarray(request.fields["sync_cols"], dtype=np.int64), cols):
            raise IntegrityError(
                "setup/item-degrees: the server's synchronisation list does not match the holdings"
            )
        st.sync_degree = values
        self.forget_operators()
        return Message()
