"""The older LP-GCN Flower job: one run described by a flat config (Flower ``run_config`` keys).

Every protocol written as party programs (FedGRec, FedMF, ...) runs on Flower through the generic
engine instead (:mod:`fedgraphrec.engines.flower.party_app`: ``fedgraphrec flower simulate|deploy
PROTOCOL``). This form remains for LP-GCN's relay server until it is ported
(:meth:`FlowerJob.lpgcn_config`; run by :mod:`fedgraphrec.engines.flower.lpgcn`): a training
configuration (``train-config``, a TOML file as for ``fedgraphrec train``, plus ``train-set``
overrides) trained for ``batches`` minibatches. This module does not import Flower.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from fedgraphrec.data import Interactions
from fedgraphrec.data.registry import load_dataset
from fedgraphrec.data.synthetic import synthetic_interactions
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.loading import load_config

__all__ = ["FlowerJob", "JobResult"]


@dataclass(frozen=True)
class FlowerJob:
    """An LP-GCN run (Flower ``run_config`` keys are these names with ``-`` for ``_``).

    Attributes:
        protocol: ``"lpgcn"`` (the only protocol of this older form; see :meth:`lpgcn_config`).
        dataset: ``"synthetic"`` (sized by ``users``/``items``/``mean_degree``) or a registry name
            such as ``"ml-100k"`` (needs ``FEDGRAPHREC_DATA``).
        out: folder for ``result.json`` and ``embeddings.pt`` (empty: do not write).
        stage_timeout: seconds the ServerApp waits for one round (0: the LP-GCN default bound).
        min_nodes: SuperNodes the ServerApp waits for before starting.
        train_config: LP-GCN only: a training TOML (absolute, or relative to the source checkout);
            empty: a synthetic run sized by ``users``/``items``/``mean_degree``.
        train_set: LP-GCN only: ``key=value`` overrides of the training config, ``;``-separated.
        batches: LP-GCN only: minibatches to train (the in-process sampler's first ones, in order).
    """

    protocol: str = "lpgcn"

    dataset: str = "synthetic"
    users: int = 40
    items: int = 60
    mean_degree: float = 6.0
    seed: int = 0
    dim: int = 8
    lr: float = 0.05
    reg: float = 1e-3
    out: str = ""
    stage_timeout: float = 0.0
    min_nodes: int = 1
    train_config: str = ""
    train_set: str = ""
    batches: int = 2

    def __post_init__(self) -> None:
        if self.protocol != "lpgcn":
            raise ValueError(
                f"protocol must be 'lpgcn' in this older job form, got {self.protocol!r}; "
                "party programs (fedgrec, fedmf, ...) run with `fedgraphrec flower simulate PROTOCOL`"
            )

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
