"""P4GCN's settings: one frozen dataclass for the protocol and its rating baselines (spec §7.4–7.5).

:class:`P4GCNSettings` is everything a P4GCN run (and a run of one of the rating baselines of its
Tables 1–2) takes besides the run-level fields (dataset, seed, crypto, dtype, output). Defaults are
the spec's (``d = 64``, Adam ``lr = 1e-3``, batch 256, ``C = 0.1``); the privacy budget ``eps`` has a
plain documented default, and the paper's per-dataset budgets live in the reproduction data
(``reproduce/papers/p4gcn.toml``), which ``fedgraphrec reproduce p4gcn-*`` passes explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

from fedgraphrec.crypto.he import BACKENDS
from fedgraphrec.protocols.settings import RUN, ProtocolSettings
from fedgraphrec.seeding import secure_draws

__all__ = ["LOCAL_METHODS", "METHODS", "P4_METHODS", "SENSITIVITIES", "P4GCNSettings"]

LOCAL_METHODS = ("pmf", "neumf", "gcn", "lightgcn", "sesorec", "fesog-")
"""The rating baselines (ratings only, one party): spec §7.5."""
P4_METHODS = ("p4gcn", "p4gcn*", "p4gcn-pmf", "p4gcn-pmf*", "p4gcn-gcn", "p4gcn-gcn*")
"""P4GCN on the LightGCN, PMF and GCN backbones; ``*``: without DP noise (the paper's P4GCN*)."""
METHODS = LOCAL_METHODS + P4_METHODS
SENSITIVITIES = ("global", "paper-local")
_BACKBONE = {"p4gcn": "lightgcn", "p4gcn-pmf": "pmf", "p4gcn-gcn": "gcn"}


@dataclass(frozen=True)
class P4GCNSettings(ProtocolSettings):
    """Everything a P4GCN or rating-baseline run takes besides the run-level fields.

    Attributes:
        method: one of :data:`METHODS`: a rating baseline (``pmf``, ``neumf``, ``gcn``, ``lightgcn``,
            ``sesorec``, ``fesog-``) or a P4GCN variant (``p4gcn``, ``p4gcn-pmf``, ``p4gcn-gcn``;
            a trailing ``*`` turns the DP noise off).
        dim: embedding size ``d``.
        layers: backbone propagation layers.
        lr: Adam learning rate of the recommender's local parameters (and of the baselines).
        batch: ratings per minibatch (P4GCN: per protocol iteration).
        epochs: planned epochs, the run's ``epochs`` (not a ``[protocol]`` key); P4GCN calibrates
            its noise to the whole planned schedule, so stopping early only spends less budget.
        patience: the run's ``eval.patience`` (not a ``[protocol]`` key): evaluations without a
            better validation RMSE before early stopping (0: never).
        beta: weight of the social embedding at fusion.
        social_lr: step ``η`` of the recommender's social embedding table (inside the middle matrix).
        social_reg: SeSoRec's ``λ`` on ``‖u_i − u_f‖²`` (the ``sesorec`` baseline only).
        clip: clipping constant ``C`` of every row sent into a sandwich and of ``W1``.
        eps: the DP budget ``ε`` of the social graph (a documented default; the paper's per-dataset
            values are reproduction data).
        delta: the DP ``δ``.
        fusion: the fusion layer (``False``: Fig. 4's plain average of the two embeddings).
        backend: HE backend of the P4GCN methods (``plain`` simulates Paillier-2048 byte counts;
            ``ckks-packed`` is real packed CKKS; ``paillier`` and ``ckks`` are far slower).
        social: ``real``, or ``shuffled`` (a control: the social graph's user ids permuted).
        sensitivity: ``global`` (an edge-level ``(ε, δ)`` DP guarantee) or ``paper-local`` (the
            paper's data-dependent calibration; not a guarantee).
        reproducible: the run's switch: draw P4GCN's hiding values (the social party's ``W1``, the
            DP noise) from the run seed, so the run repeats bit for bit and anyone with the seed
            regenerates them. Unset: true with the ``plain`` backend (simulated HE), false with a
            real HE backend, whose runs draw them from the OS CSPRNG.
        secure_noise: override of ``reproducible`` for the DP noise alone (unset: follow it).
        weight_decay: Adam weight decay of the recommender's local parameters.
        eval_chunk: users per message of the evaluation release (spec §4.6).
    """

    method: str = "p4gcn"
    dim: int = 64
    layers: int = 2
    lr: float = 1e-3
    batch: int = 256
    epochs: int = field(default=30, metadata=RUN)
    patience: int = field(default=5, metadata=RUN)
    beta: float = 1.0
    social_lr: float = 1.0
    social_reg: float = 1e-2
    clip: float = 0.1
    eps: float = 10.0
    delta: float = 1e-4
    fusion: bool = True
    backend: str = "plain"
    social: str = "real"
    sensitivity: str = "global"
    secure_noise: bool | None = None
    weight_decay: float = 0.0
    eval_chunk: int = 512

    def __post_init__(self) -> None:
        super().__post_init__()
        checks = [
            (self.method in METHODS, f"method must be one of {', '.join(METHODS)}; got {self.method!r}"),
            (self.backend in BACKENDS, f"backend must be one of {', '.join(BACKENDS)}; got {self.backend!r}"),
            (
                self.social in ("real", "shuffled"),
                f"social must be 'real' or 'shuffled'; got {self.social!r}",
            ),
            (
                self.sensitivity in SENSITIVITIES,
                f"sensitivity must be one of {SENSITIVITIES}; got {self.sensitivity!r}",
            ),
            (
                min(self.dim, self.batch, self.epochs, self.layers + 1, self.eval_chunk) >= 1
                and self.patience >= 0,
                "dim, batch, epochs, eval_chunk must be >= 1, layers and patience >= 0",
            ),
            (self.lr > 0 and self.clip > 0, f"lr and clip must be > 0; got lr={self.lr}, clip={self.clip}"),
            (
                self.eps > 0 and 0 < self.delta < 1,
                f"eps must be > 0 and delta in (0, 1); got {self.eps}, {self.delta}",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)

    @property
    def is_p4gcn(self) -> bool:
        """Whether :attr:`method` is a P4GCN variant (two organisations) rather than a baseline."""
        return self.method in P4_METHODS

    @property
    def noise(self) -> bool:
        """The social party adds DP noise (every P4GCN variant without the trailing ``*``)."""
        return not self.method.endswith("*")

    @property
    def backbone(self) -> str:
        """The recommender's backbone of a P4GCN variant (``lightgcn``, ``pmf`` or ``gcn``)."""
        return _BACKBONE.get(self.method.rstrip("*"), "lightgcn")

    def hides(self, override: str | None = None) -> bool:
        """Whether a P4GCN hiding draw comes from the CSPRNG (``override``: ``secure_noise``).

        :func:`~fedgraphrec.seeding.secure_draws` with a real HE backend as P4GCN's ``crypto = "real"``.
        """
        mode = "accounted" if self.backend == "plain" else "real"
        view = SimpleNamespace(reproducible=self.reproducible, crypto=mode, secure_noise=self.secure_noise)
        return secure_draws(view, override)
