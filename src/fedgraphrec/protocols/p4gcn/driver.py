"""P4GCN in one process: the coordinator and the two organisation programs over the in-process transport.

:class:`P4GCNRun` builds :class:`~.server.P4GCNServer`, :class:`~.recommender_program.RecommenderProgram`
and :class:`~.social_program.SocialProgram` and joins them with a
:class:`~fedgraphrec.runtime.local.LocalTransport`, so every message goes through the same node-side
checks, ledger and transcripts as on Flower. The learners (``fedgraphrec.training.p4gcn_learner``),
the reproductions, the link attack and the audit run P4GCN through it. It also lets an in-process
caller look inside the parties (:attr:`P4GCNRun.p1`, :attr:`P4GCNRun.p2`), which a deployment
cannot: tests, attacks with an oracle, and the privacy report.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.crypto.he.base import HEBackend
from fedgraphrec.protocols.p4gcn.recommender import Recommender
from fedgraphrec.protocols.p4gcn.recommender_program import RecommenderData, RecommenderProgram
from fedgraphrec.protocols.p4gcn.roles import NODE_OF, RECOMMENDER, SOCIAL
from fedgraphrec.protocols.p4gcn.server import P4GCNServer
from fedgraphrec.protocols.p4gcn.settings import SENSITIVITIES, P4GCNSettings
from fedgraphrec.protocols.p4gcn.social import SocialParty
from fedgraphrec.protocols.p4gcn.social_program import SocialData, SocialProgram
from fedgraphrec.runtime.local import LocalTransport
from fedgraphrec.runtime.network import Network

__all__ = ["ACCOUNTANT", "P4GCNRun", "privacy_record"]

ACCOUNTANT = "Gaussian privacy loss, mu-GDP composition, analytic (eps, delta) conversion"

Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]


def privacy_record(
    s: P4GCNSettings, epsilon_spent: float | None, releases: int, noise_source: str | None
) -> dict[str, object]:
    """The privacy report of a run (``summary.json``): from the social party's accounting and the settings."""
    guarantee = s.noise and s.sensitivity == "global"
    return {
        "epsilon_spent": epsilon_spent,
        "epsilon_target": s.eps if s.noise else None,
        "delta": s.delta,
        "accountant": ACCOUNTANT,
        "sensitivity": s.sensitivity,
        "releases_K": releases,
        "dp_guarantee": guarantee,
        "noise_source": noise_source,
        "weights_source": "csprng" if s.hides() else "seeded",
        "note": (
            "edge-level (eps, delta)-DP of the social graph against the recommender"
            if guarantee
            else "no DP guarantee: "
            + ("no noise (P4GCN*)" if not s.noise else "the paper's data-dependent sensitivity")
        ),
    }


class P4GCNRun:
    """The three programs of a P4GCN run, wired in process (module docstring).

    Args:
        train: ``(users, items, ratings)`` training arrays (the recommender's).
        n_users: ``N``.
        n_items: ``N_V``.
        social_adj: the social adjacency (the social platform's).
        settings: the run's settings (:class:`~.settings.P4GCNSettings`, a P4GCN ``method``).
        backend: the HE backend (``P1`` owns its keys; ``P2`` uses its public operations).
        rating_range: decoder range.
        seed: the run seed; named child streams for the schedule, ``P1`` and ``P2``.
        network: ledger, transcripts and crypto mode (default: accounted, no transcripts); in
            ``real`` mode ciphertexts cross as the backend's serialised bytes.
        splits: held-out ``(users, items, ratings)`` by split, for :meth:`evaluate`.
    """

    def __init__(
        self,
        train: Arrays,
        n_users: int,
        n_items: int,
        social_adj: sp.spmatrix,
        settings: P4GCNSettings,
        backend: HEBackend,
        rating_range: tuple[float, float],
        seed: int = 0,
        network: Network | None = None,
        splits: dict[str, Arrays] | None = None,
    ) -> None:
        if settings.sensitivity not in SENSITIVITIES:
            raise ValueError(f"sensitivity must be one of {SENSITIVITIES}, got {settings.sensitivity!r}")
        self.settings, self.backend = settings, backend
        self.net = network or Network(n_clients=0)
        self.net.protocol = "p4gcn"
        serialise = self.net.real
        p1_data = RecommenderData(train, n_users, n_items, rating_range, seed, dict(splits or {}))
        self.recommender = RecommenderProgram(
            settings, np.array([NODE_OF[RECOMMENDER]]), p1_data, backend=backend, serialise=serialise
        )
        self.social = SocialProgram(
            settings, np.array([NODE_OF[SOCIAL]]), SocialData(social_adj, seed), backend=backend,
            serialise=serialise,
        )  # fmt: skip
        nodes = {NODE_OF[RECOMMENDER]: self.recommender, NODE_OF[SOCIAL]: self.social}
        self.transport = LocalTransport(self.net, nodes)
        self.server = P4GCNServer(settings, self.transport, 2, n_items)
        self.server.setup()

    # ------------------------------------------------------------------ looking inside (in process)
    @property
    def p1(self) -> Recommender:
        """The recommender's model (in process only)."""
        return self.recommender.model

    @property
    def p2(self) -> SocialParty:
        """The social party's sandwich and noise state (in process only)."""
        assert self.social.party is not None  # set at set-up
        return self.social.party

    @property
    def schedule(self) -> list[np.ndarray]:
        """The recommender's batch schedule (record indices)."""
        return self.recommender.schedule

    @property
    def users(self) -> np.ndarray:
        """The training records' users."""
        return self.recommender.users

    @property
    def items(self) -> np.ndarray:
        """The training records' items."""
        return self.recommender.items

    @property
    def ratings(self) -> np.ndarray:
        """The training records' ratings."""
        return self.recommender.ratings

    @property
    def releases(self) -> int:
        """``K``, the releases the noise is calibrated for."""
        return self.recommender.releases

    @property
    def n_batches_per_epoch(self) -> int:
        """Iterations per epoch."""
        return self.recommender.batches_per_epoch

    # ------------------------------------------------------------------ running
    def step(self) -> float:
        """The next iteration of the schedule (messages 1–5); returns the batch MSE."""
        return self.server.iteration()

    def run_epoch(self, epoch: int) -> float:
        """All batches of ``epoch`` (0-based); returns the mean batch loss."""
        return self.server.train_round(epoch).loss

    def final_release(self) -> None:
        """The evaluation release (spec §4.6): one noisy forward for every user, counted in ``K``."""
        self.server.release()

    def evaluate(self, splits: list[str]) -> dict[str, dict[str, float]]:
        """RMSE and MAE of held-out splits, computed by the recommender from its cached rows."""
        return self.server.evaluate_ratings(splits)

    def predict(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Ratings from the recommender's cached social rows (in process only)."""
        return self.recommender.predict(users, items)

    def privacy(self) -> dict[str, object]:
        """What the run folder reports: ε spent at δ, the accountant, and whether ε is a guarantee."""
        s = self.settings
        spent = self.p2.accountant.epsilon(s.delta) if s.noise else None
        return privacy_record(s, spent, self.releases, self.p2.source.name if s.noise else None)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Tensors and plain data of the three programs (an in-process checkpoint of the whole run).

        Each organisation's part is what its program keeps between messages
        (:meth:`~.recommender_program.RecommenderProgram.state_arrays`), the social party's ``[X]``
        as the backend's serialised bytes.
        """

        def tensors(arrays: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
            return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()}

        return {
            "recommender": tensors(self.recommender.state_arrays()),
            "social": tensors(self.social.state_arrays()),
            "server": {"done": self.server.done, "step": self.server.step},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` into a run built with the same settings, data and seed."""
        self.recommender.load_state_arrays({k: v.numpy() for k, v in state["recommender"].items()})
        self.social.load_state_arrays({k: v.numpy() for k, v in state["social"].items()})
        self.server.done, self.server.step = int(state["server"]["done"]), int(state["server"]["step"])
