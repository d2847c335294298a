"""Learners for P4GCN and its rating baselines, for the one training loop (epoch-level, rating metrics).

Each learner trains one epoch per :meth:`~P4GCNLearner.train_round` and evaluates held-out ratings
with RMSE and MAE (lower is better) per split (:meth:`~P4GCNLearner.evaluate_splits`), so the
trainer selects and stops on ``valid`` RMSE as for every protocol:

* :class:`P4GCNLearner` — the ``p4gcn*`` methods: the two organisation programs and the coordinator
  (:class:`~fedgraphrec.protocols.p4gcn.driver.P4GCNRun`); the recommender evaluates with the social
  rows it last decrypted (free post-processing; the accountant already counts one extra release);
* :class:`RatingLearner` — the baselines ``pmf``, ``neumf``, ``gcn``, ``lightgcn``, ``sesorec``
  (social-regularised MF: the secret-shared products of SeSoRec/S3Rec compute the same numbers, so
  accuracy is simulated in plaintext), ``fesog-`` (FeSoG without its social module), one party each.

Both take ``(settings, data, *, seed, dtype, crypto, reproducible, transcripts)``;
:func:`make_rating_learner` picks by :attr:`~fedgraphrec.protocols.p4gcn.settings.P4GCNSettings.method`.
Datasets without a validation split (Douban) hold out a seeded 10 % of train (:func:`rating_splits`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.data.types import Ratings, SocialGraph
from fedgraphrec.evaluation.rating import mae, rmse
from fedgraphrec.models.propagation import NormalizedBipartite
from fedgraphrec.models.rating import Backbone, FeSoGItem, NeuMF, decode
from fedgraphrec.protocols.p4gcn.driver import P4GCNRun
from fedgraphrec.protocols.p4gcn.settings import P4GCNSettings
from fedgraphrec.protocols.p4gcn.wire import make_he
from fedgraphrec.runtime.ledger import Ledger
from fedgraphrec.runtime.network import CryptoMode, Network
from fedgraphrec.seeding import seeded_generator
from fedgraphrec.training.learner_base import BatchStats

__all__ = [
    "Arrays",
    "P4GCNLearner",
    "RatingLearner",
    "make_rating_learner",
    "rating_splits",
    "shuffled_social",
]

Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]
SHUFFLE_SEED = 12345
"""Seed of the ``social = "shuffled"`` control's permutation (fixed: the control is one graph)."""


def rating_splits(data: Ratings, seed: int) -> tuple[Arrays, Arrays, Arrays]:
    """(train, valid, test) arrays; without a validation split, a seeded 10 % of train is held out."""

    def arr(s: Any) -> Arrays:
        return np.array(s.users), np.array(s.items), np.array(s.ratings, dtype=np.float64)

    train, test = arr(data.train), arr(data.test)
    if data.valid is not None:
        return train, arr(data.valid), test
    rng = np.random.default_rng([seed, 7])
    perm = rng.permutation(len(train[0]))
    n_val = len(perm) // 10
    val_idx, tr_idx = perm[:n_val], perm[n_val:]
    return tuple(a[tr_idx] for a in train), tuple(a[val_idx] for a in train), test  # type: ignore[return-value]


def shuffled_social(data: Ratings, seed: int) -> Ratings:
    """``data`` with its social graph's user ids permuted: the control for "does P4GCN use the links?".

    Degrees, link count and the graph's shape stay; who is linked to whom no longer matches the
    ratings. A P4GCN run that is as accurate on this graph gains nothing from the real one.
    """
    if data.social is None:
        raise ValueError(f"dataset {data.name!r} has no social graph to shuffle")
    perm = np.random.default_rng(seed).permutation(data.n_users)
    s = data.social
    return dataclasses.replace(data, social=SocialGraph(s.n_users, perm[s.src], perm[s.dst], s.directed))


def _prepared(settings: P4GCNSettings, data: Ratings, seed: int) -> tuple[Ratings, dict[str, Arrays], Arrays]:
    if settings.social == "shuffled":
        data = shuffled_social(data, seed=SHUFFLE_SEED)
    tr, val, te = rating_splits(data, seed)
    return data, {"valid": val, "test": te}, tr


def _grid(
    predict: Callable[[np.ndarray, np.ndarray], np.ndarray], users: torch.Tensor, n_items: int
) -> torch.Tensor:
    """``predict`` on every (user, item) pair of ``users`` × all items, as ``[len(users), n_items]``."""
    u = users.numpy().astype(np.int64)
    pairs_u, pairs_i = np.repeat(u, n_items), np.tile(np.arange(n_items, dtype=np.int64), len(u))
    return torch.from_numpy(np.asarray(predict(pairs_u, pairs_i), dtype=np.float64).reshape(len(u), n_items))


class P4GCNLearner:
    """A P4GCN variant (module docstring); one :meth:`train_round` is one epoch of the schedule.

    Args:
        settings: the run's settings (a ``p4gcn*`` method).
        data: ratings and the social graph.
        seed: the run seed.
        dtype: must be float64 (the sandwiches and the recommender run in float64).
        crypto: ``real`` sends ciphertexts as the backend's bytes; ``accounted`` hands them over.
        reproducible: overrides ``settings.reproducible`` when given.
        transcripts: record what each organisation receives (for audits).
    """

    def __init__(
        self,
        settings: P4GCNSettings,
        data: Ratings,
        *,
        seed: int,
        dtype: torch.dtype = torch.float64,
        crypto: CryptoMode = "accounted",
        reproducible: bool | None = None,
        transcripts: bool = False,
    ) -> None:
        if not settings.is_p4gcn:
            raise ValueError(f"P4GCNLearner runs the p4gcn methods, not {settings.method!r}")
        if dtype != torch.float64:
            raise ValueError(f"P4GCN runs in float64 (its sandwiches and model); got dtype {dtype}")
        if data.social is None:
            raise ValueError(f"dataset {data.name!r}: P4GCN needs a social graph")
        if reproducible is not None:
            settings = dataclasses.replace(settings, reproducible=reproducible)
        self.settings = settings
        data, splits, tr = _prepared(settings, data, seed)
        t0 = time.perf_counter()
        backend = make_he(settings.backend, settings.dim)
        net = Network(0, crypto=crypto, transcripts=transcripts, protocol="p4gcn")
        adj = data.social.adjacency(symmetric=True)  # type: ignore[union-attr]
        self.run = P4GCNRun(
            tr, data.n_users, data.n_items, adj, settings, backend, data.rating_range, seed=seed,
            network=net, splits=splits,
        )  # fmt: skip
        self.setup_seconds = time.perf_counter() - t0
        self.epoch_seconds: list[float] = []
        self.n_items = data.n_items

    @property
    def ledger(self) -> Ledger:
        """Every message between the organisations, booked once."""
        return self.run.net.ledger

    def train_round(self, epoch: int) -> BatchStats:
        """One epoch (0-based); the loss is the mean batch MSE."""
        t = time.perf_counter()
        loss = self.run.run_epoch(epoch)
        self.epoch_seconds.append(time.perf_counter() - t)
        return BatchStats(loss=loss, bpr=0.0, reg=0.0)

    def evaluate_splits(self, splits: list[str], ks: list[int] | None = None) -> dict[str, dict[str, float]]:
        """RMSE and MAE per split (``ks`` is unused: rating metrics have no cut-off)."""
        return self.run.evaluate(list(splits))

    def score_rows(self, users: torch.Tensor) -> torch.Tensor:
        """Predicted ratings of ``users`` for every item (the run's model snapshot; in process only)."""
        return _grid(self.run.predict, users, self.n_items)

    def pop_deviation(self) -> None:
        """P4GCN has no centralized oracle to verify against (DP noise; HE arithmetic)."""
        return None

    def run_summary(self) -> dict[str, Any]:
        """The privacy report, the backend, the ciphertext traffic and the timing."""
        run, s = self.run, self.settings
        sig = run.p2.sigma * run.p1.unscale
        return {
            "privacy": run.privacy(),
            "backend": run.backend.name,
            "cipher_GB": self.ledger.total_bytes() / 1e9,
            "releases_K": run.releases,
            "randomness": {
                "reproducible": not s.hides(),
                "weights": "csprng" if s.hides() else "seed",
                "noise": "csprng" if s.hides("secure_noise") else "seed",
            },
            "eps_target": s.eps,
            "mean_noise_row_norm": float(np.mean(sig) * np.sqrt(s.dim)),
            "mean_signal_row_norm": float(np.mean(np.linalg.norm(run.p1.y_cache, axis=1))),
            "setup_seconds": self.setup_seconds,
            "epoch_seconds": list(self.epoch_seconds),
        }

    def state_dict(self) -> dict[str, Any]:
        """Tensors and plain data of both organisations and the coordinator (an in-process checkpoint)."""
        return self.run.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` into a learner built with the same settings, data and seed."""
        self.run.load_state_dict(state)


class RatingLearner:
    """A rating baseline (module docstring): one party, Adam on minibatches of ratings.

    Args: as :class:`P4GCNLearner` (``crypto``, ``reproducible`` and ``transcripts`` do not apply).
    """

    def __init__(
        self,
        settings: P4GCNSettings,
        data: Ratings,
        *,
        seed: int,
        dtype: torch.dtype = torch.float32,
        crypto: CryptoMode = "accounted",
        reproducible: bool | None = None,
        transcripts: bool = False,
    ) -> None:
        if settings.is_p4gcn:
            raise ValueError(f"RatingLearner runs the baselines, not {settings.method!r}")
        self.settings = s = settings
        data, self.splits, tr = _prepared(settings, data, seed)
        self.range = data.rating_range
        gen = seeded_generator(seed)
        self.model: torch.nn.Module
        if s.method == "neumf":
            self.model = NeuMF(data.n_users, data.n_items, s.dim, gen)
        elif s.method == "fesog-":
            self.model = FeSoGItem(data.n_users, data.n_items, tr[0], tr[1], s.dim, gen)
        else:
            kind = {"pmf": "pmf", "sesorec": "pmf", "gcn": "gcn", "lightgcn": "lightgcn"}[s.method]
            m = sp.csr_matrix((np.ones(len(tr[0])), (tr[0], tr[1])), shape=(data.n_users, data.n_items))
            m.data[:] = 1.0
            graph = NormalizedBipartite.from_train(m, dtype=torch.float32)
            self.model = Backbone(kind, graph, s.dim, s.layers, gen)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=s.lr)
        self.social: sp.csr_matrix | None = None
        if s.method == "sesorec":
            assert data.social is not None
            self.social = sp.csr_matrix(data.social.adjacency(symmetric=True), dtype=np.float32)
        self.order_rng = np.random.default_rng([seed, 11])
        self.n_items = data.n_items
        self.train = tuple(torch.from_numpy(a) for a in tr)

    @property
    def ledger(self) -> None:
        """A baseline sends nothing."""
        return None

    def _scores(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        lo, hi = self.range
        if isinstance(self.model, NeuMF):
            return self.model(users, items, lo, hi)
        u, v = self.model()
        return decode(u[users], v[items], lo, hi)

    def train_round(self, epoch: int) -> BatchStats:
        """One epoch of minibatches in a seeded order; the loss is the mean batch loss."""
        t_u, t_i, t_r = self.train
        s = self.settings
        perm = torch.from_numpy(self.order_rng.permutation(len(t_u)))
        losses = []
        for k in range(0, len(perm), s.batch):
            b = perm[k : k + s.batch]
            loss = ((self._scores(t_u[b], t_i[b]) - t_r[b].float()) ** 2).mean()
            if self.social is not None and isinstance(self.model, Backbone):
                bu = np.unique(t_u[b].numpy())
                sub = self.social[bu].tocoo()
                if sub.nnz:
                    diff = (
                        self.model.user[torch.from_numpy(bu[sub.row])]
                        - self.model.user[torch.from_numpy(sub.col)]
                    )
                    loss = loss + s.social_reg / 2 * (diff**2).sum() / len(b)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            losses.append(float(loss.detach()))
        return BatchStats(loss=float(np.mean(losses)), bpr=0.0, reg=0.0)

    @torch.no_grad()
    def predict(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Predicted ratings of (user, item) pairs."""
        return self._scores(torch.from_numpy(users), torch.from_numpy(items)).double().numpy()

    def score_rows(self, users: torch.Tensor) -> torch.Tensor:
        """Predicted ratings of ``users`` for every item (the run's model snapshot)."""
        return _grid(self.predict, users, self.n_items)

    def evaluate_splits(self, splits: list[str], ks: list[int] | None = None) -> dict[str, dict[str, float]]:
        """RMSE and MAE per split, predictions clipped to the rating range."""
        out = {}
        for split in splits:
            u, i, r = self.splits[split]
            pred = self.predict(u, i)
            out[split] = {"rmse": rmse(pred, r, clip=self.range), "mae": mae(pred, r, clip=self.range)}
        return out

    def pop_deviation(self) -> None:
        """A baseline has no oracle to verify against."""
        return None

    def run_summary(self) -> dict[str, Any]:
        """Nothing beyond the metrics: no privacy mechanism, no traffic."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        """Model, optimiser and the order stream's state (tensors and plain data)."""
        return {
            "model": self.model.state_dict(),
            "opt": self.opt.state_dict(),
            "order_rng": self.order_rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])
        self.order_rng.bit_generator.state = state["order_rng"]


def make_rating_learner(
    settings: P4GCNSettings, data: Ratings, *, seed: int, dtype: torch.dtype | None = None,
    crypto: CryptoMode = "accounted", reproducible: bool | None = None, transcripts: bool = False,
) -> P4GCNLearner | RatingLearner:  # fmt: skip
    """The learner of ``settings.method`` (P4GCN in float64, the baselines in float32 by default)."""
    if settings.is_p4gcn:
        return P4GCNLearner(settings, data, seed=seed, dtype=dtype or torch.float64, crypto=crypto,
                            reproducible=reproducible, transcripts=transcripts)  # fmt: skip
    return RatingLearner(settings, data, seed=seed, dtype=dtype or torch.float32)
