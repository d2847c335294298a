"""Training DGREC, its ablations and the DMF/DLGNN baselines on Flixster, Ciao-10core or Epinions.

``fedgraphrec train dgrec --dataset ciao-10core --variant dgrec`` writes a standard run folder
(:func:`train_dgrec`, per-epoch loss and test metrics); every setting of :class:`DGRECRunSettings` is
a ``--set`` / TOML key. :func:`run` returns one run's record (settings, per-epoch curve, final
recall@20/ndcg@20, ledger bytes, accounting), which the table runner
:mod:`fedgraphrec.reproduce.dgrec_runs` stores as JSON. Flixster (Monti) uses its fixed split, the
user graph ``W_users`` as the inter-user graph and ``I + W_movies`` as item hyperedges (stand-in for
the paper's Flixster). Ciao/Epinions use trust links and the item categories as hyperedges; their
full item spaces do not fit one table per user, so DGREC runs on the registry's derived
``ciao-10core`` (:mod:`fedgraphrec.data.derived`; the paper's Weeplaces rule, which Ciao stands in
for).

Learning rates (``results/dgrec/README.md``, *Learning rate*): DGREC and its ablations use the Eq.-2
loss scale and lr 0.6 (the working range under one-bit sharing at δ = 0.1 is about 0.3–3; the paper's
grid {0.001, 0.005, 0.01} is not in these units, since a clipped, one-bit-decoded step is at most
lr·δ per coordinate). DMF / DLGNN keep the per-pair mean loss with plain sharing and lr 5 / 20.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.data.derived import core_subset
from fedgraphrec.data.registry import REGISTRY, load_dataset
from fedgraphrec.data.types import ItemGraph, Ratings
from fedgraphrec.privacy.one_bit import accounting
from fedgraphrec.protocols.dgrec import DGREC, DGRECSettings, ModelConfig

__all__ = [
    "NOISE_NOTE",
    "VARIANTS",
    "DGRECRunSettings",
    "data_sizes",
    "load_side",
    "run",
    "settings_for",
    "train_dgrec",
]

VARIANTS: dict[str, dict[str, Any]] = {
    "dgrec": {},
    "non-item-graph": {"model": {"item_graph": False, "pearson": False}},
    "non-neighbor": {"neighbours": False},
    "non-hypergraph": {"hypergraph": False},
    "non-attention": {"model": {"attention": False}},
    "non-pearson": {"model": {"pearson": False}},
    "non-sharing": {"sharing": "laplace"},
    "local-only": {"sharing": "none"},
    "no-noise": {"sharing": "clipped"},  # reference: DGREC's clipped mean without the encoding
    # the baselines share plain float gradients (no clip bound), so they keep the per-pair mean loss
    # under which their learning rates (5 / 20) were chosen; Eq. 2's scale is DGREC's
    "dmf": {"model": {"kind": "mf", "loss_scale": "mean"}, "sharing": "plain", "hops": 1, "lr": 5.0},
    "dlgnn": {"model": {"kind": "lgn", "loss_scale": "mean"}, "sharing": "plain", "hops": 1, "lr": 20.0},
}


def load_side(
    name: str,
    *,
    top_items: int | None = None,
    min_user: int | None = None,
    min_item: int | None = None,
) -> tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]:
    """(train, test, social adjacency, item×tag incidence) for a dataset with side information.

    ``name`` is any registry dataset with ratings, a social graph and item side information,
    derived ones included (``ciao-10core``, :mod:`fedgraphrec.data.derived`). The train/test split
    is the loader's (Flixster: its fixed split; Ciao/Epinions: the seeded per-user 80/10/10 split,
    whose validation part this runner does not use). ``top_items``/``min_user``/``min_item``
    restrict the dataset to its :func:`~fedgraphrec.data.derived.core_subset` (for a derived
    dataset they replace its own filter values).

    Raises:
        ValueError: the dataset lacks ratings with a social graph or side information for items,
            or a filter parameter is invalid or keeps no training interaction.
    """
    given = {"top_items": top_items, "min_user": min_user, "min_item": min_item}
    core: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    derived = name in REGISTRY and REGISTRY[name].format == "derived"
    data = load_dataset(name, **core) if derived else load_dataset(name)
    if core and not derived and isinstance(data, Ratings):
        data = core_subset(data, name, core)
    if not isinstance(data, Ratings) or data.social is None:
        raise ValueError(f"dataset {name!r} needs ratings with a social graph")
    inter = data.to_interactions()
    social = data.social.adjacency(symmetric=True)
    graph = data.info.get("item_graph")
    if isinstance(graph, ItemGraph):
        tags = (graph.adjacency(symmetric=True) + sp.identity(data.n_items)).tocsr()
    elif data.tags is not None:
        tags = data.tags.matrix()
    else:
        raise ValueError(f"dataset {name!r} has neither an item graph nor item tags")
    return inter.train, inter.test, social, (tags > 0).astype(np.float64).tocsr()


def data_sizes(
    train: sp.csr_matrix, test: sp.csr_matrix, social: sp.csr_matrix, tags: sp.csr_matrix
) -> dict[str, int]:
    """Sizes of what :func:`load_side` returned, for run records and reports."""
    return {
        "users": int(train.shape[0]),
        "items": int(train.shape[1]),
        "train": int(train.nnz),
        "test": int(test.nnz),
        "test_users": int((np.diff(test.tocsr().indptr) > 0).sum()),
        "social_links": int(social.nnz),
        "tags": int(tags.shape[1]),
    }


def settings_for(variant: str, **overrides: Any) -> DGRECSettings:
    """Settings of a named variant, with ``overrides`` (``public_ratio``, ``lr``, …)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {sorted(VARIANTS)}, got {variant!r}")
    spec = {**VARIANTS[variant], **overrides}  # an override wins over the variant's own value
    # model fields merge: an override of n_interests keeps the variant's own kind and switches
    model = ModelConfig(**{**VARIANTS[variant].get("model", {}), **overrides.get("model", {})})
    spec.pop("model", None)
    return replace(DGRECSettings(model=model), **spec)


def run(
    dataset: str, variant: str, seed: int, epochs: int, eval_every: int = 0, **overrides: Any
) -> dict[str, Any]:
    """Train one variant and return its record.

    ``eval_every``: also evaluate on the test split after every that many epochs (0: only at the
    end); the record's ``curve`` holds one entry per epoch (loss, seconds, and the metrics where
    evaluated), ``loss_curve`` the losses alone.
    """
    if eval_every < 0:
        raise ValueError(f"eval_every must be >= 0, got {eval_every}")
    train, test, social, tags = load_side(dataset)
    s = settings_for(variant, **overrides)
    t0 = time.time()
    rec = DGREC(train, social, tags, s, seed=seed)
    curve: list[dict[str, Any]] = []
    metrics: dict[str, float] = {}
    for e in range(epochs):
        point: dict[str, Any] = {"epoch": e + 1, "loss": rec.epoch(e)}
        if e + 1 == epochs or (eval_every and (e + 1) % eval_every == 0):
            metrics = rec.evaluate(test, [train])
            point["test"] = metrics
        point["seconds"] = time.time() - t0
        curve.append(point)
    n_s = rec.models.n_shared()
    return {
        "dataset": dataset,
        "data": data_sizes(train, test, social, tags),
        "variant": variant,
        "seed": seed,
        "epochs": epochs,
        "settings": asdict(s),
        "noise_source": rec.noise.name,
        "randomness": {
            "reproducible": not (s.secure_noise or s.secure_sampling),
            "noise": "csprng" if s.secure_noise else "seed",
            "sampling": "csprng" if s.secure_sampling else "seed",
        },
        "loss_curve": [c["loss"] for c in curve],
        "curve": curve,
        "metrics": metrics,
        "n_s": n_s,
        "model_memory_bytes": rec.models.memory_bytes(),
        "ledger_bytes": int(rec.network.ledger.total_bytes()),
        "accounting_per_sharing": asdict(accounting(s.delta, s.beta, n_s)),
        "seconds": time.time() - t0,
    }


_PROTOCOL_KEYS = ("lr", "delta", "beta", "hops", "fanout", "batch", "max_items", "sharing")
_MODEL_KEYS = ("d", "n_interests", "d_interest", "hidden", "l2", "loss_scale")


@dataclass(frozen=True)
class DGRECRunSettings:
    """One DGREC run's settings (TOML and ``--set``); ``None`` keeps the variant's own value.

    Defaults of the ``dgrec`` variant and the ablations (Eq.-2 loss scale): lr 0.6, δ = 0.1, β = 1,
    H = 4, n_u = 3, 16 positives per member and step, ≤ 128 hypergraph nodes, d = 16, n_i = 6,
    d_i = 10, MLP hidden (32, 16), λ = 1e-3. DMF / DLGNN: per-pair mean loss, lr 5 / 20, H = 1.

    Attributes:
        variant: one of :data:`VARIANTS`.
        epochs: training epochs.
        centres_per_epoch: group centres per epoch (``None``: every user with training items).
        public_ratio: fraction of training items each user publicises.
        eval_every: evaluate on the test split every that many epochs too (0: only at the end).
        lr, delta, beta: SGD learning rate, clip bound δ, sharing budget β.
        hops, fanout: ``H`` and ``n_u`` of the group sampling.
        batch: BPR positives per member and step (one negative each).
        max_items: cap on the nodes of a user's inner-item hypergraph.
        sharing: ``one_bit``, ``laplace``, ``clipped``, ``plain`` or ``none`` (the variant sets it).
        d, n_interests, d_interest, hidden, l2: the local model's ``d``, ``n_i``, ``d_i``, MLP hidden
            sizes and L2 weight λ.
        loss_scale: ``eq2`` (sampled estimate of the paper's Eq.-2 sum) or ``mean``.
        reproducible: draw the hiding values (the LDP randomness, the group sampling) from the run
            seed, so the run repeats bit for bit. DGREC is simulated in one process and has no crypto
            mode, so this is on by default (as under ``--crypto accounted``); ``false`` draws them from
            the OS CSPRNG.
        secure_noise: override of ``reproducible`` for the LDP randomness alone (unset: follow it).
    """

    variant: str = "dgrec"
    epochs: int = 2
    centres_per_epoch: int | None = 300
    public_ratio: float = 1.0
    eval_every: int = 1
    lr: float | None = None
    delta: float | None = None
    beta: float | None = None
    hops: int | None = None
    fanout: int | None = None
    batch: int | None = None
    max_items: int | None = None
    sharing: str | None = None
    d: int | None = None
    n_interests: int | None = None
    d_interest: int | None = None
    hidden: list[int] | None = None
    l2: float | None = None
    loss_scale: str | None = None
    reproducible: bool = True
    secure_noise: bool | None = None

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {', '.join(VARIANTS)}; got {self.variant!r}")
        if self.epochs < 1:
            raise ValueError(f"epochs must be >= 1; got {self.epochs}")
        if self.centres_per_epoch is not None and self.centres_per_epoch < 1:
            raise ValueError(
                f"centres_per_epoch must be >= 1 (or unset: every user); got {self.centres_per_epoch}"
            )
        if not 0.0 < self.public_ratio <= 1.0:
            raise ValueError(f"public_ratio must be in (0, 1]; got {self.public_ratio}")
        if self.eval_every < 0:
            raise ValueError(f"eval_every must be >= 0; got {self.eval_every}")
        if self.hidden is not None and len(self.hidden) != 2:
            raise ValueError(f"hidden must hold two sizes (the MLP's two hidden layers); got {self.hidden}")
        settings_for(self.variant, **self.overrides())  # the protocol's and model's own checks

    def overrides(self) -> dict[str, Any]:
        """The :func:`settings_for` overrides these settings make."""
        over: dict[str, Any] = {
            "centres_per_epoch": self.centres_per_epoch,
            "public_ratio": self.public_ratio,
            "secure_noise": not self.reproducible if self.secure_noise is None else self.secure_noise,
            "secure_sampling": not self.reproducible,
        }
        over.update({k: getattr(self, k) for k in _PROTOCOL_KEYS if getattr(self, k) is not None})
        model = {k: getattr(self, k) for k in _MODEL_KEYS if getattr(self, k) is not None}
        if "hidden" in model:
            model["hidden"] = tuple(model["hidden"])
        if model:
            over["model"] = model
        return over


def train_dgrec(dataset: str, seed: int, s: DGRECRunSettings, run_dir: str | Path) -> dict[str, Any]:
    """One DGREC run written as a standard run folder; returns ``summary.json``'s dict."""
    from fedgraphrec.training.rundir import write_run

    torch.set_num_threads(1)
    res = run(dataset, s.variant, seed, s.epochs, s.eval_every, **s.overrides())
    records = [{k: v for k, v in c.items() if k != "seconds"} for c in res["curve"]]
    summary = {
        "protocol": "dgrec",
        "variant": s.variant,
        "dataset": dataset,
        "seed": seed,
        "selection": "last epoch (DGREC has no validation split)",
        "selected_epoch": s.epochs,
        "test": res["metrics"],
        "noise_source": res["noise_source"],
        "noise_note": NOISE_NOTE[res["noise_source"]],
        "randomness": res["randomness"],
        "settings": res["settings"],
        "data": res["data"],
        "ledger_bytes": res["ledger_bytes"],
        "accounting_per_sharing": res["accounting_per_sharing"],
        "train_seconds": res["seconds"],
        "epoch_seconds": [c["seconds"] for c in res["curve"]],
    }
    config = {"protocol": "dgrec", "dataset": dataset, "seed": seed, **asdict(s)}
    write_run(run_dir, config, records, summary, f"{s.variant} on {dataset}")
    return summary


NOISE_NOTE = {
    "seeded": "LDP randomness from the run seed: reproducible research run, not a privacy guarantee",
    "csprng": "LDP randomness from the OS CSPRNG (secure_noise): the stated β-LDP holds",
}
