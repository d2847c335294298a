r"""LP-GCN set-up: Algorithms 2 and 3 and the verification sub-protocol (``lpgcn.md`` §4).

Algorithm 2 distributes keys, draws virtual items and uploads encrypted item IDs; Algorithm 3 builds
the server's token graph, picks candidate convolution-clients by greedy set cover and assigns
convolution-items at random; verification (Alg. 2 lines 16–18) tells each convolution-client which
holders of its items are real.

What the simulation keeps is exactly what each party learns:

- every client: its real items :math:`\mathcal I_u`, its virtual items :math:`\mathcal I'_u`, the
  shared key :math:`S`, its convolution-items :math:`\tilde{\mathcal I}_u` (as tokens);
- the server: the bipartite graph between client pseudonyms and item *tokens* (real and virtual
  edges, indistinguishable), the assignment, public keys, ciphertexts;
- a convolution-client: for each of its convolution-items, which holders are real (verification
  answers, sealed to its public key), and its real neighbours' degrees (sent under :math:`S`).

Gaps resolved as ``lpgcn.md`` §11 recommends: real degrees (G2: the convolution-client computes
:math:`|\mathcal U_i|` from verified holders and distributes it), verification answers sealed to
:math:`PB_{\tilde u}` (G4), greedy cover (G11). Items that no client holds (possible when
:math:`\alpha = 0`) are owned by the server, which keeps their (non-sensitive) item embedding.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import scipy.sparse as sp

from fedgraphrec.crypto import (
    ClientKeyPair,
    DecryptionError,
    IntegrityError,
    ItemTokenizer,
    SharedKey,
    ciphertext_size,
    open_sealed,
    seal,
    sealed_size,
)
from fedgraphrec.data.types import binary_csr
from fedgraphrec.protocols.common import TOKEN_BYTES, distribute_shared_key, upload_item_tokens
from fedgraphrec.protocols.lpgcn.cover import plan_convolution
from fedgraphrec.protocols.lpgcn.roles import CLIENT, CONV_CLIENT, SERVER
from fedgraphrec.runtime import Network
from fedgraphrec.runtime.sealing import Binding, party, party_names
from fedgraphrec.seeding import numpy_rng

__all__ = ["SetupResult", "Topology", "initialization", "sample_virtual_items", "verification_aad"]


def verification_aad(answerer: int, asker: int, question: bytes) -> bytes:
    """Associated data of a verification answer: phase, sender, receiver and the item token asked.

    Binding the token stops the server from swapping two answers of one holder to one
    convolution-client (the answers would then describe the wrong items); binding the parties
    stops it from re-routing an answer to another asker.
    """
    b = Binding("lpgcn", "setup/verification-answer", -1)
    return b.aad(party(CLIENT, answerer), party(CONV_CLIENT, asker)) + b"|" + question


def _open_answers(
    delivered: list[bytes | None],
    keypairs: list[ClientKeyPair],
    answerers: np.ndarray,
    askers: np.ndarray,
    questions: list[bytes],
) -> np.ndarray:
    """Each convolution-client opens its answers; a missing or altered answer stops the set-up."""
    flags = np.zeros(len(delivered), dtype=bool)
    for k, (blob, a, c, q) in enumerate(zip(delivered, answerers, askers, questions, strict=True)):
        who = f"setup/verification-answer: the answer from client:{int(a)} to conv-client:{int(c)}"
        if blob is None:
            raise IntegrityError(f"{who} never arrived (dropped); the receiver rejected the set-up")
        try:
            flags[k] = open_sealed(blob, keypairs[c], aad=verification_aad(int(a), int(c), q))[0] > 0
        except DecryptionError:
            raise IntegrityError(
                f"{who} failed authentication (modified, replayed or re-routed); the receiver rejected it"
            ) from None
    return flags


def _token_table(shared_key: SharedKey | None, m: int) -> list[bytes] | None:
    """Every item's token under S (``None`` in ``accounted`` mode)."""
    return None if shared_key is None else ItemTokenizer(shared_key).tokens(np.arange(m))


def _tokens_by_owner(
    tokens: list[bytes], token_of_item: np.ndarray, conv_of_item: np.ndarray, owners: np.ndarray
) -> list[bytes]:
    """The assignment message of each owner: its convolution-items' tokens, in the server's order."""
    out = []
    for o in owners.tolist():
        items = np.flatnonzero(conv_of_item == o)
        items = items[np.argsort(token_of_item[items], kind="stable")]
        out.append(b"".join(tokens[i] for i in items))
    return out


@dataclass(frozen=True)
class Topology:
    r"""Who holds and computes what, after set-up (arrays indexed by client id / item id).

    Attributes:
        real: binary client×item matrix of real (training) items; row ``u`` is private to client u.
        virtual: binary client×item matrix of virtual items (row ``u`` private to client u).
        conv_of_item: :math:`\tilde u_i` for every item, ``-1`` for items no client holds
            (owned by the server).
        candidates: the candidate convolution-clients :math:`\overline{\mathcal U}` (sorted ids).
        nb_conv, nb_user: the routing pairs :math:`(\tilde u, u')`, sorted by convolution-client:
            whose ciphertexts the server forwards to whom. They are built from the server's token
            graph, i.e. every *holder* (real or virtual) of the convolution-client's items, because
            the server cannot tell real holders from virtual ones; the convolution-client decrypts
            all and uses only the verified-real neighbours :math:`\mathcal N_{\tilde u}` (so the
            routing, unlike the paper's Eq. 30 count, grows with α).
        held_not_own: per client, how many held items (real + virtual) are not its own
            convolution-items (rows it receives at every synchronisation).
        conv_items_per_client: per client, :math:`|\tilde{\mathcal I}_u|`.
    """

    real: sp.csr_matrix
    virtual: sp.csr_matrix
    conv_of_item: np.ndarray
    candidates: np.ndarray
    nb_conv: np.ndarray
    nb_user: np.ndarray
    held_not_own: np.ndarray
    conv_items_per_client: np.ndarray

    @property
    def n_clients(self) -> int:
        """Number of clients (users)."""
        return int(self.real.shape[0])

    @property
    def n_items(self) -> int:
        """Number of items."""
        return int(self.real.shape[1])

    @property
    def convolution_clients(self) -> np.ndarray:
        r""":math:`\tilde{\mathcal U}`: clients holding at least one convolution-item."""
        return np.flatnonzero(self.conv_items_per_client > 0)


@dataclass(frozen=True)
class SetupResult:
    """Topology plus the key material the clients hold (``None`` in accounted mode)."""

    topology: Topology
    shared_key: SharedKey | None
    keypairs: list[ClientKeyPair] | None


def sample_virtual_items(real: sp.csr_matrix, alpha: int, seed: int, secret: bool = False) -> sp.csr_matrix:
    r"""α distinct virtual items per client, uniform over :math:`\mathcal I\setminus\mathcal I_u`.

    Vectorised rejection sampling; a client that holds more than ``m - α`` items gets all its
    non-held items. Virtual items hide the real ones from the server and from clients colluding
    with it, so they are a client's secret: with ``secret`` they are drawn from the OS CSPRNG (the
    default of a deployment). Without it they come from the run seed's stream
    ``("lpgcn", "virtual")``, which makes ledgers reproducible for research runs, but lets anyone who
    knows the seed and :math:`S` tell virtual from real items (``SECURITY.md``).
    """
    n, m = real.shape
    if alpha <= 0:
        return sp.csr_matrix((n, m), dtype=np.float32)
    rng: _Draws = _CsprngDraws() if secret else numpy_rng(seed, "lpgcn", "virtual")
    real_keys = np.sort(np.repeat(np.arange(n, dtype=np.int64), np.diff(real.indptr)) * m + real.indices)
    need = np.minimum(alpha, m - np.diff(real.indptr)).astype(np.int64)
    chosen_u: list[np.ndarray] = []
    chosen_i: list[np.ndarray] = []
    have = np.zeros(n, dtype=np.int64)
    while (todo := np.flatnonzero(have < need)).size:
        draws = np.repeat(todo, 2 * (need[todo] - have[todo]) + 2)
        items = rng.integers(0, m, size=len(draws))
        keys = draws * m + items
        pos = np.searchsorted(real_keys, keys).clip(max=max(len(real_keys) - 1, 0))
        ok = real_keys[pos] != keys if len(real_keys) else np.ones(len(keys), bool)
        if chosen_u:
            prev = np.concatenate(chosen_u) * m + np.concatenate(chosen_i)
            ok &= ~np.isin(keys, prev)
        keys = keys[ok]
        _, first = np.unique(keys, return_index=True)
        keys = keys[np.sort(first)]
        u, i = keys // m, keys % m
        order = np.argsort(u, kind="stable")
        u, i = u[order], i[order]
        rank = np.arange(len(u)) - np.searchsorted(u, u)
        take = rank < (need[u] - have[u])
        chosen_u.append(u[take])
        chosen_i.append(i[take])
        np.add.at(have, u[take], 1)
    return binary_csr(np.concatenate(chosen_u), np.concatenate(chosen_i), n, m)


class _Draws(Protocol):
    def integers(self, low: int, high: int, size: int) -> np.ndarray: ...

    def random(self, size: int) -> np.ndarray: ...


class _CsprngDraws:
    """Uniform integers and floats from ``os.urandom`` (64-bit words; bias ≤ high / 2^64)."""

    def integers(self, low: int, high: int, size: int) -> np.ndarray:
        words = np.frombuffer(os.urandom(8 * int(size)), dtype=np.uint64)
        return (words % np.uint64(high - low)).astype(np.int64) + low

    def random(self, size: int) -> np.ndarray:
        words = np.frombuffer(os.urandom(8 * int(size)), dtype=np.uint64)
        return (words >> np.uint64(11)).astype(np.float64) * 2.0**-53


def _neighbour_pairs(real: sp.csr_matrix, conv_of_item: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    coo = real.tocoo()
    conv = conv_of_item[coo.col]
    keep = conv != coo.row
    keys = np.unique(conv[keep].astype(np.int64) * real.shape[0] + coo.row[keep])
    return keys // real.shape[0], keys % real.shape[0]


def initialization(
    real: sp.csr_matrix,
    alpha: int,
    seed: int,
    net: Network,
    secret_cover: bool = False,
) -> SetupResult:
    """Algorithms 2 and 3 plus verification; records every set-up message in ``net``'s ledger.

    Args:
        real: the training interactions (client u's row is its private data).
        alpha: virtual items per client.
        seed: run seed (the key-client, the assignment; virtual items and the token upload order
            unless ``secret_cover``).
        net: the runtime; in ``real`` crypto mode keys, tokens and answers are computed for real.
        secret_cover: draw every client's virtual items and upload order from the OS CSPRNG.
    """
    real = sp.csr_matrix(real, dtype=np.float32)
    n = real.shape[0]
    rng = numpy_rng(seed, "lpgcn", "setup")

    # --- Algorithm 2, lines 1-7: key pairs, the shared key S, wrapped for every client ----------
    keys = distribute_shared_key(n, net, key_client=int(rng.integers(0, n)))
    shared_key, keypairs = keys.shared_key, keys.keypairs

    # --- Algorithm 2, lines 8-14: virtual items, encrypted item IDs ------------------------------
    virtual = sample_virtual_items(real, alpha, seed, secret=secret_cover)
    holdings = sp.csr_matrix(real + virtual)
    holdings.data[:] = 1.0
    holdings.sort_indices()
    held = np.diff(holdings.indptr)
    order_rng: _Draws = _CsprngDraws() if secret_cover else numpy_rng(seed, "lpgcn", "upload-order")
    token_of_item = upload_item_tokens(holdings, net, shared_key, order_rng)

    # --- Algorithm 3: the server's token graph, set cover, assignment ----------------------------
    server_view = sp.csr_matrix(
        (holdings.data, token_of_item[holdings.indices], holdings.indptr), shape=holdings.shape
    )
    server_view.sort_indices()
    plan = plan_convolution(server_view, seed)
    conv_of_item = np.asarray(plan.conv_client_of_item)[token_of_item]
    conv_items_per_client = np.bincount(conv_of_item[conv_of_item >= 0], minlength=n)
    tokens = _token_table(shared_key, real.shape[1])
    assigned = np.flatnonzero(conv_items_per_client > 0)
    net.transmit(
        "setup/assignment",
        SERVER,
        CONV_CLIENT,
        conv_items_per_client[assigned] * TOKEN_BYTES,
        kind="item_token",
        protection="pseudonymous",
        payloads=None if tokens is None else _tokens_by_owner(tokens, token_of_item, conv_of_item, assigned),
        receivers=assigned,
    )

    # --- Verification: other holders tell the convolution-client whether the item is virtual ----
    h = holdings.tocoo()
    ask = conv_of_item[h.col] != h.row
    askers, answerers, items = conv_of_item[h.col][ask], h.row[ask], h.col[ask]
    answer_size = sealed_size(1)
    answers: list[bytes] | None = None
    questions = None if tokens is None else [tokens[i] for i in items]
    net.transmit(
        "setup/verification-question",
        SERVER,
        CLIENT,
        np.full(len(askers), TOKEN_BYTES),
        kind="item_token",
        protection="pseudonymous",
        payloads=questions,
        receivers=answerers,
    )
    if keypairs is not None and questions is not None:
        is_virtual = np.asarray(virtual[answerers, items]).ravel() > 0
        aads = [
            verification_aad(int(a), int(c), q) for a, c, q in zip(answerers, askers, questions, strict=True)
        ]
        answers = [
            seal(bytes([int(v)]), keypairs[c].public, aad=aad)
            for v, c, aad in zip(is_virtual, askers, aads, strict=True)
        ]
        answer_size = len(answers[0]) if answers else answer_size
    net.transmit(
        "setup/verification-answer",
        CLIENT,
        SERVER,
        np.full(len(askers), answer_size),
        kind="virtual_flag",
        protection="sealed",
        payloads=answers,
        senders=answerers,
    )
    delivered = net.transmit(
        "setup/verification-answer",
        SERVER,
        CONV_CLIENT,
        np.full(len(askers), answer_size),
        kind="virtual_flag",
        protection="sealed",
        payloads=answers,
        receivers=askers,
    )
    if keypairs is not None and delivered is not None and questions is not None:
        decoded = _open_answers(list(delivered), keypairs, answerers, askers, questions)
        if not np.array_equal(decoded, np.asarray(virtual[answerers, items]).ravel() > 0):
            raise RuntimeError("verification answers did not decrypt to the holders' flags")

    nb_conv, nb_user = _neighbour_pairs(holdings, conv_of_item)
    # neighbours' degrees |I_u'| reach the convolution-client sealed under S (8-byte integer)
    degrees = np.diff(real.indptr).astype(np.int64)
    sealed_degrees = net.seal(
        "setup/neighbour-degrees",
        [int(d).to_bytes(8, "little") for d in degrees[nb_user]],
        party_names(CLIENT, nb_user.tolist()),
        party_names(CONV_CLIENT, nb_conv.tolist()),
    )
    got = net.transmit(
        "setup/neighbour-degrees",
        SERVER,
        CONV_CLIENT,
        np.full(len(nb_conv), ciphertext_size(8)),
        kind="user_degree",
        protection="sealed",
        payloads=sealed_degrees,
        receivers=nb_conv,
    )
    if got is not None:
        opened = net.open(
            "setup/neighbour-degrees",
            got,
            party_names(CLIENT, nb_user.tolist()),
            party_names(CONV_CLIENT, nb_conv.tolist()),
        )
        if [int.from_bytes(b, "little") for b in opened] != degrees[nb_user].tolist():
            raise RuntimeError("setup/neighbour-degrees: a degree did not survive sealing")
    own = conv_of_item[holdings.indices] == np.repeat(np.arange(n), held)
    held_not_own = held - np.bincount(np.repeat(np.arange(n), held)[own], minlength=n)
    # real item degrees |U_i| go with the layer-0 embeddings to every other holder (plaintext)
    net.transmit(
        "setup/item-degrees",
        CONV_CLIENT,
        SERVER,
        conv_items_per_client[conv_items_per_client > 0] * 8,
        kind="item_degree",
        protected=False,
        senders=np.flatnonzero(conv_items_per_client > 0),
    )
    net.transmit(
        "setup/item-degrees",
        SERVER,
        CLIENT,
        held_not_own[held_not_own > 0] * 8,
        kind="item_degree",
        protected=False,
        receivers=np.flatnonzero(held_not_own > 0),
    )
    topo = Topology(
        real=real,
        virtual=virtual,
        conv_of_item=conv_of_item,
        candidates=np.asarray(plan.candidates),
        nb_conv=nb_conv,
        nb_user=nb_user,
        held_not_own=held_not_own,
        conv_items_per_client=conv_items_per_client,
    )
    return SetupResult(topo, shared_key, keypairs)
