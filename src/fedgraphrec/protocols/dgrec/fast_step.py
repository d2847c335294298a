"""DGREC's exact fast group step: the same distribution of everything any party uses, less work.

The reference step (:meth:`~fedgraphrec.protocols.dgrec.trainer.DGREC.group_step` on its reference
path) gathers every member's whole item table, differentiates into it, one-bit encodes every
coordinate of every member, floods the encodings peer to peer and decodes. Where no party's
individual encoding is observed (no transcripts, no audit or attack reading them), the run only uses
the group's *sum* of encodings, the ledger and the members' updated models, and this step computes
exactly those:

* **Gradients on the touched rows.** A member's loss (Eq. 3) reads its item table only at its
  hypergraph's nodes, its minibatch positives and its negatives (the L2 term of
  :meth:`~.model.UserModels.losses` regularises exactly the positive and negative rows, so it touches
  no other row). Those rows are gathered into a compact per-member table with the same index
  pattern remapped, and the same :meth:`~.model.UserModels.losses` is differentiated: the gradient
  on each touched row is bit-identical to the dense one (same operations, same accumulation order),
  and on every other row the dense gradient is exactly zero.
* **The sum of the one-bit encodings, drawn exactly.** For a coordinate of a touched row, every
  member touching it draws its Bernoulli exactly as :func:`~fedgraphrec.privacy.one_bit.encode`
  does; the ``m - k`` members whose gradient there is exactly zero contribute ``2·Binomial(m-k, ½) -
  (m-k)`` (:func:`~fedgraphrec.privacy.one_bit.sum_of_zero_encodings`, which states the derivation);
  an untouched row gets ``k = 0``. Dense parameters (W1…L3) are touched by everyone. The decoded
  mean ``δ(e^β+1)/(e^β-1) · sum / m`` is what every member decodes on the reference path (each
  holds all ``m`` messages after 2H rounds), with the same distribution.
* **The ledger from the tree.** :func:`~.gossip.flood_routes` gives, from the flooding tree's
  distances, the senders and receivers of every round; the rows booked are the flood's.
* **Vectorised minibatches** (:func:`minibatch`: same distribution as the reference's loop) and an
  **in-place update** of each member's table.

Float sharing (``clipped``, ``plain``) takes the same route with the float mean (equal to the
reference's up to float32 summation order), ``none`` updates each member's touched rows with its own
gradient; ``laplace`` sharing, which puts noise on every coordinate of every member, always runs on
the reference path. Randomness: the encodings' thresholds and the raw bits come from the run's noise
source (the seeded ``encode`` stream, or the CSPRNG under ``secure_noise``), the minibatches from the
step's sampling stream.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.privacy.noise_source import NoiseSource
from fedgraphrec.privacy.one_bit import decode_scale, encode, sum_of_zero_encodings
from fedgraphrec.protocols.dgrec.gossip import float_bytes, flood_routes, message_bytes
from fedgraphrec.protocols.dgrec.hypergraph import UserHypergraphs
from fedgraphrec.protocols.dgrec.model import UserModels
from fedgraphrec.protocols.dgrec.settings import DGRECSettings
from fedgraphrec.runtime.ledger import Ledger

__all__ = ["FAST_SHARING", "FastGroupStep", "Touched", "check_finite", "minibatch", "touched_rows"]

FAST_SHARING = ("one_bit", "clipped", "plain", "none")
"""Sharing modes the fast step covers (``laplace`` runs on the reference path)."""


def check_finite(losses: torch.Tensor, users: np.ndarray, lr: float) -> None:
    """Refuse non-finite local losses before any update (else NaN reaches the Eq.-4 weights).

    Raises:
        FloatingPointError: naming up to five diverged users and the learning rate.
    """
    if not torch.isfinite(losses).all():
        bad = users[~torch.isfinite(losses).numpy()][:5].tolist()
        raise FloatingPointError(f"non-finite local loss of users {bad} (diverged: is lr={lr} too large?)")


def minibatch(
    train: sp.csr_matrix, users: np.ndarray, batch: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``batch`` positives per user (uniform, with replacement) and one negative each from ``I_u^-``.

    The reference's per-user loop, vectorised: positives uniform over the user's training items,
    negatives uniform over the items it does not hold (rejection: redrawn while they hit a training
    item; not redrawn for a user without items or holding every item, as in the reference).
    """
    n_items = train.shape[1]
    start = train.indptr[users].astype(np.int64)
    deg = train.indptr[users + 1] - start
    m = len(users)
    pos = np.zeros((m, batch), np.int64)
    has = deg > 0
    if has.any():
        off = rng.integers(0, deg[has][:, None], size=(int(has.sum()), batch))
        pos[has] = train.indices[start[has][:, None] + off]
    neg = rng.integers(0, n_items, size=(m, batch))
    redraw = has & (deg < n_items)
    if redraw.any():
        rows = np.repeat(np.arange(m), deg)
        first = np.repeat(np.cumsum(deg) - deg, deg)
        held = rows * n_items + train.indices[np.repeat(start, deg) + np.arange(len(rows)) - first]
        held = held[redraw[rows]]
        where = np.arange(m)[:, None] * n_items
        hit = np.isin(where + neg, held) & redraw[:, None]
        while hit.any():
            neg[hit] = rng.integers(0, n_items, size=int(hit.sum()))
            hit[hit] = np.isin((where + neg)[hit], held)
    return pos, neg


@dataclass(frozen=True)
class Touched:
    """The item-table rows each member of a group touches, and where they sit in its compact table.

    Attributes:
        member: ``[K]`` the member (row of the group) of each touched (member, row) pair.
        row: ``[K]`` the item-table row of each pair.
        slot: ``[K]`` its position in the member's compact table.
        width: the compact tables' width (the most rows one member touches).
        local: ``[m, n]`` the compact position of each column of the indices passed in.
    """

    member: np.ndarray
    row: np.ndarray
    slot: np.ndarray
    width: int
    local: np.ndarray


def touched_rows(indices: np.ndarray, n_rows: int) -> Touched:
    """The distinct rows of each member's ``indices`` (``[m, n]``: nodes, positives, negatives)."""
    m = indices.shape[0]
    keys = np.arange(m, dtype=np.int64)[:, None] * n_rows + indices
    uniq, inv = np.unique(keys, return_inverse=True)
    member, row = uniq // n_rows, uniq % n_rows
    counts = np.bincount(member, minlength=m)
    start = np.cumsum(counts) - counts
    slot = np.arange(len(uniq)) - start[member]
    local = inv.reshape(indices.shape) - start[:, None]
    return Touched(member, row, slot, int(counts.max()) if m else 0, local)


class FastGroupStep:
    """The fast group step of one DGREC population (module docstring).

    Args:
        models: every user's model (updated in place).
        graphs: every user's hypergraph.
        train: user×item training interactions.
        settings: the protocol settings.
        noise: the encodings' noise source.
        ledger: the run's ledger (the flood's rows are booked there).
    """

    def __init__(
        self,
        models: UserModels,
        graphs: UserHypergraphs,
        train: sp.csr_matrix,
        settings: DGRECSettings,
        noise: NoiseSource,
        ledger: Ledger,
    ) -> None:
        if settings.sharing not in FAST_SHARING:
            raise ValueError(f"the fast step covers sharing {FAST_SHARING}, not {settings.sharing!r}")
        self.models, self.graphs, self.train = models, graphs, train
        self.s, self.noise, self.ledger = settings, noise, ledger
        self.deg = np.diff(train.indptr)

    def losses(
        self, users: np.ndarray, pos: np.ndarray, neg: np.ndarray
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor], Touched]:
        """Local losses on compact tables; the gathered parameters (leaves) and the touched rows."""
        m, idx = len(users), torch.from_numpy(users)
        g, params = self.graphs, self.models.params
        items = g.items[idx].numpy()
        t = touched_rows(np.concatenate([items, pos, neg], axis=1), params["E"].shape[1])
        table = params["E"].new_zeros((m, t.width, params["E"].shape[2]))
        table[t.member, t.slot] = params["E"][users[t.member], t.row]
        p = {"E": table.requires_grad_(True)}
        p |= {k: v[idx].clone().requires_grad_(True) for k, v in params.items() if k != "E"}
        local = torch.from_numpy(t.local)
        n_v, b = items.shape[1], pos.shape[1]
        has = torch.from_numpy((self.deg[users] > 0).astype(np.float32))
        n_neg = torch.from_numpy((self.train.shape[1] - self.deg[users]).astype(np.float32))
        parts = (local[:, :n_v], local[:, n_v : n_v + b], local[:, n_v + b :])
        losses = self.models.losses(p, parts[0], g.mask[idx], g.prop[idx], parts[1], parts[2], has, n_neg)
        return losses, p, t

    def __call__(self, links: Mapping[int, set[int]], rng: np.random.Generator) -> torch.Tensor:
        """One group step of the group ``links`` (centre first); returns the members' local losses.

        Raises:
            FloatingPointError: a member's local loss is not finite (nothing is updated).
            RuntimeError: the group is too deep for 2H flooding rounds.
        """
        s = self.s
        users = np.asarray(sorted(links), dtype=np.int64)
        pos, neg = minibatch(self.train, users, s.batch, rng)
        losses, p, t = self.losses(users, pos, neg)
        check_finite(losses, users, s.lr)
        routes = flood_routes(links, s.hops) if s.sharing != "none" else []
        losses.sum().backward()
        grads = {k: v.grad for k, v in p.items()}
        assert all(v is not None for v in grads.values())
        touched = grads["E"][t.member, t.slot]  # type: ignore[index]
        self._book(routes)
        with torch.no_grad():
            if s.sharing == "none":
                self._own_updates(users, t, touched, grads)  # type: ignore[arg-type]
            else:
                self._shared_update(users, t, touched, grads)  # type: ignore[arg-type]
        return losses.detach()

    def _book(self, routes: list[tuple[int, np.ndarray, np.ndarray]]) -> None:
        """The flood's ledger rows: one message per (origin, receiver) pair, in its round."""
        n_s = self.models.n_shared()
        size = message_bytes(n_s) if self.s.sharing == "one_bit" else float_bytes(n_s)
        for r, senders, receivers in routes:
            sizes = np.full(len(senders), size, np.int64)
            self.ledger.record(
                f"dgrec/flood/round={r}", "user", "user", sizes, senders=senders, receivers=receivers
            )

    def _own_updates(
        self, users: np.ndarray, t: Touched, touched: torch.Tensor, grads: dict[str, torch.Tensor]
    ) -> None:
        """``none`` sharing: each member applies its own gradient (untouched rows: exactly zero)."""
        params, lr = self.models.params, self.s.lr
        params["E"][users[t.member], t.row] -= lr * touched
        idx = torch.from_numpy(users)
        for k, g in grads.items():
            if k != "E":
                params[k][idx] -= lr * g

    def aggregate(
        self, m: int, t: Touched, touched: torch.Tensor, dense: dict[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """The group aggregate every member computes, per shared parameter (float64).

        Args:
            m: the group size.
            t: the touched rows.
            touched: ``[K, d]`` the members' item-table gradients on their touched rows (``t`` order).
            dense: each shared parameter other than ``E``: the members' gradients ``[m, ...]``.

        ``one_bit``: the decoded mean ``δ(e^β+1)/(e^β-1) · Σ encodings / m``, the sum drawn as the
        module docstring says; ``clipped`` / ``plain``: the mean of the (clipped) gradients.
        """
        s = self.s
        n_rows, d = self.models.params["E"].shape[1:]
        rows = torch.from_numpy(t.row)
        if s.sharing == "one_bit":
            bits = encode(touched, s.delta, s.beta, self.noise).to(torch.int64)
            total = torch.zeros((n_rows, d), dtype=torch.int64).index_add_(0, rows, bits)
            k = np.bincount(t.row, minlength=n_rows)
            rest = sum_of_zero_encodings(np.broadcast_to((m - k)[:, None], (n_rows, d)), self.noise)
            sums = {"E": total + torch.from_numpy(rest)}
            for name, g in dense.items():
                sums[name] = encode(g.reshape(m, -1), s.delta, s.beta, self.noise).to(torch.int64).sum(0)
            scale = decode_scale(s.delta, s.beta)
            return {name: scale * (v.to(torch.float64) / m) for name, v in sums.items()}
        clip = s.sharing == "clipped"
        vals = touched.clamp(-s.delta, s.delta) if clip else touched
        agg = {"E": torch.zeros((n_rows, d), dtype=torch.float64).index_add_(0, rows, vals.double()) / m}
        for name, g in dense.items():
            flat = g.reshape(m, -1)
            agg[name] = (flat.clamp(-s.delta, s.delta) if clip else flat).double().sum(0) / m
        return agg

    def _shared_update(
        self, users: np.ndarray, t: Touched, touched: torch.Tensor, grads: dict[str, torch.Tensor]
    ) -> None:
        """Every member applies the group aggregate of the shared parameters, its own of the private."""
        s, params = self.s, self.models.params
        shared = self.models.shared_names
        agg = self.aggregate(len(users), t, touched, {k: grads[k] for k in shared if k != "E"})
        idx = torch.from_numpy(users)
        for name in shared:
            step = s.lr * agg[name].float().reshape(params[name].shape[1:])
            if name == "E":
                for v in users.tolist():  # in place, one member's table at a time
                    params["E"][v].sub_(step)
            else:
                params[name][idx] -= step
        for name, g in grads.items():
            if name not in shared:
                params[name][idx] -= s.lr * g
