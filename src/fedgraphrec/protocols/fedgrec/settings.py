"""FedGRec's configuration surface (spec ``fedgrec.md`` §7) with the spec's defaults."""

from __future__ import annotations

from dataclasses import dataclass

from fedgraphrec.protocols.settings import RoundSampling, SecureSumSettings
from fedgraphrec.seeding import secure_draws

__all__ = ["AGGREGATIONS", "ITEM_AGGREGATIONS", "FedGRecSettings"]

AGGREGATIONS = ("mean", "last", "concat")
ITEM_AGGREGATIONS = ("sum", "mean_touched", "mean_S")


@dataclass(frozen=True)
class FedGRecSettings(RoundSampling, SecureSumSettings):
    """Hyper-parameters of Algorithm 1.

    Attributes:
        K: number of latent embeddings (FedGRec-K); ``K = 0`` is federated BPR-MF (FedeRank).
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
        crypto: the client's own crypto mode; in ``real`` it refuses unprotected secure-sum stages.
        frac_bits: fixed-point fractional bits of the secure-aggregation ring encoding.
        loss: ``bpr`` (FedGRec, FedeRank) or ``mse``: FCF's confidence-weighted squared error
            ``(1+α)(1 − ŷ_ui)² + ŷ_uj²`` over the same (positive, sampled negative) pairs.
        confidence: FCF's ``α`` (confidence ``1 + α`` on positives).
        optimizer: local optimizer, ``adam`` (the experiments) or ``sgd`` (Algorithm 1 as printed).
        batch_mode: local minibatch ``B``: ``one_neg_per_pos`` (each positive with one of the user's
            negatives, redrawn every step) or ``all_pairs`` (every positive with every negative).
        secure_aggregation: ``False`` sends every upload in the clear (a baseline for privacy
            audits only: the server then sees each user's own rows).
        seed: the run seed (public streams: users, negatives, local pairs, simulated dropouts).
        reproducible: the run's switch (:func:`~fedgraphrec.seeding.secure_draws`): true draws the
            negatives from the run seed (bit-reproducible research runs; the server can then
            regenerate them and name most positives of every query); unset, true under
            ``accounted`` and false under ``real`` (the negatives come from the CSPRNG).
        device: where tables and the round's arithmetic live (``"cuda"`` for paper-scale runs);
            sampling, encodings of ``real`` secure aggregation and the ledger stay on the CPU.
    """

    seed: int = 0  # FedGRec's own default (the base's field, in the base's place)
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
    reproducible: bool | None = None

    def __post_init__(self) -> None:
        checks = [
            (self.K >= 0, f"K must be >= 0, got {self.K}"),
            (self.clients_per_round > 0, f"clients_per_round must be positive, got {self.clients_per_round}"),
            (self.local_steps > 0, f"local_steps must be positive, got {self.local_steps}"),
            (self.n_negatives > 0, f"n_negatives must be positive, got {self.n_negatives}"),
            (self.lr > 0, f"lr must be positive, got {self.lr}"),
            (self.reg >= 0, f"reg must be >= 0, got {self.reg}"),
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
            (8 <= self.frac_bits <= 48, f"frac_bits must be in [8, 48], got {self.frac_bits}"),
            (not (self.aggregation == "last" and self.K == 0), "aggregation='last' needs K >= 1"),
            (self.loss in ("bpr", "mse"), f"loss must be 'bpr' or 'mse', got {self.loss!r}"),
            (self.confidence >= 0, f"confidence must be >= 0, got {self.confidence}"),
            (self.optimizer in ("adam", "sgd"), f"optimizer must be 'adam' or 'sgd', got {self.optimizer!r}"),
            (
                self.batch_mode in ("one_neg_per_pos", "all_pairs"),
                f"batch_mode must be 'one_neg_per_pos' or 'all_pairs', got {self.batch_mode!r}",
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
