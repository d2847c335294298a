"""DGREC Table 2's side-information baselines on the DGREC split (``results/dgrec/README.md``).

``python -m fedgraphrec.reproduce.dgrec_central METHOD --dataset flixster --seed 0 --out
results/dgrec/central`` trains one method on exactly the train matrix of
:func:`~fedgraphrec.reproduce.dgrec_runs.load_side` and evaluates recall@20 / ndcg@20 on its test
matrix with train items masked (the project's evaluator; the same split and masking as the DGREC
runs), then writes ``<out>/<dataset>_<method>_s<seed>.json``:

* ``lightgcn-side``: centralised LightGCN over the user–item graph plus the social graph and the
  item–item graph (:class:`~fedgraphrec.models.side_graph.LightGCNSide`);
* ``lightgcn``: the same model and loop without the side edges (plain LightGCN, for an
  equal-setting comparison);
* ``hypergnn``: centralised attention-free hypergraph convolution over user item sets, tags and
  friend sets (:class:`~fedgraphrec.models.side_graph.HyperGNN`);
* ``fedgnn``: the project's FedPerGNN (``protocol = "fedpergnn"``) with its local-DP upload set to
  ε = 1 (λ from :func:`~fedgraphrec.privacy.laplace.laplace_scale_for`, re-exported here
  as ``laplace_scale_for``);
* ``fedrec``: the same rounds, pseudo items and ε = 1 uploads without the local-graph expansion
  (``local_graph = false``, :math:`h_u = e_u`): federated BPR-MF, the paper's FedRec without its
  social regulariser.

Both centralised models train with BPR and Adam on minibatches of the seeded
:class:`~fedgraphrec.training.sampler.BPRSampler` (every training pair once per epoch).

Item–item edges (``lightgcn-side``): Flixster's "tags" are its item graph as hyperedges
``I + W_movies``, so the item graph itself (``W_movies``) is used; for category tags (Ciao) two
items are joined when they share a category (spec §8.5, "items sharing a tag").
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from fedgraphrec.data.types import Interactions
from fedgraphrec.models.side_graph import (
    HyperGNN,
    LightGCNSide,
    augmented_adjacency,
    hypergraph_factor,
    hypergraph_incidence,
    items_sharing_a_tag,
)
from fedgraphrec.privacy.laplace import laplace_scale_for
from fedgraphrec.protocols.baselines.fedpergnn.settings import FedPerGNNSettings
from fedgraphrec.reproduce.dgrec_runs import data_sizes, load_side
from fedgraphrec.seeding import torch_generator
from fedgraphrec.training.config import EvalSettings, TrainConfig
from fedgraphrec.training.sampler import BPRSampler
from fedgraphrec.training.trainer import Trainer, evaluate_embeddings_on

__all__ = [
    "CENTRAL",
    "FEDERATED",
    "build_central",
    "fit_central",
    "item_relations",
    "laplace_scale_for",
    "run",
    "summarize",
]

CENTRAL = ("lightgcn-side", "hypergnn", "lightgcn")
FEDERATED = ("fedgnn", "fedrec")


def item_relations(tags: sp.csr_matrix) -> tuple[sp.csr_matrix, str]:
    """The item–item graph for ``lightgcn-side`` and how it was made.

    ``tags`` that are a square symmetric item × item matrix with a full diagonal are an item graph
    written as hyperedges (``I + W``): ``W`` is returned. Otherwise (item × category) items that
    share a tag are joined.
    """
    m = tags.shape[0]
    square = tags.shape == (m, m)
    if square and np.all(tags.diagonal() != 0) and (tags != tags.T).nnz == 0:
        W = sp.csr_matrix(tags, dtype=np.float64, copy=True).tolil()
        W.setdiag(0)
        out = W.tocsr()
        out.eliminate_zeros()
        return out, "item graph (tags minus the diagonal)"
    return items_sharing_a_tag(tags), "items sharing a tag"


def build_central(
    method: str,
    train: sp.csr_matrix,
    social: sp.csr_matrix,
    tags: sp.csr_matrix,
    *,
    dim: int,
    n_layers: int,
    seed: int,
    init_std: float = 0.1,
) -> tuple[LightGCNSide | HyperGNN, dict[str, Any]]:
    """The centralised ``method`` (``lightgcn-side``, ``lightgcn``, ``hypergnn``) and facts on its graph."""
    gen = torch_generator(seed, "init")
    n_users = train.shape[0]
    if method in ("lightgcn-side", "lightgcn"):
        item_item, how = item_relations(tags) if method == "lightgcn-side" else (None, "none")
        adj = augmented_adjacency(train, social if method == "lightgcn-side" else None, item_item)
        edges = 0 if item_item is None else int(item_item.nnz)
        graph = {"adjacency_nnz": int(adj.nnz), "item_item_edges": edges, "item_item": how}
        return LightGCNSide(adj, n_users, dim, n_layers, init_std, gen), graph
    if method == "hypergnn":
        H = hypergraph_incidence(train, social, tags)
        B = hypergraph_factor(H)
        return HyperGNN(B, n_users, dim, n_layers, init_std, gen), {
            "hyperedges": int(H.shape[1]),
            "incidence_nnz": int(H.nnz),
        }
    raise ValueError(f"method must be one of {', '.join(CENTRAL)}; got {method!r}")


def fit_central(
    model: LightGCNSide | HyperGNN,
    train: sp.csr_matrix,
    *,
    epochs: int,
    lr: float,
    reg: float,
    batch_size: int,
    seed: int,
) -> tuple[list[float], list[float]]:
    """Adam on BPR minibatches of the seeded sampler; returns the mean loss and the seconds per epoch.

    Raises:
        FloatingPointError: an epoch's loss is not finite (names the epoch and ``lr``).
    """
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sampler = BPRSampler(train, seed, "interactions")
    curve: list[float] = []
    epoch_seconds: list[float] = []
    for e in range(epochs):
        t1, total, n = time.time(), 0.0, 0
        for users, pos, neg in sampler.batches(e, batch_size):
            opt.zero_grad(set_to_none=True)
            out = model.batch_loss(users, pos, neg, reg)
            out.total.backward()
            opt.step()
            total, n = total + out.total.item(), n + 1
        if not np.isfinite(total):
            raise FloatingPointError(f"non-finite loss in epoch {e + 1} (lr {lr})")
        curve.append(total / n)
        epoch_seconds.append(time.time() - t1)
    return curve, epoch_seconds


def _central(
    method: str,
    dataset: str,
    seed: int,
    epochs: int,
    dim: int,
    n_layers: int,
    lr: float,
    reg: float,
    batch: int,
) -> dict[str, Any]:
    train, test, social, tags = load_side(dataset)
    data = Interactions(name=dataset, n_users=train.shape[0], n_items=train.shape[1], train=train, test=test)
    t0 = time.time()
    model, graph = build_central(method, train, social, tags, dim=dim, n_layers=n_layers, seed=seed)
    curve, epoch_seconds = fit_central(
        model, train, epochs=epochs, lr=lr, reg=reg, batch_size=batch, seed=seed
    )
    U, V = model.frozen_embeddings()
    metrics = evaluate_embeddings_on(U, V, data, [20])
    return {
        "settings": {
            "dim": dim,
            "n_layers": n_layers,
            "lr": lr,
            "reg": reg,
            "batch_size": batch,
            "optimizer": "adam",
            "init_std": 0.1,
            "sampler": "interactions",
        },
        "graph": graph,
        "loss_curve": curve,
        "mean_epoch_seconds": float(np.mean(epoch_seconds)) if epoch_seconds else 0.0,
        "metrics": metrics,
        "seconds": time.time() - t0,
    }


def _federated(
    method: str,
    dataset: str,
    seed: int,
    rounds: int,
    epsilon: float,
    clip: float,
    lr: float,
    fed: dict[str, int],
) -> dict[str, Any]:
    train, test, _, _ = load_side(dataset)
    data = Interactions(name=dataset, n_users=train.shape[0], n_items=train.shape[1], train=train, test=test)
    scale = laplace_scale_for(epsilon, clip)
    settings = FedPerGNNSettings(
        model="lightgcn", lr=lr, ldp_clip=clip, ldp_scale=scale, clients_per_round=fed["clients_per_round"],
        local_steps=fed["local_steps"], n_negatives=fed["n_negatives"], local_graph=method == "fedgnn",
    )  # fmt: skip
    cfg = TrainConfig(
        protocol="fedpergnn", dataset=dataset, epochs=rounds, seed=seed, threads=1, checkpoint_every=0,
        eval=EvalSettings(eval_every=rounds, select="last"), settings=settings,
    )  # fmt: skip
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        result = Trainer(cfg, tmp, progress=False, data=data).fit()
    return {
        "settings": {
            "protocol": "fedpergnn",
            "local_graph": settings.local_graph,
            "rounds": rounds,
            "clients_per_round": settings.clients_per_round,
            "local_steps": settings.local_steps,
            "n_negatives": settings.n_negatives,
            "n_pseudo": settings.n_pseudo,
            "lr": lr,
            "dim": settings.dim,
            "epsilon": epsilon if math.isfinite(epsilon) else "inf",
            "ldp_clip": clip,
            "ldp_scale": scale,
        },
        "loss_curve": [r["loss"] for r in result.history],
        "metrics": result.summary["test"],
        "communication": result.summary.get("communication", {}),
        "seconds": time.time() - t0,
    }


def run(
    method: str,
    dataset: str,
    seed: int,
    epochs: int = 100,
    *,
    dim: int = 64,
    n_layers: int = 3,
    lr: float = 1e-3,
    reg: float = 1e-4,
    batch_size: int = 2048,
    epsilon: float = 1.0,
    clip: float = 0.1,
    clients_per_round: int = 100_000_000,
    local_steps: int = 1,
    n_negatives: int = 64,
) -> dict[str, Any]:
    """Train and evaluate one method; ``epochs`` are rounds for the federated ``fedgnn``/``fedrec``.

    The federated defaults are the project's FedPerGNN comparison setting (``results/baselines``):
    every user once per round (one round = one epoch), one local step, 64 negatives.
    """
    if epochs <= 0:
        raise ValueError(f"epochs must be positive, got {epochs}")
    torch.set_num_threads(1)
    if method in CENTRAL:
        body = _central(method, dataset, seed, epochs, dim, n_layers, lr, reg, batch_size)
    elif method in FEDERATED:
        fed = {"clients_per_round": clients_per_round, "local_steps": local_steps, "n_negatives": n_negatives}
        body = _federated(method, dataset, seed, epochs, epsilon, clip, lr, fed)
    else:
        raise ValueError(f"method must be one of {', '.join(CENTRAL + FEDERATED)}; got {method!r}")
    train, test, social, tags = load_side(dataset)
    return {"method": method, "dataset": dataset, "data": data_sizes(train, test, social, tags),
            "seed": seed, "epochs": epochs, **body}  # fmt: skip


def summarize(folder: str | Path) -> str:
    """Markdown table (×100, mean ± sample std over seeds; seconds min–max) of the run JSONs in ``folder``."""
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for f in sorted(Path(folder).glob("*.json")):
        r = json.loads(f.read_text())
        groups.setdefault((r["dataset"], r["method"], r["epochs"]), []).append(r)
    lines = [
        "| dataset | method | epochs / rounds | seeds | recall@20 (%) | ndcg@20 (%) | s per run |",
        "|---|---|---|---|---|---|---|",
    ]
    for (ds, method, epochs), runs in sorted(groups.items()):
        cells = []
        for m in ("recall@20", "ndcg@20"):
            v = 100 * np.asarray([r["metrics"][m] for r in runs])
            cells.append(f"{v.mean():.2f} ± {v.std(ddof=1) if len(v) > 1 else 0.0:.2f}")
        secs = [r["seconds"] for r in runs]
        span = f"{min(secs):.0f}–{max(secs):.0f}"
        lines.append(f"| {ds} | {method} | {epochs} | {len(runs)} | {cells[0]} | {cells[1]} | {span} |")
    return "\n".join(lines) + "\n"
