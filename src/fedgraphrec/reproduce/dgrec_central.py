"""DGREC Table 2's side-information baselines on the DGREC split (``results/dgrec/README.md``).

``python -m fedgraphrec.reproduce.dgrec_central METHOD --dataset flixster --seed 0 --out
results/dgrec/central`` trains one method on exactly the train matrix of
:func:`~fedgraphrec.training.dgrec.load_side` and evaluates recall@20 / ndcg@20 on its test
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

import math
import time
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

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
from fedgraphrec.protocols.central import CentralSettings
from fedgraphrec.reproduce.dgrec_runs import metric_cells, run_groups, train_epochs
from fedgraphrec.seeding import torch_generator
from fedgraphrec.training.config import EvalSettings, TrainConfig
from fedgraphrec.training.dgrec import load_data
from fedgraphrec.training.learner_base import BatchStats
from fedgraphrec.training.sampler import BPRSampler
from fedgraphrec.training.trainer import fit_in_scratch

__all__ = [
    "CENTRAL",
    "FEDERATED",
    "SideGraphLearner",
    "build_central",
    "item_relations",
    "paper_values",
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


class SideGraphLearner:
    """A centralised reference (``lightgcn-side``, ``lightgcn``, ``hypergnn``) as an epoch-level learner.

    Adam on BPR minibatches of the seeded :class:`~fedgraphrec.training.sampler.BPRSampler` (every
    training pair once per epoch); the same interface as DGREC's learner, so one loop
    (:func:`~fedgraphrec.reproduce.dgrec_runs.train_epochs`, the Trainer) trains and evaluates both.
    """

    def __init__(
        self,
        model: LightGCNSide | HyperGNN,
        train: sp.csr_matrix,
        *,
        lr: float,
        reg: float,
        batch_size: int,
        seed: int,
    ) -> None:
        self.model, self.lr, self.reg, self.batch_size = model, lr, reg, batch_size
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.sampler = BPRSampler(train, seed, "interactions")

    @property
    def ledger(self) -> None:
        """Centralised training communicates nothing."""
        return None

    def train_round(self, epoch: int) -> BatchStats:
        """One epoch; the mean minibatch loss.

        Raises:
            FloatingPointError: the epoch's loss is not finite (names the epoch and ``lr``).
        """
        total = bpr = reg = 0.0
        n = 0
        for users, pos, neg in self.sampler.batches(epoch, self.batch_size):
            self.optimizer.zero_grad(set_to_none=True)
            out = self.model.batch_loss(users, pos, neg, self.reg)
            out.total.backward()
            self.optimizer.step()
            total, bpr, reg, n = total + out.total.item(), bpr + out.bpr.item(), reg + out.reg.item(), n + 1
        if not np.isfinite(total):
            raise FloatingPointError(f"non-finite loss in epoch {epoch + 1} (lr {self.lr})")
        return BatchStats(total / n, bpr / n, reg / n)

    @torch.no_grad()
    def score_users(self, users: torch.Tensor) -> torch.Tensor:
        """Full-catalogue scores ``U[users] Vᵀ`` of the propagated embeddings."""
        U, V = self.model.frozen_embeddings()
        return U[users] @ V.T

    def pop_deviation(self) -> None:
        """No oracle to compare with."""
        return None

    def state_dict(self) -> dict[str, Any]:
        """Model and optimizer state."""
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])

    def run_summary(self) -> dict[str, Any]:
        """Nothing beyond the metrics."""
        return {}


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
    data = load_data(dataset)
    train = data.interactions.train
    t0 = time.time()
    model, graph = build_central(method, train, data.social, data.tags, dim=dim, n_layers=n_layers, seed=seed)
    learner = SideGraphLearner(model, train, lr=lr, reg=reg, batch_size=batch, seed=seed)
    curve, metrics, _ = train_epochs(
        lambda cfg, _: learner,
        data.interactions,
        CentralSettings(),
        protocol="central",
        seed=seed,
        epochs=epochs,
    )
    epoch_seconds = np.diff([0.0] + [c["seconds"] for c in curve])
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
        "loss_curve": [c["loss"] for c in curve],
        "mean_epoch_seconds": float(np.mean(epoch_seconds)) if len(epoch_seconds) else 0.0,
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
    data = load_data(dataset).interactions
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
    result, _ = fit_in_scratch(cfg, data)
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


PAPER_FILE = Path(__file__).parent / "papers" / "dgrec.toml"
"""The DGREC paper's numbers and this project's budgets and tuned values (data, not code)."""


def paper_values(table: str) -> dict[str, Any]:
    """A table of :data:`PAPER_FILE` (``central``, ``federated``, ``lr``, ``budget``, ``table2``)."""
    return dict(tomllib.loads(PAPER_FILE.read_text())[table])


def run(method: str, dataset: str, seed: int, epochs: int | None = None, **given: Any) -> dict[str, Any]:
    """Train and evaluate one method; ``epochs`` are rounds for the federated ``fedgnn``/``fedrec``.

    ``given``: the method's settings (centralised: ``dim``, ``n_layers``, ``lr``, ``reg``,
    ``batch_size``; federated: ``epsilon``, ``clip``, ``lr``, ``clients_per_round``, ``local_steps``,
    ``n_negatives``); the others, and ``epochs``, come from :data:`PAPER_FILE`'s ``[central]`` or
    ``[federated]`` table (the federated ones are the project's FedPerGNN comparison setting,
    ``results/baselines``: every user once per round, one local step, 64 negatives, at the paper's
    δ = 0.1 and ε = 1).

    Raises:
        ValueError: an unknown method or setting, or a non-positive ``epochs``.
    """
    if method not in CENTRAL + FEDERATED:
        raise ValueError(f"method must be one of {', '.join(CENTRAL + FEDERATED)}; got {method!r}")
    central = paper_values("central")
    defaults = {**central, **paper_values("federated")} if method in FEDERATED else central
    if method in FEDERATED:
        defaults["lr"] = given.get("lr", central["lr"])
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ValueError(f"{method}: unknown setting(s) {unknown}; valid: {', '.join(sorted(defaults))}")
    v = {**defaults, **given}
    epochs = int(v.pop("epochs")) if epochs is None else epochs
    if epochs <= 0:
        raise ValueError(f"epochs must be positive, got {epochs}")
    torch.set_num_threads(1)
    if method in CENTRAL:
        body = _central(
            method, dataset, seed, epochs, v["dim"], v["n_layers"], v["lr"], v["reg"], v["batch_size"]
        )
    else:
        fed = {k: int(v[k]) for k in ("clients_per_round", "local_steps", "n_negatives")}
        body = _federated(method, dataset, seed, epochs, v["epsilon"], v["clip"], v["lr"], fed)
    return {"method": method, "dataset": dataset, "data": load_data(dataset).sizes(),
            "seed": seed, "epochs": epochs, **body}  # fmt: skip


def summarize(folder: str | Path) -> str:
    """Markdown table (×100, mean ± sample std over seeds; seconds min–max) of the run JSONs in ``folder``."""
    groups = run_groups(folder, lambda r: (r["dataset"], r["method"], r["epochs"]))
    lines = [
        "| dataset | method | epochs / rounds | seeds | recall@20 (%) | ndcg@20 (%) | s per run |",
        "|---|---|---|---|---|---|---|",
    ]
    for (ds, method, epochs), runs in sorted(groups.items()):
        recall, ndcg = metric_cells(runs)
        secs = [r["seconds"] for r in runs]
        span = f"{min(secs):.0f}–{max(secs):.0f}"
        lines.append(f"| {ds} | {method} | {epochs} | {len(runs)} | {recall} | {ndcg} | {span} |")
    return "\n".join(lines) + "\n"
