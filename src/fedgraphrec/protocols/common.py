"""Set-up steps shared by the protocols that key items and embeddings under one symmetric key S.

LP-GCN (Algorithm 2) and GNN4FR (Algorithm 2) start the same way: every client makes an asymmetric
key pair, one client draws :math:`S` and wraps it for everybody through the server, and every
client uploads deterministic tokens of its item IDs so the server can build the item graph without
learning an ID. Both steps record their messages in the runtime's ledger; in ``real`` crypto mode
they run the cryptography for real.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto import (
    ClientKeyPair,
    IntegrityError,
    ItemTokenizer,
    SharedKey,
    sealed_size,
    unwrap_key,
    wrap_key,
)
from fedgraphrec.crypto.agreement import PUBLIC_KEY_BYTES
from fedgraphrec.crypto.tokens import TOKEN_BYTES
from fedgraphrec.runtime import Network

__all__ = [
    "CLIENT",
    "KEY_HOLDER",
    "SERVER",
    "KeySetup",
    "LocalBPR",
    "ShardRows",
    "StepRecord",
    "adam_step",
    "distribute_shared_key",
    "layer_mean",
    "local_bpr",
    "upload_item_tokens",
]

SERVER = "server"
CLIENT = "client"
KEY_HOLDER = "key-client"  # u_c of Algorithm 2, who draws the shared key S


@dataclass(frozen=True)
class KeySetup:
    """The shared key and the clients' key pairs (both ``None`` in ``accounted`` mode)."""

    shared_key: SharedKey | None
    keypairs: list[ClientKeyPair] | None


@dataclass(frozen=True)
class ShardRows:
    """A node's clients' training rows, as the protocols that propagate over them read them.

    Attributes:
        full: the whole training matrix as float64 0/1 (duplicates merged, indices sorted).
        train: the shard's rows of it, in the order of its clients.
        deg_u: each of the shard's clients' number of training items.
    """

    full: sp.csr_matrix
    train: sp.csr_matrix
    deg_u: np.ndarray

    @classmethod
    def of(cls, train: sp.spmatrix, clients: np.ndarray) -> ShardRows:
        """Binarise ``train`` and keep ``clients``' rows (global ids, sorted)."""
        full = sp.csr_matrix(train, dtype=np.float64, copy=True)
        full.sum_duplicates()
        full.sort_indices()
        full.data[:] = 1.0
        mine = sp.csr_matrix(full[clients])
        return cls(full, mine, np.diff(mine.indptr).astype(np.int64))

    @property
    def n_items(self) -> int:
        """The catalogue size."""
        return int(self.full.shape[1])


def distribute_shared_key(n: int, net: Network, key_client: int) -> KeySetup:
    """Public keys up, all of them to ``key_client``, which wraps a fresh S for every client.

    The server relays everything and never sees S: it only handles public keys and wrapped keys.
    Every client checks it unwrapped the same S (a wrapped key for another client, or an altered
    one, fails to unwrap), and ``net`` seals and opens with S from then on.
    """
    clients = np.arange(n)
    net.transmit(
        "setup/public-keys",
        CLIENT,
        SERVER,
        np.full(n, PUBLIC_KEY_BYTES),
        kind="public_key",
        protected=False,
        senders=clients,
    )
    net.transmit(
        "setup/public-keys",
        SERVER,
        KEY_HOLDER,
        n * PUBLIC_KEY_BYTES,
        kind="public_key",
        protected=False,
        receivers=np.array([key_client]),
    )
    wrapped_size = sealed_size(32)
    shared_key: SharedKey | None = None
    keypairs: list[ClientKeyPair] | None = None
    wrapped: list[bytes] | None = None
    if net.real:
        keypairs = [ClientKeyPair.generate() for _ in range(n)]
        shared_key = SharedKey.generate()
        wrapped = [wrap_key(shared_key.to_bytes(), kp.public) for kp in keypairs]
        wrapped_size = len(wrapped[0])
    net.transmit(
        "setup/wrapped-key",
        KEY_HOLDER,
        SERVER,
        np.full(n, wrapped_size),
        kind="wrapped_key",
        protected=True,
        payloads=wrapped,
        senders=np.full(n, key_client),
    )
    delivered = net.transmit(
        "setup/wrapped-key",
        SERVER,
        CLIENT,
        np.full(n, wrapped_size),
        kind="wrapped_key",
        protected=True,
        payloads=wrapped,
        receivers=clients,
    )
    if keypairs is not None and delivered is not None and shared_key is not None:
        for u, (kp, blob) in enumerate(zip(keypairs, delivered, strict=True)):
            if blob is None:
                raise IntegrityError(
                    f"setup/wrapped-key: the wrapped key for client:{u} never arrived (dropped)"
                )
            if unwrap_key(blob, kp) != shared_key.to_bytes():
                raise RuntimeError("a client unwrapped a different shared key")
    net.use_group_key(shared_key)
    return KeySetup(shared_key, keypairs)


class Uniforms(Protocol):
    """A source of uniform floats in [0, 1): a seeded numpy generator, or a CSPRNG-backed one."""

    def random(self, size: int) -> np.ndarray:
        """``size`` uniform floats."""
        ...


def upload_item_tokens(
    holdings: sp.csr_matrix,
    net: Network,
    shared_key: SharedKey | None,
    order_rng: Uniforms | np.random.Generator,
) -> np.ndarray:
    """Every client uploads the tokens of its held items; returns the server's column of each item.

    Each client uploads its tokens in an order of its own (``order_rng``), so the order reveals
    nothing, and the server numbers tokens by first appearance, so its numbering does not depend on
    token values (fresh every run): the same seed gives the same server view in both crypto modes.
    Items nobody holds are unknown to the server and get the remaining column ids.
    """
    n, m = holdings.shape
    held = np.diff(holdings.indptr)
    rows = np.repeat(np.arange(n), held)
    upload = holdings.indices[np.lexsort((order_rng.random(len(rows)), rows))]
    token_payloads: list[bytes] | None = None
    token_of_item = np.full(m, -1, dtype=np.int64)
    if shared_key is not None:
        item_tokens = ItemTokenizer(shared_key).tokens(np.arange(m))
        uploaded = [item_tokens[i] for i in upload]
        token_payloads = [
            b"".join(uploaded[a:b]) for a, b in zip(holdings.indptr[:-1], holdings.indptr[1:], strict=True)
        ]
        first_seen: dict[bytes, int] = {}
        for tok in uploaded:  # what the server does: number tokens by first appearance
            first_seen.setdefault(tok, len(first_seen))
        for i, tok in enumerate(item_tokens):
            token_of_item[i] = first_seen.get(tok, -1)
    else:  # accounted mode: the same numbering, with item ids standing in for tokens
        _, first = np.unique(upload, return_index=True)
        token_of_item[np.unique(upload)] = np.argsort(np.argsort(first))
    unheld = token_of_item < 0
    token_of_item[unheld] = np.arange(int((~unheld).sum()), m)
    net.transmit(
        "setup/item-tokens",
        CLIENT,
        SERVER,
        held * TOKEN_BYTES,
        kind="item_token",
        protection="pseudonymous",
        payloads=token_payloads,
        senders=np.arange(n),
    )
    return token_of_item


def layer_mean(layers: list[torch.Tensor]) -> torch.Tensor:
    r""":math:`\frac{1}{L+1}\sum_l E^{(l)}`, accumulated in place exactly as the oracle's routine does."""
    w = 1.0 / len(layers)
    out = layers[0] * w
    for layer in layers[1:]:
        out.add_(layer, alpha=w)
    return out


@dataclass(frozen=True)
class LocalBPR:
    r"""Every client's BPR loss of one minibatch and its direct gradients (``lpgcn.md`` §2.4).

    Attributes:
        bpr, reg: the batch's BPR term and regulariser (before λ), as the oracle reports them.
        dU: :math:`\partial\mathcal L/\partial U` of the combined user embeddings (users' own).
        rU: the layer-0 regulariser gradient of the users.
        items: the batch's items, positives then negatives (the row order below).
        item_senders: the client that computed each item row (``users`` twice).
        d_rows: each item row's :math:`\partial\mathcal L/\partial V` contribution.
        r_rows: each item row's layer-0 regulariser gradient (already times λ).
    """

    bpr: torch.Tensor
    reg: torch.Tensor
    dU: torch.Tensor
    rU: torch.Tensor
    items: torch.Tensor
    item_senders: np.ndarray
    d_rows: torch.Tensor
    r_rows: torch.Tensor


def local_bpr(
    U: torch.Tensor,
    V: torch.Tensor,
    U0: torch.Tensor,
    V0: torch.Tensor,
    users: torch.Tensor,
    pos: torch.Tensor,
    neg: torch.Tensor,
    reg_weight: float,
    batch_size: int | None = None,
) -> LocalBPR:
    """The clients' local losses (each triple is computed by its user) and direct gradients.

    ``batch_size`` is the whole minibatch's size when these triples are only a shard of it (a
    Flower SuperNode computes its own users' triples): every mean and every gradient is over the
    whole minibatch, so shard results simply add up. ``None``: the triples are the whole minibatch.
    """
    B = int(users.shape[0]) if batch_size is None else int(batch_size)
    u_rows, p_rows, n_rows = U[users], V[pos], V[neg]
    x = (u_rows * n_rows).sum(-1) - (u_rows * p_rows).sum(-1)
    loss = torch.nn.functional.softplus(x)
    bpr = loss.mean() if batch_size is None else loss.sum() / B
    reg = (U0[users].pow(2).sum() + V0[pos].pow(2).sum() + V0[neg].pow(2).sum()) / (2.0 * B)
    s = torch.sigmoid(x).unsqueeze(1) / B
    dU = torch.zeros_like(U).index_add_(0, users, s * (n_rows - p_rows))
    rU = torch.zeros_like(U).index_add_(0, users, reg_weight * U0[users] / B)
    items = torch.cat([pos, neg])
    un = users.numpy()
    return LocalBPR(
        bpr=bpr,
        reg=reg,
        dU=dU,
        rU=rU,
        items=items,
        item_senders=np.concatenate([un, un]),
        d_rows=torch.cat([-s * u_rows, s * u_rows]),
        r_rows=reg_weight * V0[items] / B,
    )


@dataclass
class StepRecord:
    """What one protocol minibatch computed (kept for step-by-step checks against the oracle)."""

    loss: float
    bpr: float
    reg: float
    user_layers: list[torch.Tensor] = field(default_factory=list)
    item_layers: list[torch.Tensor] = field(default_factory=list)
    user_grad: torch.Tensor | None = None
    item_grad: torch.Tensor | None = None
    w_grad: torch.Tensor | None = None


def adam_step(
    param: torch.Tensor,
    grad: torch.Tensor,
    exp_avg: torch.Tensor,
    exp_avg_sq: torch.Tensor,
    step: int,
    lr: float,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
) -> None:
    r"""One Adam step on rows a party owns, in place (PyTorch's single-tensor Adam, no weight decay).

    Adam is element-wise, so owners that each step their own rows every minibatch (with a zero
    gradient where they got none) reproduce one dense Adam over the whole table (spec ``lpgcn.md``
    §11.8). ``step`` is the step number after this one (1 for the first).
    """
    beta1, beta2 = betas
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    bias1 = 1 - beta1**step
    bias2_sqrt = (1 - beta2**step) ** 0.5
    denom = exp_avg_sq.sqrt().div_(bias2_sqrt).add_(eps)  # PyTorch's arithmetic, one temporary
    param.addcdiv_(exp_avg, denom, value=-lr / bias1)
