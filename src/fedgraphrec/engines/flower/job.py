"""One FedGRec or LP-GCN run described by a flat config, runnable in-process or with Flower as transport.

The same function, :func:`run_fedgrec_job`, serves both engines: the in-process engine passes no
``secure_sum`` (the four secure-aggregation stages run in this process), the Flower ``ServerApp``
passes :class:`~fedgraphrec.runtime.flower.FlowerSecureSum` (the client stages run on the
SuperNodes). Everything else — data, initial tables, round sampling, arithmetic — is the same code
with the same seeds, so the two engines must agree to the fixed-point resolution of the sum (in
fact bit for bit: the fixed-point sum is exact). This module does not import Flower.

With ``protocol = "lpgcn"`` the job is an LP-GCN run instead (:meth:`FlowerJob.lpgcn_config`; run by
:mod:`fedgraphrec.engines.flower.lpgcn`): a training configuration (``train-config``, a TOML
file as for ``fedgraphrec train``, plus ``train-set`` overrides) trained for ``batches`` minibatches.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.data import Interactions
from fedgraphrec.data.registry import load_dataset
from fedgraphrec.data.synthetic import synthetic_interactions
from fedgraphrec.engines.flower.fedgrec_legacy import FedGRec
from fedgraphrec.evaluation.ranking import evaluate_embeddings
from fedgraphrec.protocols.fedgrec import FedGRecSettings
from fedgraphrec.protocols.fedgrec.sampling import RoundSample
from fedgraphrec.protocols.secure_aggregation import SecureSum, threshold_for
from fedgraphrec.seeding import seeded_generator
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.loading import load_config

__all__ = ["FlowerJob", "JobResult", "run_fedgrec_job"]

_LOOKAHEAD = 64
"""Training rounds whose secure-aggregation keys are advertised together, ahead of time."""


@dataclass(frozen=True)
class FlowerJob:
    """A FedGRec or LP-GCN run (Flower ``run_config`` keys are these names with ``-`` for ``_``).

    Attributes:
        protocol: ``"fedgrec"`` (the fields below up to ``secagg_semi_honest``) or ``"lpgcn"`` (the
            fields from ``train_config`` on; see :meth:`lpgcn_config`).
        dataset: ``"synthetic"`` (sized by ``users``/``items``/``mean_degree``) or a registry name
            such as ``"ml-100k"`` (needs ``FEDGRAPHREC_DATA``).
        rounds: training rounds after the warm-up.
        out: folder for ``result.json`` and ``embeddings.pt`` (empty: do not write).
        stage_timeout: seconds the ServerApp waits for one secure-aggregation stage (0: no limit).
        min_nodes: SuperNodes the ServerApp waits for before starting.
        train_config: LP-GCN only: a training TOML (absolute, or relative to the source checkout);
            empty: a synthetic run sized by ``users``/``items``/``mean_degree``.
        train_set: LP-GCN only: ``key=value`` overrides of the training config, ``;``-separated.
        batches: LP-GCN only: minibatches to train (the in-process sampler's first ones, in order).
    """

    protocol: str = "fedgrec"

    dataset: str = "synthetic"
    users: int = 40
    items: int = 60
    mean_degree: float = 6.0
    seed: int = 0
    dim: int = 8
    K: int = 2
    rounds: int = 3
    clients_per_round: int = 10
    local_steps: int = 2
    n_negatives: int = 5
    lr: float = 0.05
    reg: float = 1e-3
    frac_bits: int = 40
    secagg_threshold: float = 0.6
    secagg_semi_honest: bool = False
    out: str = ""
    stage_timeout: float = 0.0
    min_nodes: int = 1
    train_config: str = ""
    train_set: str = ""
    batches: int = 2

    def __post_init__(self) -> None:
        if self.protocol not in ("fedgrec", "lpgcn"):
            raise ValueError(f"protocol must be 'fedgrec' or 'lpgcn', got {self.protocol!r}")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> FlowerJob:
        """From a Flower ``run_config`` (``clients-per-round = 10``); unknown keys are an error."""
        names = {f.name: f for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in config.items():
            name = key.replace("-", "_")
            if name not in names:
                raise ValueError(f"run config key {key!r} is not a FlowerJob field; known: {sorted(names)}")
            kind = type(getattr(cls(), name))
            kwargs[name] = kind(value)
        return cls(**kwargs)

    def to_config(self) -> dict[str, Any]:
        """Inverse of :meth:`from_config`."""
        return {k.replace("_", "-"): v for k, v in dataclasses.asdict(self).items()}

    def lpgcn_config(self) -> TrainConfig:
        """The LP-GCN training configuration of this job (``real`` crypto, LightGCN backbone).

        Without ``train_config``: synthetic data of ``users``×``items`` (mean degree ``mean_degree``)
        with ``dim``, ``lr``, ``reg`` and ``seed`` from this job, 2 layers, α = 2, batches of 32
        triples, float64; ``train_set`` overrides any of it.

        Raises:
            ValueError: naming the setting, if the job is not a valid LP-GCN run on Flower.
        """
        if self.batches < 1:
            raise ValueError(f"batches must be at least 1, got {self.batches}")
        base = TrainConfig(
            protocol="lpgcn",
            dim=self.dim,
            lr=self.lr,
            reg=self.reg,
            seed=self.seed,
            n_layers=2,
            alpha=2,
            batch_size=32,
            dtype="float64",
            crypto="real",
        )
        path: Path | None = None
        if self.train_config:
            path = Path(self.train_config)
            if not path.is_absolute():
                path = Path(__file__).resolve().parents[4] / path
        else:
            base.dataset = "synthetic"
            base.dataset_options = {
                "n_users": self.users,
                "n_items": self.items,
                "mean_degree": self.mean_degree,
                "seed": self.seed,
            }
        overrides = [kv.strip() for kv in self.train_set.split(";") if kv.strip()]
        cfg = load_config(path, overrides, base=base)
        if cfg.protocol != "lpgcn":
            raise ValueError(
                f"train-config: protocol must be 'lpgcn' for an LP-GCN job, got {cfg.protocol!r}"
            )
        if cfg.model != "lightgcn":
            raise ValueError(f"model: LP-GCN on Flower runs the LightGCN backbone, got {cfg.model!r}")
        if cfg.crypto != "real":
            raise ValueError(f"crypto: LP-GCN on Flower encrypts for real; got crypto={cfg.crypto!r}")
        if cfg.n_layers < 1:
            raise ValueError(f"n_layers: LP-GCN on Flower needs at least one layer, got {cfg.n_layers}")
        return cfg

    def settings(self) -> FedGRecSettings:
        """The protocol's hyper-parameters."""
        return FedGRecSettings(
            K=self.K,
            clients_per_round=self.clients_per_round,
            local_steps=self.local_steps,
            n_negatives=self.n_negatives,
            lr=self.lr,
            reg=self.reg,
            frac_bits=self.frac_bits,
            secagg_threshold=self.secagg_threshold,
            secagg_semi_honest=self.secagg_semi_honest,
        )

    def data(self) -> Interactions:
        """The dataset (synthetic from the seed, or loaded from the registry)."""
        if self.dataset == "synthetic":
            return synthetic_interactions(
                self.users, self.items, mean_degree=self.mean_degree, seed=self.seed
            )
        loaded = load_dataset(self.dataset, download=False)
        if not isinstance(loaded, Interactions):
            raise ValueError(f"dataset {self.dataset!r} is not implicit feedback")
        return loaded


@dataclass
class JobResult:
    """Final representations, metrics, per-round losses, the ledger and who dropped."""

    user_emb: torch.Tensor
    item_emb: torch.Tensor
    metrics: dict[str, float]
    losses: list[float]
    ledger: dict[str, object]
    dropped: dict[int, list[int]] = field(default_factory=dict)
    extra: dict[str, object] = field(default_factory=dict)

    def save(self, folder: str | Path) -> None:
        """``result.json`` and ``embeddings.pt`` in ``folder``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        torch.save({"user": self.user_emb, "item": self.item_emb}, folder / "embeddings.pt")
        body = {
            "metrics": self.metrics,
            "losses": self.losses,
            "ledger": self.ledger,
            "dropped": {str(k): v for k, v in self.dropped.items()},
            **self.extra,
        }
        tmp = folder / "result.json.tmp"
        tmp.write_text(json.dumps(body, indent=2) + "\n")
        tmp.replace(folder / "result.json")  # atomic: a reader never sees half a file


class _ForcedDrops(FedGRec):
    """FedGRec whose rounds lose given clients before uploading (to replay a deployment's failures)."""

    forced: Mapping[int, list[int]] = {}

    def sample(self, round_index: int) -> RoundSample:
        rs = super().sample(round_index)
        extra = np.asarray(self.forced.get(round_index, []), dtype=np.int64)
        if not len(extra):
            return rs
        return dataclasses.replace(rs, drop_before=np.union1d(rs.drop_before, extra))


def run_fedgrec_job(
    job: FlowerJob,
    *,
    secure_sum: SecureSum | None = None,
    forced_drops: Mapping[int, list[int]] | None = None,
    dropped_of: Any = None,
) -> JobResult:
    """Warm-up, ``job.rounds`` rounds and a full-ranking evaluation, with ``real`` cryptography.

    Args:
        job: the run.
        secure_sum: who runs secure aggregation (``None``: in this process).
        forced_drops: round → client ids that drop before uploading (replays a deployment's failures
            in the in-process engine).
        dropped_of: ``round → client ids`` callback reporting who the transport lost in a round.
    """
    data = job.data()
    g = seeded_generator(job.seed)
    user0 = torch.randn(data.n_users, job.dim, generator=g, dtype=torch.float64) * 0.1
    item0 = torch.randn(data.n_items, job.dim, generator=g, dtype=torch.float64) * 0.1
    settings = job.settings()
    prepare = getattr(secure_sum, "prepare", None)  # a transport that can advertise keys ahead
    N, d, K = data.n_items, job.dim, settings.K
    if prepare is not None:  # the warm-up's sessions: every user with an item (FedGRec's labels)
        users = np.flatnonzero(np.diff(sp.csr_matrix(data.train).indptr) > 0)
        t = threshold_for(len(users), settings.secagg_threshold)
        warm = [(f"fedgrec/warmup/{k}".encode(), users, t, N * d) for k in range(1, K + 1)]
        prepare([(b"fedgrec/warmup/degrees", users, t, N), *warm])
    protocol = _ForcedDrops(
        data.train, user0, item0, settings, seed=job.seed, crypto="real", secure_sum=secure_sum
    )
    protocol.forced = dict(forced_drops or {})
    length = (K + 1) * N * d + (N if settings.item_agg == "mean_touched" else 0)
    losses: list[float] = []
    dropped: dict[int, list[int]] = {}
    for r in range(job.rounds):
        if prepare is not None and r % _LOOKAHEAD == 0:
            ahead = [(r2, protocol.sample(r2).clients) for r2 in range(r, min(r + _LOOKAHEAD, job.rounds))]
            prepare(
                [
                    (
                        f"fedgrec/round/{r2}".encode(),
                        c,
                        threshold_for(len(c), settings.secagg_threshold),
                        length,
                    )
                    for r2, c in ahead
                ]
            )
        rec = protocol.train_round(r)
        losses.append(rec.loss)
        if dropped_of is not None:
            lost = dropped_of(r)
            if lost:
                dropped[r] = lost
    user_emb, item_emb = protocol.final_embeddings()
    result = evaluate_embeddings(user_emb, item_emb, data.test, exclude=[data.train], ks=(10, 20))
    return JobResult(user_emb, item_emb, dict(result.metrics), losses, protocol.net.ledger.to_dict(), dropped)
