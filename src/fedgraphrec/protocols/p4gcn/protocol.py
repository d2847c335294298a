"""P4GCN training as message exchanges between the two role programs (spec §4.5).

:class:`P4GCN` owns a :class:`~fedgraphrec.runtime.network.Network`; every message goes through
:meth:`Network.transmit` so the ledger counts ``ct·(N d + 4 Σ_t |B_t| d)`` ciphertext bytes (the
paper's three ciphertext messages per iteration plus the re-sync of A3, message 5) and the social
party's transcript holds ciphertext bytes only, besides the plaintext batch ids (implicitly public,
spec §1.4). In ``real`` crypto mode payloads are the backend's serialised ciphertexts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto.he import EncMatrix, HEBackend
from fedgraphrec.models.propagation import NormalizedBipartite
from fedgraphrec.privacy.noise_source import SecureNoise
from fedgraphrec.protocols.p4gcn.recommender import Recommender
from fedgraphrec.protocols.p4gcn.roles import (
    PH_BWD,
    PH_EVAL,
    PH_FWD,
    PH_GRAD,
    PH_IDS,
    PH_SETUP_X,
    PH_SYNC,
    RECOMMENDER,
    SOCIAL,
)
from fedgraphrec.protocols.p4gcn.social import SENSITIVITIES, SocialParty
from fedgraphrec.runtime.network import Network
from fedgraphrec.seeding import seeded_generator

__all__ = ["P4GCN", "P4GCNConfig", "batch_schedule", "release_count"]

ACCOUNTANT = "Gaussian privacy loss, mu-GDP composition, analytic (eps, delta) conversion"


@dataclass(frozen=True)
class P4GCNConfig:
    """Hyper-parameters (spec §7.4; the [I] choices are documented in the results README).

    ``sensitivity``: ``global`` (default) calibrates the noise to a data-independent bound so the
    stated ``(ε, δ)`` is an edge-level DP guarantee; ``paper-local`` is the paper's per-user,
    data-dependent calibration (not a guarantee; see :mod:`.social`). ``secure_noise`` draws the
    noise from the OS CSPRNG instead of the run seed; ``secure_weights`` draws the social party's
    private ``W1`` from it (a recommender that regenerates ``W1`` from the seed could unmix the
    sandwiches it decrypts).
    """

    dim: int = 64
    backbone: str = "lightgcn"
    n_layers: int = 2
    beta: float = 1.0
    fusion: bool = True
    lr: float = 1e-3
    social_lr: float = 1.0
    clip: float = 0.1
    eps: float = 15.0
    delta: float = 1e-4
    noise: bool = True
    sensitivity: str = "global"
    secure_noise: bool = False
    secure_weights: bool = False
    batch_size: int = 256
    epochs: int = 20
    weight_decay: float = 0.0


def batch_schedule(
    n_records: int, batch_size: int, epochs: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """Record indices of every batch, epoch by epoch (fixed up front by ``P1``)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    out: list[np.ndarray] = []
    for _ in range(epochs):
        perm = rng.permutation(n_records)
        out.extend(perm[i : i + batch_size] for i in range(0, n_records, batch_size))
    return out


def release_count(
    schedule: list[np.ndarray], users: np.ndarray, n_users: int, sensitivity: str = "paper-local"
) -> int:
    """``K``: releases to calibrate for, plus 1 evaluation release.

    ``global``: every forward and backward of the schedule (an edge flip can move any user's row);
    ``paper-local``: the largest per-user count of forward + backward releases.
    """
    if sensitivity == "global":
        return 2 * len(schedule) + 1
    counts = np.zeros(n_users, dtype=np.int64)
    for idx in schedule:
        counts[np.unique(users[idx])] += 1
    return int(2 * counts.max() + 1)


class P4GCN:
    """Both parties wired through one network.

    Args:
        train: ``(users, items, ratings)`` training arrays.
        n_users: ``N``.
        n_items: ``N_V``.
        social_adj: the social adjacency (given to ``P2`` only).
        cfg: hyper-parameters.
        backend: HE backend (``P1`` owns its keys).
        rating_range: decoder range.
        seed: master seed; named child streams for the schedule, ``P1`` and ``P2``.
        network: transport (default: accounted, no transcripts).
    """

    def __init__(
        self,
        train: tuple[np.ndarray, np.ndarray, np.ndarray],
        n_users: int,
        n_items: int,
        social_adj: sp.spmatrix,
        cfg: P4GCNConfig,
        backend: HEBackend,
        rating_range: tuple[float, float],
        seed: int = 0,
        network: Network | None = None,
    ) -> None:
        if cfg.sensitivity not in SENSITIVITIES:
            raise ValueError(f"sensitivity must be one of {SENSITIVITIES}, got {cfg.sensitivity!r}")
        self.users, self.items, self.ratings = (np.asarray(a) for a in train)
        self.cfg, self.backend = cfg, backend
        self.net = network or Network(n_clients=0)
        ss = np.random.SeedSequence(seed)
        sched_ss, p1_ss, p2_ss = ss.spawn(3)
        self.schedule = batch_schedule(
            len(self.users), cfg.batch_size, cfg.epochs, np.random.default_rng(sched_ss)
        )
        self.n_batches_per_epoch = -(-len(self.users) // cfg.batch_size)
        k = release_count(self.schedule, self.users, n_users, cfg.sensitivity)
        binary = sp.csr_matrix((np.ones(len(self.users)), (self.users, self.items)), shape=(n_users, n_items))
        binary.data[:] = 1.0
        graph = NormalizedBipartite.from_train(binary, dtype=torch.float64)
        gen = seeded_generator(int(p1_ss.generate_state(1)[0]))
        self.p1 = Recommender(
            graph, cfg.backbone, cfg.dim, cfg.n_layers, cfg.beta, cfg.fusion, cfg.lr, cfg.social_lr,
            cfg.clip, backend, rating_range, gen, weight_decay=cfg.weight_decay,
        )  # fmt: skip
        self.p2 = SocialParty(
            social_adj, cfg.dim, cfg.clip, k, cfg.eps, cfg.delta, backend, np.random.default_rng(p2_ss),
            noise=cfg.noise, sensitivity=cfg.sensitivity,
            noise_source=SecureNoise() if cfg.secure_noise else None,
            weight_source=SecureNoise() if cfg.secure_weights else None,
        )  # fmt: skip
        self.releases = k
        self.step_index = 0
        self.p2.receive_x(self._send(PH_SETUP_X, RECOMMENDER, SOCIAL, self.p1.encrypt_x(), "embedding"))

    def _send(self, phase: str, sender: str, receiver: str, enc: EncMatrix, kind: str) -> EncMatrix:
        """Transmit ``enc`` (serialised bytes in ``real`` mode) and return it as delivered."""
        payloads = self.backend.to_bytes(enc) if self.net.real else [enc]
        size = self.backend.nbytes(enc)
        self.net.transmit(
            phase, sender, receiver, size, kind=kind, protection="homomorphic", payloads=[payloads]
        )
        return enc

    def train_batch(self, idx: np.ndarray) -> float:
        """One iteration (messages 1–5) on the records ``idx``; returns the batch MSE."""
        u, v, r = self.users[idx], self.items[idx], self.ratings[idx]
        batch_users = np.unique(u)
        self.net.transmit(
            PH_IDS, RECOMMENDER, SOCIAL, 8 * len(batch_users), kind="batch_user_ids", protected=False,
            payloads=[batch_users.copy()],
        )  # fmt: skip
        enc_y = self._send(PH_FWD, SOCIAL, RECOMMENDER, self.p2.forward(batch_users), "social_rows")
        loss, enc_g = self.p1.local_step(batch_users, self.p1.social_rows(enc_y), u, v, r)
        enc_g = self._send(PH_GRAD, RECOMMENDER, SOCIAL, enc_g, "social_gradient")
        enc_d = self._send(PH_BWD, SOCIAL, RECOMMENDER, self.p2.backward(batch_users, enc_g), "social_update")
        self.p1.apply_social_update(enc_d)
        enc_x = self._send(PH_SYNC, RECOMMENDER, SOCIAL, self.p1.encrypt_x(batch_users), "embedding")
        self.p2.resync(batch_users, enc_x)
        self.step_index += 1
        return loss

    def run_epoch(self, epoch: int) -> float:
        """All batches of ``epoch`` (0-based); returns the mean batch loss."""
        lo = epoch * self.n_batches_per_epoch
        batches = self.schedule[lo : lo + self.n_batches_per_epoch]
        return float(np.mean([self.train_batch(b) for b in batches]))

    def final_release(self, chunk: int = 512) -> None:
        """The evaluation release (spec §4.6): one noisy forward for every user, counted in ``K``."""
        n = self.p1.n_users
        for lo in range(0, n, chunk):
            users = np.arange(lo, min(n, lo + chunk))
            enc_y = self._send(
                PH_EVAL, SOCIAL, RECOMMENDER, self.p2.forward(users, evaluation=True), "social_rows"
            )
            self.p1.y_cache[users] = self.p1.social_rows(enc_y)

    def privacy(self) -> dict[str, object]:
        """What the run folder reports: ε spent at δ, the accountant, and whether ε is a guarantee."""
        guarantee = self.cfg.noise and self.cfg.sensitivity == "global"
        return {
            "epsilon_spent": self.p2.accountant.epsilon(self.cfg.delta) if self.cfg.noise else None,
            "epsilon_target": self.cfg.eps if self.cfg.noise else None,
            "delta": self.cfg.delta,
            "accountant": ACCOUNTANT,
            "sensitivity": self.cfg.sensitivity,
            "releases_K": self.releases,
            "dp_guarantee": guarantee,
            "noise_source": self.p2.source.name if self.cfg.noise else None,
            "weights_source": "csprng" if self.cfg.secure_weights else "seeded",
            "note": (
                "edge-level (eps, delta)-DP of the social graph against the recommender"
                if guarantee
                else "no DP guarantee: "
                + ("no noise (P4GCN*)" if not self.cfg.noise else "the paper's data-dependent sensitivity")
            ),
        }

    @torch.no_grad()
    def predict(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Ratings from the cached social rows (post-processing of released rows)."""
        y = torch.from_numpy(self.p1.y_cache[users]).to(self.p1.w2.dtype)
        return self.p1.predict(torch.from_numpy(users), torch.from_numpy(items), y).numpy()
