"""DGREC training loop (spec §5.3): sample a group, compute local gradients, share, update.

Per step, a centre user samples its group ``U`` (Algorithm 1); every member computes its local-loss
gradient on its own model and data (one BPR minibatch of ``batch`` positives with one uniform negative
each), updates its stored loss and count, and shares its gradient of the shared parameters:

* ``sharing="one_bit"`` (DGREC): clip + one-bit encode, flood for 2H rounds (Algorithm 2) between
  the users' peer programs (:mod:`.gossip`, over :class:`~fedgraphrec.runtime.peer.PeerTransport`:
  ledger, transcripts when asked), each member decoding the mean of what it holds;
* ``"laplace"`` (w/non-sharing): clip + Laplace(2δ/β) noise, flooded as floats, averaged;
* ``"clipped"`` (the no-noise reference): gradients clipped to ``[-δ, δ]`` and averaged as floats,
  which is what the one-bit decoder estimates without bias; the difference from ``one_bit`` is
  the encoding noise alone;
* ``"plain"`` (DMF/DLGNN-style baselines): raw gradients averaged over the group;
* ``"none"``: no sharing; each user applies its own gradient.

Ablation switches: ``neighbours=False`` (w/non-neighbor), ``hypergraph=False`` (w/non-item-hypergraph:
item–tag bipartite graph with trainable tag embeddings), ``sharing="laplace"`` (w/non-sharing), and
the model's ``item_graph`` / ``attention`` / ``pearson`` flags.

Every member then applies SGD with the aggregate (private parameters — DMF's user vector — with its own
gradient).

Two paths compute a group step (:attr:`DGREC.path`, the setting ``step_path``): the *reference* path
above (individual encodings, flooding between peer programs, transcripts), which audits, attacks and
``transcripts=true`` runs use, and the exact *fast* path (:mod:`.fast_step`: gradients on the
touched rows only, the group's sum of encodings drawn directly, the flood's ledger rows from its
tree), which runs wherever no individual message is observed and gives every quantity a party uses
the same distribution. One epoch = ``centres_per_epoch`` centres drawn without replacement from users with
training items (all of them by default). Evaluation is full ranking with each user's own model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto.errors import IntegrityError
from fedgraphrec.evaluation.ranking import evaluate_scores
from fedgraphrec.privacy.noise_source import laplace_from_uniform, noise_source
from fedgraphrec.privacy.one_bit import decode, encode
from fedgraphrec.protocols.dgrec.fast_step import FAST_SHARING, FastGroupStep, check_finite, minibatch
from fedgraphrec.protocols.dgrec.gossip import UserPeer, float_bytes, flood, message_bytes, share_public_items
from fedgraphrec.protocols.dgrec.hypergraph import UserHypergraphs, build_hypergraphs, public_split
from fedgraphrec.protocols.dgrec.model import UserModels
from fedgraphrec.protocols.dgrec.sampling import sample_group, sampling_weights
from fedgraphrec.protocols.dgrec.settings import DGRECSettings
from fedgraphrec.runtime.network import Network
from fedgraphrec.runtime.peer import PeerTransport
from fedgraphrec.seeding import hiding_rng, numpy_rng, torch_generator

__all__ = ["DGREC", "comm_bits_formula"]

_FLOAT_KINDS = {"plain": "float_gradient", "clipped": "clipped_gradient", "laplace": "laplace_gradient"}


class DGREC:
    """All users of a decentralised DGREC population, simulated in one process.

    Args:
        train: user×item training interactions.
        social: user×user adjacency (symmetrised here).
        tags: item×tag incidence used as hyperedges.
        settings: protocol settings.
        seed: run seed (named streams ``init``, ``public``, ``graph``, ``sample``, ``encode``).
        network: transport for ledger/transcripts (a fresh accounted one by default).
    """

    def __init__(
        self,
        train: sp.csr_matrix,
        social: sp.csr_matrix,
        tags: sp.csr_matrix,
        settings: DGRECSettings,
        seed: int = 0,
        network: Network | None = None,
    ) -> None:
        self.s, self.seed = settings, seed
        self.train = train.tocsr()
        n_users, n_items = train.shape
        soc = ((social + social.T) > 0).astype(np.float64).tocsr()
        soc.setdiag(0)
        soc.eliminate_zeros()
        self.social = soc
        self.network = network if network is not None else Network(n_users)
        self.transport = PeerTransport(self.network)
        self.public = public_split(self.train, settings.public_ratio, numpy_rng(seed, "public"))
        self._share_public()
        self.graphs: UserHypergraphs = build_hypergraphs(
            self.train,
            self.public,
            soc,
            tags,
            settings.max_items,
            numpy_rng(seed, "graph"),
            use_neighbours=settings.neighbours,
            bipartite=not settings.hypergraph,
        )
        extra = 0 if settings.hypergraph else tags.shape[1]
        self.models = UserModels(n_users, n_items, settings.local_model, torch_generator(seed, "init"), extra)
        self.deg = np.diff(self.train.indptr)
        self.loss = np.ones(n_users)
        self.count = np.zeros(n_users)
        # message ids always come from the seeded stream; the LDP noise from it too unless
        # secure_noise (then from the OS CSPRNG: a guarantee, not reproducible bit for bit)
        self._enc = torch_generator(seed, "encode")
        self.noise = noise_source(bool(settings.secure_noise), generator=self._enc)
        self._ids = torch_generator(seed, "message-ids")  # float sharing's message ids
        self.step_no = 0
        self._fast = (
            FastGroupStep(self.models, self.graphs, self.train, settings, self.noise, self.network.ledger)
            if settings.sharing in FAST_SHARING
            else None
        )

    @property
    def path(self) -> str:
        """``"fast"`` where no individual message is observed (no transcripts), else ``"reference"``."""
        if self._fast is None or self.s.step_path == "reference" or self.network.transcript.enabled:
            return "reference"
        return "fast"

    def _share_public(self) -> None:
        """Set-up: each user's peer sends its public item list to its 1-hop neighbours."""
        pub, soc = self.public, self.social
        self.peers = {
            u: UserPeer(
                u,
                frozenset(soc.indices[soc.indptr[u] : soc.indptr[u + 1]].tolist()),
                pub.indices[pub.indptr[u] : pub.indptr[u + 1]].copy(),
                self.train.shape[1],
            )
            for u in range(self.train.shape[0])
        }
        for u, peer in self.peers.items():
            self.transport.register(u, peer)
        share_public_items(self.transport, self.peers)

    # ------------------------------------------------------------------ one step
    def _batch(self, users: np.ndarray, rng: np.random.Generator) -> tuple[torch.Tensor, ...]:
        """``batch`` positives per user, one negative each drawn uniformly from ``I_u^-``.

        Returns ``(pos, neg, has_pos, n_neg)``; ``n_neg = |I_u^-|`` is the Eq.-2 factor. Negatives
        exclude the user's training items, so ``n_neg · mean`` is an unbiased estimate of Eq. 2.
        """
        b, n_items = self.s.batch, self.train.shape[1]
        if self.path == "fast":  # the fast step's vectorised draw (same distribution, other numbers)
            pos, neg = minibatch(self.train, users, b, rng)
        else:
            pos, neg = self._batch_loop(users, rng)
        has = torch.from_numpy((self.deg[users] > 0).astype(np.float32))
        n_neg = torch.from_numpy((n_items - self.deg[users]).astype(np.float32))
        return torch.from_numpy(pos), torch.from_numpy(neg), has, n_neg

    def _batch_loop(self, users: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """The reference path's minibatch, user by user (the draws recorded runs were made with)."""
        b, n_items = self.s.batch, self.train.shape[1]
        pos = np.zeros((len(users), b), np.int64)
        neg = rng.integers(0, n_items, size=pos.shape)
        for r, u in enumerate(users):
            it = self.train.indices[self.train.indptr[u] : self.train.indptr[u + 1]]
            if len(it):
                pos[r] = rng.choice(it, size=b)
                if len(it) < n_items:  # redraw negatives that hit a training item
                    hit = np.isin(neg[r], it)
                    while hit.any():
                        neg[r, hit] = rng.integers(0, n_items, size=int(hit.sum()))
                        hit = np.isin(neg[r], it)
        return pos, neg

    def _losses(
        self, p: dict[str, torch.Tensor], users: np.ndarray, rng: np.random.Generator
    ) -> torch.Tensor:
        """Per-user local losses (Eq. 3) of ``users`` under the gathered parameters ``p``."""
        idx = torch.from_numpy(np.asarray(users, dtype=np.int64))
        pos, neg, has, n_neg = self._batch(np.asarray(users), rng)
        g = self.graphs
        return self.models.losses(p, g.items[idx], g.mask[idx], g.prop[idx], pos, neg, has, n_neg)

    def local_gradients(self, users: np.ndarray, rng: np.random.Generator) -> torch.Tensor:
        """Each user's raw shared-parameter gradient ``[len(users), n_s]`` (no update, no sharing).

        What a member would hand to the encoder; attacks use it to compare plain and encoded sharing.
        """
        idx = torch.from_numpy(np.asarray(users, dtype=np.int64))
        p = {k: v[idx].clone().requires_grad_(True) for k, v in self.models.params.items()}
        self._losses(p, np.asarray(users), rng).sum().backward()
        return torch.cat([p[k].grad.reshape(len(idx), -1) for k in self.models.shared_names], dim=1)  # type: ignore[union-attr]

    def step(self, centre: int) -> int:
        """One group iteration initiated by ``centre``; returns the group size."""
        s = self.s
        rng = hiding_rng(bool(s.secure_sampling), self.seed, "sample", self.step_no)
        self.step_no += 1
        links = sample_group(
            self.social, centre, s.hops, s.fanout, sampling_weights(self.loss, self.count), rng
        )
        return self.group_step(links, rng)

    def group_step(self, links: dict[int, set[int]], rng: np.random.Generator) -> int:
        """Local gradients, sharing and SGD updates of one sampled group ``links``; returns ``|U|``.

        Split from :meth:`step` so that a diagnostic can train a fixed group (no sampling). Runs on
        :attr:`path`.
        """
        s = self.s
        users = np.asarray(sorted(links), dtype=np.int64)
        if self._fast is not None and self.path == "fast":
            self.loss[users] = self._fast(links, rng).numpy()
            self.count[users] += 1
            return len(users)
        idx = torch.from_numpy(users)
        p = {k: v[idx].clone().requires_grad_(True) for k, v in self.models.params.items()}
        losses = self._losses(p, users, rng)
        check_finite(losses, users, s.lr)  # else NaN reaches the Eq.-4 weights and numpy fails obscurely
        losses.sum().backward()
        self.loss[users] = losses.detach().numpy()
        self.count[users] += 1
        shared = self.models.shared_names
        flat = torch.cat([p[k].grad.reshape(len(users), -1) for k in shared], dim=1)  # type: ignore[union-attr]
        aggs = self._aggregate(flat, links, users)
        with torch.no_grad():
            # each member applies the aggregate it computed from what it holds; members whose
            # aggregates are the same object (the same held set, decoded once) update together
            groups: dict[int, list[int]] = {}
            for r, agg in enumerate(aggs):
                groups.setdefault(id(agg), []).append(r)
            for rows in groups.values():
                agg, sel = aggs[rows[0]], idx[rows]
                off = 0
                for k in shared:
                    n = p[k][0].numel()
                    upd = agg.expand(len(rows), -1)
                    self.models.params[k][sel] -= (
                        s.lr * upd[:, off : off + n].reshape((len(rows), *p[k].shape[1:])).float()
                    )
                    off += n
            for k in self.models.params:
                if k not in shared:
                    self.models.params[k][idx] -= s.lr * p[k].grad  # type: ignore[operator]
        return len(users)

    def _aggregate(
        self, flat: torch.Tensor, links: dict[int, set[int]], users: np.ndarray
    ) -> list[torch.Tensor]:
        """Each member's aggregate ``[1, n_s]`` (row order of ``users``), from what its peer holds."""
        s = self.s
        if s.sharing == "none":
            return [flat[r : r + 1] for r in range(len(users))]
        if s.sharing == "one_bit":
            sent = encode(flat, s.delta, s.beta, self.noise)
            ids = torch.randint(0, 2**62, (len(users),), generator=self._enc).tolist()
            kind, size = "one_bit_gradient", message_bytes(flat.shape[1])
        else:
            sent = flat if s.sharing == "plain" else flat.clamp(-s.delta, s.delta)
            if s.sharing == "laplace":
                noise = laplace_from_uniform(self.noise.uniform(tuple(flat.shape)), 2 * s.delta / s.beta)
                sent = sent + noise.to(flat.dtype)
            ids = torch.randint(0, 2**62, (len(users),), generator=self._ids).tolist()
            kind, size = f"{_FLOAT_KINDS[s.sharing]}", float_bytes(flat.shape[1])
        messages = {int(v): (ids[r], sent[r]) for r, v in enumerate(users)}
        held = flood(links, messages, s.hops, self.transport, kind=kind, size=size)
        if any(len(held[int(v)]) != len(users) for v in users):
            raise RuntimeError("flooding did not deliver every gradient within 2H rounds")
        cache: dict[tuple[tuple[int, int], ...], torch.Tensor] = {}
        return [self._combine(held[int(v)], cache) for v in users]

    def _combine(
        self, held: dict[int, torch.Tensor], cache: dict[tuple[tuple[int, int], ...], torch.Tensor]
    ) -> torch.Tensor:
        """A member's aggregate of the messages it holds: the decoded one-bit mean, or the float mean.

        Members holding the very same messages (same ids, same tensors) get one shared result.

        Raises:
            IntegrityError: a one-bit message holds a value other than ``±1``.
        """
        key = tuple(sorted((mid, id(x)) for mid, x in held.items()))
        hit = cache.get(key)
        if hit is not None:
            return hit
        stack = torch.stack([held[mid] for mid, _ in key])
        if self.s.sharing == "one_bit":
            if not bool((stack.abs() == 1).all()):
                raise IntegrityError("dgrec/flood: a one-bit message holds a value other than -1 or +1")
            out = decode(stack, self.s.delta, self.s.beta).unsqueeze(0)
        else:
            out = stack.mean(0, keepdim=True)
        cache[key] = out
        return out

    # ------------------------------------------------------------------ loop
    def epoch(self, epoch: int) -> float:
        """One epoch; returns the mean stored loss of users with training items."""
        active = np.flatnonzero(self.deg > 0)
        rng = numpy_rng(self.seed, "centres", epoch)
        k = len(active) if self.s.centres_per_epoch is None else min(self.s.centres_per_epoch, len(active))
        for c in rng.choice(active, size=k, replace=False):
            self.step(int(c))
        return float(self.loss[active].mean())

    def state_dict(self) -> dict[str, Any]:
        """Every user's model, the sampling state and the seeded streams (tensors and plain data).

        A CSPRNG noise source (``secure_noise``) has no state to save: a resumed run draws fresh noise.
        """
        return {
            "params": {k: v.clone() for k, v in self.models.params.items()},
            "loss": torch.from_numpy(self.loss.copy()),
            "count": torch.from_numpy(self.count.copy()),
            "step_no": self.step_no,
            "encode_stream": self._enc.get_state(),
            "id_stream": self._ids.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (the population must be built with the same data, settings, seed)."""
        for k, v in state["params"].items():
            self.models.params[k].copy_(v)
        self.loss[:] = state["loss"].numpy()
        self.count[:] = state["count"].numpy()
        self.step_no = int(state["step_no"])
        self._enc.set_state(state["encode_stream"])
        self._ids.set_state(state["id_stream"])

    @torch.no_grad()
    def score_users(self, users: torch.Tensor) -> torch.Tensor:
        """Full-catalogue scores ``[len(users), n_items]``, each user by its own model."""
        m, g = self.models, self.graphs
        p = {k: v[users] for k, v in m.params.items()}
        e_u, _ = m.user_vectors(p, g.items[users], g.mask[users], g.prop[users])
        return m.score(p, e_u, torch.arange(m.n_items).expand(len(users), -1))

    def evaluate(
        self, test: sp.csr_matrix, exclude: list[sp.csr_matrix | None], users: np.ndarray | None = None
    ) -> dict[str, float]:
        """recall@20 / ndcg@20 with each user's own model (full ranking; ``users``: a subset)."""
        m = self.models
        res = evaluate_scores(
            self.score_users, m.n_users, m.n_items, test, exclude, ks=(20,), users=users, chunk_size=64
        )
        return {"recall@20": float(res.metrics["recall@20"]), "ndcg@20": float(res.metrics["ndcg@20"])}


def comm_bits_formula(n_s: int, hops: int, fanout: int, real_bits: int = 64) -> tuple[float, float]:
    """Paper §4 worst-case per-user bits: DGREC ``2H n_s Σ`` vs float sharing ``d_r n_s Σ``."""
    geo = (1 - fanout**hops) / (1 - fanout) if fanout != 1 else hops
    return 2 * hops * n_s * geo, real_bits * n_s * geo
