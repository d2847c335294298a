"""FedGRec's configuration surface (spec ``fedgrec.md`` §7) with the spec's defaults."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from fedgraphrec.protocols.settings import ModelSettings, RoundSampling, SecureSumSettings
from fedgraphrec.seeding import secure_draws

__all__ = ["AGGREGATIONS", "ITEM_AGGREGATIONS", "FCFSettings", "FedGRecSettings", "FedeRankSettings"]

AGGREGATIONS = ("mean", "last", "concat")
ITEM_AGGREGATIONS = ("sum", "mean_touched", "mean_S")


@dataclass(frozen=True)
class FedGRecSettings(ModelSettings, RoundSampling, SecureSumSettings):
    """Hyper-parameters of Algorithm 1.

    Attributes:
        model: the backbone: ``lightgcn`` (FedeRank and FCF: also ``mf``, the same tables).
        K: number of latent embeddings (FedGRec-K; ``n_layers`` is an alias); ``K = 0`` is
            federated BPR-MF (FedeRank).
        clients_per_round: ``S``, users sampled per round (without replacement).
        local_steps: ``τ``, local Adam steps per round with the latents frozen.
        n_negatives: negatives each sampled user queries (2048), resampled every round.
        lr: local Adam learning rate ``β`` (a fresh Adam per client per round, spec §6.5).
        reg: ``λ`` of the L2 term on the batch's base embeddings (mean over pairs, LightGCN style).
        server_lr: ``α`` of Eq. 10 (item base embeddings).
        latent_lr: ``α`` of Eq. 11; 1 keeps the invariant ``E^{k+1} = R̂ᵀ E_U^{k,stored}``.
        item_agg: Eq. 10's aggregate: ``sum`` (literal), ``mean_touched`` (divide by the number of
            sampled users that queried the item, itself securely aggregated) or ``mean_S`` (``/S``).
        aggregation: layer combination: ``mean`` (``α_k = 1/(K+1)``), ``last`` (``½(e⁰ + e^K)``) or
            ``concat`` (``[e⁰‖…‖e^K]``, no ``α_k`` scaling).
        eval_latents: user latents at evaluation: ``refresh`` (Eq. 6 from the current server
            tables, what a user would compute at its next query) or ``stored``.
        dropout_before: fraction of each round's sampled users that go offline before uploading
            (their work is lost; secure aggregation removes their masks).
        dropout_after: fraction that go offline after uploading, before unmasking (their update
            still counts; secure aggregation recovers their self masks).
        secagg_threshold: fraction of the participants that secure aggregation needs at every stage
            (``t = ceil(fraction · n)``). It must exceed 1/2: against a server that may act
            maliciously (as Flower's SecAgg+ documents), ``t > n/2`` stops it from showing two halves
            of the clients different survivor sets and collecting, for one client, both the shares of
            its self mask and of its pairwise key. The trade-off: a higher ``t`` resists a server
            with more colluding clients but tolerates fewer dropouts (at most ``n − t`` per round).
        secagg_semi_honest: allow ``secagg_threshold ≤ 1/2``, protecting only against an
            honest-but-curious server (more dropouts tolerated).
        secagg_min_clients: the fewest users a secure sum may have; each client refuses a smaller
            sum or roster (default 3).
        frac_bits: fixed-point fractional bits of the secure-aggregation ring encoding.
        loss: ``bpr`` (FedGRec, FedeRank) or ``mse``: FCF's confidence-weighted squared error
            ``(1+α)(1 − ŷ_ui)² + ŷ_uj²`` over the same (positive, sampled negative) pairs.
        confidence: FCF's ``α`` (confidence ``1 + α`` on positives).
        optimizer: local optimizer, ``adam`` (the experiments) or ``sgd`` (Algorithm 1 as printed).
        batch_mode: local minibatch ``B``: ``one_neg_per_pos`` (each positive with one of the user's
            negatives, redrawn every step) or ``all_pairs`` (every positive with every negative).
        secure_aggregation: ``False`` sends every upload in the clear (a baseline for privacy
            audits only: the server then sees each user's own rows).
        device: where tables and the round's arithmetic live (``"cuda"`` for paper-scale runs);
            sampling, encodings of ``real`` secure aggregation and the ledger stay on the CPU.
    """

    ALIASES: ClassVar[dict[str, str]] = {"n_layers": "K"}

    K: int = 2
    server_lr: float = 1.0
    latent_lr: float = 1.0
    item_agg: str = "sum"
    aggregation: str = "mean"
    eval_latents: str = "refresh"
    dropout_before: float = 0.0
    dropout_after: float = 0.0
    loss: str = "bpr"
    confidence: float = 1.0
    optimizer: str = "adam"
    batch_mode: str = "one_neg_per_pos"
    secure_aggregation: bool = True
    device: str = "cpu"

    def __post_init__(self) -> None:
        checks = [
            (self.K >= 0, f"K must be >= 0, got {self.K}"),
            (
                self.item_agg in ITEM_AGGREGATIONS,
                f"item_agg must be one of {ITEM_AGGREGATIONS}, got {self.item_agg!r}",
            ),
            (
                self.aggregation in AGGREGATIONS,
                f"aggregation must be one of {AGGREGATIONS}, got {self.aggregation!r}",
            ),
            (
                self.eval_latents in ("refresh", "stored"),
                f"eval_latents must be refresh or stored, got {self.eval_latents!r}",
            ),
            (0 <= self.dropout_before < 1, f"dropout_before must be in [0, 1), got {self.dropout_before}"),
            (0 <= self.dropout_after < 1, f"dropout_after must be in [0, 1), got {self.dropout_after}"),
            (not (self.aggregation == "last" and self.K == 0), "aggregation='last' needs K >= 1"),
            (self.loss in ("bpr", "mse"), f"loss must be 'bpr' or 'mse', got {self.loss!r}"),
            (self.confidence >= 0, f"confidence must be >= 0, got {self.confidence}"),
            (self.optimizer in ("adam", "sgd"), f"optimizer must be 'adam' or 'sgd', got {self.optimizer!r}"),
            (
                self.batch_mode in ("one_neg_per_pos", "all_pairs"),
                f"batch_mode must be 'one_neg_per_pos' or 'all_pairs', got {self.batch_mode!r}",
            ),
            (
                self.device == "cpu" or re.fullmatch(r"cuda(:\d+)?", self.device) is not None,
                f"device must be 'cpu' or 'cuda[:N]'; got {self.device!r}",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        super().__post_init__()

    @property
    def secure_negatives(self) -> bool:
        """Whether the negatives come from the CSPRNG (:func:`~fedgraphrec.seeding.secure_draws`)."""
        return secure_draws(self)

    def layer_weights(self) -> list[float]:
        """``α_0 … α_K`` of the representation ``ē = Σ_k α_k e^k`` (``concat`` uses 1 per order)."""
        if self.aggregation == "mean":
            return [1.0 / (self.K + 1)] * (self.K + 1)
        if self.aggregation == "last":
            return [0.5] + [0.0] * (self.K - 1) + [0.5]
        return [1.0] * (self.K + 1)


@dataclass(frozen=True)
class FedeRankSettings(FedGRecSettings):
    """FedeRank: FedGRec with ``K = 0`` (federated BPR-MF); the same fields, ``K`` fixed at 0.

    Attributes:
        model: the backbone: ``lightgcn`` or ``mf`` (with ``K = 0`` the same tables).
        K: fixed at 0 (FedeRank has no latent embeddings; for ``K > 0`` train ``fedgrec``).
        loss: fixed at ``bpr``.
    """

    MODELS: ClassVar[tuple[str, ...]] = ("lightgcn", "mf")
    LOSS: ClassVar[str] = "bpr"
    ALIASES: ClassVar[dict[str, str]] = {}  # K is fixed: no layer count to set

    K: int = 0
    loss: str = "bpr"

    def __post_init__(self) -> None:
        super().__post_init__()
        name = type(self).__name__.removesuffix("Settings")
        if self.K != 0:
            raise ValueError(f"{name} is FedGRec with K = 0; got K={self.K} (train fedgrec for K > 0)")
        if self.loss != self.LOSS:
            raise ValueError(f"{name}'s loss is {self.LOSS!r}; got loss={self.loss!r}")


@dataclass(frozen=True)
class FCFSettings(FedeRankSettings):
    """FCF: ``K = 0`` with FCF's confidence-weighted squared error (``loss = "mse"``).

    Attributes:
        loss: fixed at ``mse``: ``(1+α)(1 − ŷ_ui)² + ŷ_uj²`` over (positive, sampled negative) pairs.
        confidence: FCF's ``α`` (confidence ``1 + α`` on positives).
    """

    LOSS: ClassVar[str] = "mse"

    loss: str = "mse"
