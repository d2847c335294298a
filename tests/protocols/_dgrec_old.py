"""DGREC training loop (spec §5.3): sample a group, compute local gradients, share, update.

Per step, a centre user samples its group ``U`` (Algorithm 1); every member computes its local-loss
gradient on its own model and data (one BPR minibatch of ``batch`` positives with one uniform negative
each), updates its stored loss and count, and shares its gradient of the shared parameters:

* ``sharing="one_bit"`` (DGREC): clip + one-bit encode, flood for 2H rounds (Algorithm 2) over the
  :class:`~fedgraphrec.runtime.network.Network` (ledger; transcripts when asked), decode the mean;
* ``"laplace"`` (w/non-sharing): clip + Laplace(2δ/β) noise, shared as floats, averaged;
* ``"clipped"`` (the no-noise reference): gradients clipped to ``[-δ, δ]`` and averaged as floats,
  which is what the one-bit decoder estimates without bias; the difference from ``one_bit`` is
  the encoding noise alone;
* ``"plain"`` (DMF/DLGNN-style baselines): raw gradients averaged over the group;
* ``"none"``: no sharing; each user applies its own gradient.

Ablation switches: ``neighbours=False`` (w/non-neighbor), ``hypergraph=False`` (w/non-item-hypergraph:
item–tag bipartite graph with trainable tag embeddings), ``sharing="laplace"`` (w/non-sharing), and
the model's ``item_graph`` / ``attention`` / ``pearson`` flags.

Every member then applies SGD with the aggregate (private parameters — DMF's user vector — with its own
gradient). One epoch = ``centres_per_epoch`` centres drawn without replacement from users with
training items (all of them by default). Evaluation is full ranking with each user's own model.
"""

from __future__ import annotations

from fedgraphrec.protocols.dgrec.trainer import DGRECSettings

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.evaluation.ranking import evaluate_scores
from fedgraphrec.privacy.noise_source import laplace_from_uniform, noise_source
from fedgraphrec.privacy.one_bit import decode, encode
from fedgraphrec.protocols.dgrec.hypergraph import UserHypergraphs, build_hypergraphs, public_split
from fedgraphrec.protocols.dgrec.model import ModelConfig, UserModels
from fedgraphrec.protocols.dgrec.sampling import sample_group, sampling_weights
from fedgraphrec.runtime.network import Network
from fedgraphrec.seeding import hiding_rng, numpy_rng, torch_generator





class OldDGREC:
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
        self.models = UserModels(n_users, n_items, settings.model, torch_generator(seed, "init"), extra)
        self.deg = np.diff(self.train.indptr)
        self.loss = np.ones(n_users)
        self.count = np.zeros(n_users)
        # message ids always come from the seeded stream; the LDP noise from it too unless
        # secure_noise (then from the OS CSPRNG: a guarantee, not reproducible bit for bit)
        self._enc = torch_generator(seed, "encode")
        self.noise = noise_source(settings.secure_noise, generator=self._enc)
        self.step_no = 0

    def _share_public(self) -> None:
        """Each user sends its public item list to its 1-hop neighbours (ledger + transcripts)."""
        src, dst = self.social.nonzero()
        lists = [self.public.indices[self.public.indptr[u] : self.public.indptr[u + 1]].copy() for u in src]
        self.network.transmit(
            "dgrec/public_items",
            "user",
            "user",
            np.asarray([8 * len(x) for x in lists], dtype=np.int64),
            kind="public_items",
            protected=False,
            payloads=lists if self.network.transcript.enabled else None,
            senders=src,
            receivers=dst,
        )

    # ------------------------------------------------------------------ one step
    def _batch(self, users: np.ndarray, rng: np.random.Generator) -> tuple[torch.Tensor, ...]:
        """``batch`` positives per user, one negative each drawn uniformly from ``I_u^-``.

        Returns ``(pos, neg, has_pos, n_neg)``; ``n_neg = |I_u^-|`` is the Eq.-2 factor. Negatives
        exclude the user's training items, so ``n_neg · mean`` is an unbiased estimate of Eq. 2.
        """
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
        has = torch.from_numpy((self.deg[users] > 0).astype(np.float32))
        n_neg = torch.from_numpy((n_items - self.deg[users]).astype(np.float32))
        return torch.from_numpy(pos), torch.from_numpy(neg), has, n_neg

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
        rng = hiding_rng(s.secure_sampling, self.seed, "sample", self.step_no)
        self.step_no += 1
        links = sample_group(
            self.social, centre, s.hops, s.fanout, sampling_weights(self.loss, self.count), rng
        )
        return self.group_step(links, rng)

    def group_step(self, links: dict[int, set[int]], rng: np.random.Generator) -> int:
        """Local gradients, sharing and SGD updates of one sampled group ``links``; returns ``|U|``.

        Split from :meth:`step` so that a diagnostic can train a fixed group (no sampling).
        """
        s = self.s
        users = np.asarray(sorted(links), dtype=np.int64)
        idx = torch.from_numpy(users)
        p = {k: v[idx].clone().requires_grad_(True) for k, v in self.models.params.items()}
        losses = self._losses(p, users, rng)
        if not torch.isfinite(losses).all():  # else NaN reaches the Eq.-4 weights and numpy fails obscurely
            bad = users[~torch.isfinite(losses).numpy()][:5].tolist()
            raise FloatingPointError(
                f"non-finite local loss of users {bad} (diverged: is lr={s.lr} too large?)"
            )
        losses.sum().backward()
        self.loss[users] = losses.detach().numpy()
        self.count[users] += 1
        shared = self.models.shared_names
        flat = torch.cat([p[k].grad.reshape(len(users), -1) for k in shared], dim=1)  # type: ignore[union-attr]
        agg = self._aggregate(flat, links, users)
        with torch.no_grad():
            off = 0
            for k in shared:
                n = p[k][0].numel()
                upd = agg.expand(len(users), -1)
                self.models.params[k][idx] -= s.lr * upd[:, off : off + n].reshape(p[k].shape).float()
                off += n
            for k in self.models.params:
                if k not in shared:
                    self.models.params[k][idx] -= s.lr * p[k].grad  # type: ignore[operator]
        return len(users)

    def _aggregate(self, flat: torch.Tensor, links: dict[int, set[int]], users: np.ndarray) -> torch.Tensor:
        s = self.s
        if s.sharing == "none":
            return flat
        if s.sharing == "plain":
            self._account(links, 8 * flat.shape[1], "float_gradient")
            return flat.mean(0, keepdim=True)
        if s.sharing == "clipped":
            self._account(links, 8 * flat.shape[1], "clipped_gradient")
            return flat.clamp(-s.delta, s.delta).mean(0, keepdim=True)
        if s.sharing == "laplace":
            b = 2 * s.delta / s.beta
            noise = laplace_from_uniform(self.noise.uniform(tuple(flat.shape)), b).to(flat.dtype)
            self._account(links, 8 * flat.shape[1], "laplace_gradient")
            return (flat.clamp(-s.delta, s.delta) + noise).mean(0, keepdim=True)
        enc = encode(flat, s.delta, s.beta, self.noise)
        ids = torch.randint(0, 2**62, (len(users),), generator=self._enc).tolist()
        held = flood(links, {int(v): (ids[r], enc[r]) for r, v in enumerate(users)}, s.hops, self.network)
        if any(len(h) != len(users) for h in held.values()):
            raise RuntimeError("flooding did not deliver every encoded gradient within 2H rounds")
        # every member holds the same set, so every member's decoded mean is this one
        return decode(enc, s.delta, s.beta).unsqueeze(0)

    def _account(self, links: dict[int, set[int]], msg: int, kind: str) -> None:
        """Ledger for float sharing: the same flooding pattern, 8 bytes per coordinate."""
        n = len(links)
        n_links = sum(len(v) for v in links.values())
        self.network.ledger.record(f"dgrec/{kind}", "user", "user", msg + 8, count=n_links * (n - 1))

    # ------------------------------------------------------------------ loop
    def epoch(self, epoch: int) -> float:
        """One epoch; returns the mean stored loss of users with training items."""
        active = np.flatnonzero(self.deg > 0)
        rng = numpy_rng(self.seed, "centres", epoch)
        k = len(active) if self.s.centres_per_epoch is None else min(self.s.centres_per_epoch, len(active))
        for c in rng.choice(active, size=k, replace=False):
            self.step(int(c))
        return float(self.loss[active].mean())

    @torch.no_grad()
    def evaluate(
        self, test: sp.csr_matrix, exclude: list[sp.csr_matrix | None], users: np.ndarray | None = None
    ) -> dict[str, float]:
        """recall@20 / ndcg@20 with each user's own model (full ranking; ``users``: a subset)."""
        m, g = self.models, self.graphs
        all_items = torch.arange(m.n_items)

        def score(u: torch.Tensor) -> torch.Tensor:
            p = {k: v[u] for k, v in m.params.items()}
            e_u, _ = m.user_vectors(p, g.items[u], g.mask[u], g.prop[u])
            return m.score(p, e_u, all_items.expand(len(u), -1))

        res = evaluate_scores(
            score, m.n_users, m.n_items, test, exclude, ks=(20,), users=users, chunk_size=64
        )
        return {"recall@20": float(res.metrics["recall@20"]), "ndcg@20": float(res.metrics["ndcg@20"])}


def comm_bits_formula(n_s: int, hops: int, fanout: int, real_bits: int = 64) -> tuple[float, float]:
    """Paper §4 worst-case per-user bits: DGREC ``2H n_s Σ`` vs float sharing ``d_r n_s Σ``."""
    geo = (1 - fanout**hops) / (1 - fanout) if fanout != 1 else hops
    return 2 * hops * n_s * geo, real_bits * n_s * geo


ID_BYTES = 8


def message_bytes(n_s: int) -> int:
    """Bytes of one encoded message: one bit per coordinate plus its id."""
    return (n_s + 7) // 8 + ID_BYTES


def flood(
    links: Mapping[int, set[int]],
    messages: Mapping[int, tuple[int, torch.Tensor]],
    hops: int,
    network: Network | None = None,
    *,
    phase: str = "dgrec/flood",
    forward_all: bool = False,
) -> dict[int, dict[int, torch.Tensor]]:
    """Run ``2·hops`` flooding rounds and return what every member holds, keyed by message id.

    Args:
        links: sampled neighbour sets ``N^s_v`` of the group (symmetric).
        messages: member → (message id, encoded ``±1`` vector); every member of ``links`` must have one.
        hops: H; the group's diameter is at most 2H, so 2H rounds deliver everything.
        network: transport that records the ledger and transcripts (``None``: no accounting).
        phase: ledger phase name.
        forward_all: resend the whole held set each round (literal Alg. 2) instead of only new messages.
    """
    members = sorted(links)
    missing = [v for v in members if v not in messages]
    if missing:
        raise ValueError(f"messages: no encoded vector for group members {missing[:5]}")
    held: dict[int, dict[int, torch.Tensor]] = {v: {messages[v][0]: messages[v][1]} for v in members}
    for r in range(2 * hops):
        snapshot = {v: dict(h) for v, h in held.items()}
        payloads: list[torch.Tensor] = []
        sizes: list[int] = []
        senders: list[int] = []
        receivers: list[int] = []
        for v in members:
            for w in sorted(links[v]):
                send = (
                    snapshot[v] if forward_all else {k: x for k, x in snapshot[v].items() if k not in held[w]}
                )
                for mid, vec in send.items():
                    payloads.append(vec)
                    sizes.append(message_bytes(vec.numel()))
                    senders.append(v)
                    receivers.append(w)
                    held[w].setdefault(mid, vec)
        if network is not None and sizes:
            network.transmit(
                f"{phase}/round={r}",
                "user",
                "user",
                np.asarray(sizes, dtype=np.int64),
                kind="one_bit_gradient",
                protected=False,
                payloads=payloads,
                senders=np.asarray(senders),
                receivers=np.asarray(receivers),
            )
    return held
