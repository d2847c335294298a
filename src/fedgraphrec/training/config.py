"""Run configuration: one dataclass, loaded from TOML and ``--set key=value`` overrides.

Every value a run depends on lives here, and the resolved configuration is written to the run
folder, so a run can be repeated (or resumed) from its folder alone. Unknown keys and values of the
wrong type are rejected with a message naming the file and line, or the ``--set`` argument.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from fedgraphrec.protocols.fedgrec.settings import FedGRecSettings
from fedgraphrec.protocols.secagg.policy import check_threshold
from fedgraphrec.seeding import secure_draws

__all__ = ["ALIASES", "ConfigError", "TrainConfig"]


class ConfigError(ValueError):
    """A configuration file or override is invalid; the message says where and why."""


MODELS = ("lightgcn", "lightgcn+", "mf", "ngcf", "ncf", "multvae")
BACKBONES = {"fedmf": "mf", "fedncf": "ncf", "pgcn": "lightgcn+"}
"""The backbone a protocol runs when ``model`` is not given (every other protocol: ``lightgcn``)."""
PROTOCOLS = (
    "central",
    "lpgcn",
    "gnn4fr",
    "fedgrec",
    "fedmf",
    "federank",
    "fcf",
    "fedncf",
    "pgcn",
    "fedpergnn",
)
ROUND_PROTOCOLS = ("fedgrec", "federank", "fcf")
"""Protocols run by FedGRec's round machinery: FedeRank is FedGRec with K = 0, FCF adds its squared error."""
ALIASES = {"K": "n_layers"}
_FEDGREC = FedGRecSettings()  # FedGRec's keys below take their defaults from its settings
"""Alternative key names: FedGRec's ``K`` (latent embeddings) is the layer count ``n_layers``."""
SELECTIONS = ("valid", "last", "test")


@dataclass
class TrainConfig:
    """Everything a training run depends on.

    Attributes:
        protocol: ``central`` (the oracle) or a federated protocol (``lpgcn``, ``gnn4fr``, ``fedgrec``,
            ``fedmf``, ``federank`` = FedGRec with K = 0, ``fcf`` = K = 0 with FCF's squared error,
            ``fedncf``, ``pgcn`` = P-GCN on LightGCN+, ``fedpergnn`` = FedPerGNN / FedGNN).
        dataset: registered name (``fedgraphrec datasets``) or a folder path.
        dataset_options: loader options, e.g. ``{split = "u1", threshold = 4.0}``.
        data_dir: dataset root (overrides ``FEDGRAPHREC_DATA``).
        model: ``lightgcn``, ``lightgcn+``, ``mf``, or the centralized-only ``ngcf``, ``ncf`` and
            ``multvae``; empty (the default) is the protocol's own backbone: ``mf`` for ``fedmf``,
            ``ncf`` for ``fedncf``, ``lightgcn+`` for ``pgcn``, ``lightgcn`` otherwise.
        dim: embedding size d.
        n_layers: LightGCN layers L (FedGRec: the number of latent embeddings K; ``K`` is an alias).
        init_std: std of the N(0, σ²) initial tables (LightGCN code 0.1; LP-GCN scripts 1.0).
        lr: Adam learning rate.
        reg: λ of the layer-0 L2 term (LightGCN's ``decay``).
        batch_size: triples per minibatch.
        epochs: maximum number of epochs.
        sampler: ``interactions`` (each train pair once per epoch) or ``users`` (LightGCN's scheme).
        seed: the run seed; every random stream is a named child of it.
        dtype: ``float32`` or ``float64``.
        valid_fraction: per-user fraction of train carved into a validation split when the dataset
            has none (0 keeps all of train).
        eval_every: evaluate every this many epochs.
        eval_initial: also evaluate the untrained model (epoch 0).
        ks: cut-offs for the ranking metrics.
        metric: metric used for model selection and early stopping, e.g. ``recall@20``.
        select: which epoch the summary reports: ``valid`` (best validation ``metric``; falls back
            to ``last`` without a validation split), ``last``, or ``test`` (best *test* ``metric``:
            the optimistic protocol of some published scripts, kept only to reproduce them).
        patience: evaluations without validation improvement before stopping (0: never stop early).
        checkpoint_every: epochs between checkpoints (0: none).
        threads: torch intra-op threads (0: leave torch's default).
        alpha: LP-GCN virtual items per client.
        reproducible: draw every *hiding* value (initial tables, virtual items and their cover
            gradients, negatives, pseudo items, DP/LDP noise) from the run seed, so the run repeats bit
            for bit — and anyone with ``config.toml`` can regenerate them. Unset (the default): true
            under ``crypto = "accounted"``, false under ``crypto = "real"`` (every hiding draw from the
            OS CSPRNG; metrics then vary from run to run, ``--verify`` still holds).
            ``summary.json``'s ``randomness`` says which source each kind of draw used.
        secure_virtual_items: LP-GCN override of ``reproducible`` for the virtual items, the token
            upload order and LightGCN+'s literal virtual W-gradients (unset: follow it). ``false``
            under ``crypto = "real"`` is a seeded override, reported in ``summary.json``.
        secure_init: override of ``reproducible`` for the initial embedding tables (unset: follow
            it). Secure tables come from an ``os.urandom``-keyed ChaCha20 stream (LP-GCN's server
            sees plaintext item rows: with seeded tables it could regenerate them and match rows to
            learn the item id behind every token); the oracle starts from the same tables.
        crypto: ``real`` (every protected payload encrypted) or ``accounted`` (bytes counted as if).
        verify: run the centralized oracle in lockstep and log the largest parameter deviation.
        transcripts: keep what each party received (for audits; memory-hungry on large data).
        paper_literal: LP-GCN(LightGCN+): random gradients for virtual items' W rows as Alg. 7
            prints (inexact when alpha > 0) instead of the lossless aggregation. GNN4FR: Algorithm 5
            and the secret-shared dense aggregation as printed instead of the transposed backward
            (same numbers, about 3x the bytes; ``protocols/gnn4fr/client.py``).
        log_every: write a metrics line every this many epochs (evaluated epochs always); round-based
            protocols run thousands of one-round epochs.
        clients_per_round: FedGRec ``S``, users sampled per round (one round = one epoch).
        local_steps: FedGRec ``τ``, local Adam steps per round.
        n_negatives: FedGRec negatives queried per user per round.
        server_lr: FedGRec ``α`` of Eq. 10 (item base embeddings).
        latent_lr: FedGRec ``α`` of Eq. 11 (1 keeps the latent invariant).
        item_agg: FedGRec Eq. 10 aggregate: ``sum``, ``mean_touched`` or ``mean_S``.
        aggregation: FedGRec layer combination: ``mean``, ``last`` or ``concat``.
        eval_latents: FedGRec user latents at evaluation: ``refresh`` or ``stored``.
        dropout_before: fraction of a round's users lost before uploading.
        dropout_after: fraction lost after uploading (secure aggregation recovers them).
        secagg_threshold: fraction of a round's users secure aggregation needs at every stage;
            must exceed 0.5 (t > n/2, safe against a malicious server; tolerates n - t dropouts).
        secagg_semi_honest: accept secagg_threshold <= 0.5 (an honest-but-curious server only).
        secagg_min_clients: the fewest clients in a secure sum a client takes part in (default 3).
        frac_bits: fixed-point fractional bits of secure aggregation.
        loss: FedGRec-family local loss: ``bpr`` or ``mse`` (FCF).
        confidence: FCF's ``α``.
        optimizer: FedGRec-family local optimizer: ``adam`` or ``sgd``.
        batch_mode: FedGRec-family local pairs: ``one_neg_per_pos`` or ``all_pairs``.
        secure_aggregation: FedGRec family: ``false`` uploads in the clear (privacy-audit baseline).
        device: ``cpu`` or a CUDA device (``cuda``, ``cuda:1``) for the protocol's tables; FedGRec only.
        vae_beta: Mult-VAE's KL weight β (LP-GCN Table 4 grid 0.2–0.8).
        vae_batch_users: Mult-VAE users per minibatch.
        n_pseudo: FedPerGNN pseudo-interacted items per user and round.
        ldp_clip: FedPerGNN per-coordinate clipping ``δ`` of uploads (0: none).
        ldp_scale: FedPerGNN Laplace noise scale ``λ`` (0: none).
        secure_noise: override of ``reproducible`` for DP/LDP noise (FedPerGNN's Laplace; unset:
            follow it): from the OS CSPRNG the stated ε holds against whoever has ``config.toml``.
        local_graph: FedPerGNN expands users' local graphs (``false``: ``h_u = e_u``, federated MF
            with the same uploads; DGREC's FedRec baseline).
        ncf_hidden: NCF's MLP widths (empty: ``[2d, d]`` centralized as LP-GCN's NCF, ``[32, 16, 8]``
            for FedNCF).
    """

    protocol: str = "central"

    dataset: str = "synthetic"
    dataset_options: dict[str, Any] = field(default_factory=dict)
    data_dir: str = ""
    model: str = ""
    dim: int = 64
    n_layers: int = 3
    init_std: float = 0.1
    lr: float = 0.001
    reg: float = 1e-4
    batch_size: int = 2048
    epochs: int = 100
    sampler: str = "interactions"
    seed: int = 2020
    dtype: str = "float32"
    valid_fraction: float = 0.0
    eval_every: int = 1
    eval_initial: bool = False
    ks: list[int] = field(default_factory=lambda: [20])
    metric: str = "recall@20"
    select: str = "valid"
    patience: int = 0
    checkpoint_every: int = 1
    threads: int = 0
    alpha: int = 0
    reproducible: bool | None = None
    secure_virtual_items: bool | None = None
    secure_init: bool | None = None
    crypto: str = "accounted"
    verify: bool = False
    transcripts: bool = False
    paper_literal: bool = False
    log_every: int = 1
    clients_per_round: int = _FEDGREC.clients_per_round
    local_steps: int = _FEDGREC.local_steps
    n_negatives: int = _FEDGREC.n_negatives
    server_lr: float = _FEDGREC.server_lr
    latent_lr: float = _FEDGREC.latent_lr
    item_agg: str = _FEDGREC.item_agg
    aggregation: str = _FEDGREC.aggregation
    eval_latents: str = _FEDGREC.eval_latents
    dropout_before: float = _FEDGREC.dropout_before
    dropout_after: float = _FEDGREC.dropout_after
    secagg_threshold: float = _FEDGREC.secagg_threshold
    secagg_semi_honest: bool = _FEDGREC.secagg_semi_honest
    secagg_min_clients: int = _FEDGREC.secagg_min_clients
    frac_bits: int = _FEDGREC.frac_bits
    loss: str = _FEDGREC.loss
    confidence: float = _FEDGREC.confidence
    optimizer: str = _FEDGREC.optimizer
    batch_mode: str = _FEDGREC.batch_mode
    secure_aggregation: bool = _FEDGREC.secure_aggregation
    device: str = "cpu"
    vae_beta: float = 0.2
    ncf_hidden: list[int] = field(default_factory=list)
    vae_batch_users: int = 500
    n_pseudo: int = 20
    ldp_clip: float = 0.01
    ldp_scale: float = 0.001
    local_graph: bool = True
    secure_noise: bool | None = None

    def __post_init__(self) -> None:
        if not self.model:  # the protocol's own backbone (so `train fedmf` needs no --model mf)
            self.model = BACKBONES.get(self.protocol, "lightgcn")

    def validate(self) -> None:
        """Check ranges and choices; raise :class:`ConfigError` naming the parameter.

        A protocol registered as party programs (``protocol_learner.SPECS``) is valid too, so a
        protocol added there (e.g. a test's toy protocol) trains without being listed here.
        """
        from fedgraphrec.training.protocol_learner import SPECS

        checks: list[tuple[bool, str]] = [
            (
                self.protocol in PROTOCOLS or self.protocol in SPECS,
                f"protocol must be one of {', '.join(PROTOCOLS)}; got {self.protocol!r}",
            ),
            (self.alpha >= 0, f"alpha must be >= 0; got {self.alpha}"),
            (
                self.crypto in ("real", "accounted"),
                f"crypto must be 'real' or 'accounted'; got {self.crypto!r}",
            ),
            (self.model in MODELS, f"model must be one of {', '.join(MODELS)}; got {self.model!r}"),
            (self.dim > 0, f"dim must be positive; got {self.dim}"),
            (self.n_layers >= 0, f"n_layers must be >= 0; got {self.n_layers}"),
            (self.init_std > 0, f"init_std must be positive; got {self.init_std}"),
            (self.lr > 0, f"lr must be positive; got {self.lr}"),
            (self.reg >= 0, f"reg must be >= 0; got {self.reg}"),
            (self.batch_size > 0, f"batch_size must be positive; got {self.batch_size}"),
            (self.epochs >= 0, f"epochs must be >= 0; got {self.epochs}"),
            (
                self.sampler in ("interactions", "users"),
                f"sampler must be 'interactions' or 'users'; got {self.sampler!r}",
            ),
            (self.seed >= 0, f"seed must be >= 0; got {self.seed}"),
            (
                self.dtype in ("float32", "float64"),
                f"dtype must be 'float32' or 'float64'; got {self.dtype!r}",
            ),
            (
                0.0 <= self.valid_fraction < 1.0,
                f"valid_fraction must be in [0, 1); got {self.valid_fraction}",
            ),
            (self.eval_every > 0, f"eval_every must be positive; got {self.eval_every}"),
            (
                len(self.ks) > 0 and all(k > 0 for k in self.ks),
                f"ks must be positive integers; got {self.ks}",
            ),
            (
                self.select in SELECTIONS,
                f"select must be one of {', '.join(SELECTIONS)}; got {self.select!r}",
            ),
            (self.patience >= 0, f"patience must be >= 0; got {self.patience}"),
            (self.checkpoint_every >= 0, f"checkpoint_every must be >= 0; got {self.checkpoint_every}"),
            (self.threads >= 0, f"threads must be >= 0; got {self.threads}"),
            (self.log_every > 0, f"log_every must be positive; got {self.log_every}"),
            (self.vae_beta >= 0, f"vae_beta must be >= 0; got {self.vae_beta}"),
            (
                all(w > 0 for w in self.ncf_hidden),
                f"ncf_hidden must be positive widths; got {self.ncf_hidden}",
            ),
            (self.vae_batch_users > 0, f"vae_batch_users must be positive; got {self.vae_batch_users}"),
            (self.n_pseudo >= 0, f"n_pseudo must be >= 0; got {self.n_pseudo}"),
            (self.ldp_clip >= 0, f"ldp_clip must be >= 0; got {self.ldp_clip}"),
            (self.ldp_scale >= 0, f"ldp_scale must be >= 0; got {self.ldp_scale}"),
            (
                self.secure_noise is not True or self.protocol == "fedpergnn",
                f"secure_noise applies to protocols that add DP noise (fedpergnn here; p4gcn and dgrec "
                f"take --secure-noise); got protocol={self.protocol!r}",
            ),
            (
                self.local_graph or self.protocol == "fedpergnn",
                f"local_graph=false applies to protocol fedpergnn only; got protocol={self.protocol!r}",
            ),
            (
                self.model != "multvae" or self.protocol == "central",
                f"model=multvae is centralized only; got protocol={self.protocol!r}",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        try:
            check_threshold(self.secagg_threshold, self.secagg_semi_honest)
        except ValueError as err:
            raise ConfigError(str(err)) from None
        if self.device != "cpu":
            if self.protocol != "fedgrec":
                raise ConfigError(
                    f"device={self.device!r}: only fedgrec runs off the CPU so far; use device='cpu'"
                )
            if not re.fullmatch(r"cuda(:\d+)?", self.device):
                raise ConfigError(f"device must be 'cpu' or 'cuda[:N]'; got {self.device!r}")
            import torch

            if not torch.cuda.is_available():
                raise ConfigError(f"device={self.device!r} but this machine has no CUDA device")
        if self.protocol in ROUND_PROTOCOLS:
            try:
                self.fedgrec_settings()
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        m = re.fullmatch(r"(precision|recall|ndcg|hit)@(\d+)", self.metric)
        if m is None:
            raise ConfigError(
                f"metric must look like 'recall@20' (precision/recall/ndcg/hit); got {self.metric!r}"
            )
        if int(m.group(2)) not in self.ks:
            raise ConfigError(f"metric {self.metric!r} needs K={m.group(2)} in ks={self.ks}")

    def fedgrec_settings(self) -> FedGRecSettings:
        """FedGRec's hyper-parameters (``K`` = ``n_layers``).

        ``federank`` and ``fcf`` fix ``K = 0`` and their loss (BPR / FCF's confidence-weighted squared
        error); ``n_layers`` does not apply to them.
        """
        shared = {f.name: getattr(self, f.name) for f in dataclasses.fields(FedGRecSettings) if f.name != "K"}
        if self.protocol == "federank":
            return FedGRecSettings(**{**shared, "loss": "bpr", "aggregation": "mean"}, K=0)
        if self.protocol == "fcf":
            return FedGRecSettings(**{**shared, "loss": "mse", "aggregation": "mean"}, K=0)
        return FedGRecSettings(K=self.n_layers, **shared)

    def randomness(self) -> dict[str, Any]:
        """Where this run's hiding draws come from (``summary.json``'s ``randomness``).

        ``init``, ``cover`` (virtual items, cover gradients, negatives, pseudo items) and ``noise``
        (DP/LDP) are each ``"csprng"`` or ``"seed"`` (:func:`~fedgraphrec.seeding.secure_draws`);
        ``seeded_overrides`` names the per-feature flags that ask for seeded draws although the
        run-level rule would hide them (``--crypto real``), so such a run says so.
        """
        reproducible = not secure_draws(self)
        sources = {
            "init": secure_draws(self, "secure_init"),
            "cover": secure_draws(self, "secure_virtual_items" if self.protocol == "lpgcn" else None),
            "noise": secure_draws(self, "secure_noise"),
        }
        flags = ("secure_init", "secure_virtual_items", "secure_noise")
        return {
            "reproducible": reproducible,
            **{k: "csprng" if v else "seed" for k, v in sources.items()},
            "seeded_overrides": [f for f in flags if getattr(self, f) is False and not reproducible],
        }

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (TOML/JSON serialisable; unset optional values left out, TOML has no null)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}
