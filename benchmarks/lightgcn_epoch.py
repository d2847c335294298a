r"""One training epoch of our centralized LightGCN against a plain-autograd LightGCN-PyTorch-style reference.

What is measured
----------------
Wall-clock seconds of one BPR training epoch (every minibatch: forward propagation over the whole
graph, loss, backward, Adam step, ``loss.item()``) on the CPU, in one process, for two implementations
of the same model:

* **ours** — :class:`fedgraphrec.models.lightgcn.LightGCN` with ``model.batch_loss``: the bipartite
  :math:`\hat R` / :math:`\hat R^\top` pair as 32-bit-index CSR tensors and a fused custom backward
  (:mod:`fedgraphrec.models.propagation`).
* **reference** — written here in the style of the widely used LightGCN-PyTorch code
  (gusye1234/LightGCN-PyTorch): the :math:`(n+m)\times(n+m)` symmetric normalised adjacency
  :math:`D^{-1/2} A D^{-1/2}` as one coalesced float32 ``torch.sparse_coo_tensor``; ``computer()``
  concatenates the user and item tables, applies ``torch.sparse.mm`` :math:`L` times, stacks and
  averages the :math:`L+1` layers and splits; the loss is
  ``mean(softplus(neg - pos)) + weight_decay * 0.5 * (‖u⁰‖² + ‖p⁰‖² + ‖n⁰‖²) / batch``;
  plain autograd does the backward.

Both see the same data, the same initial tables (drawn once from N(0, σ²) and copied into both),
the same triples in the same order (``BPRSampler(train, seed, "users")``, LightGCN's user-uniform
scheme) and the same hyper-parameters; both use ``torch.optim.Adam`` with default settings and
PyTorch's default thread count.

How
---
1. Correctness check (also the warm-up): from the same tables, both train on the first
   ``--check-batches`` batches; the losses must agree to ``--loss-rtol`` (relative) and the tables
   after each Adam step to ``--param-atol`` (max absolute difference, printed).
2. Both are re-initialised from the same tables and timed on the epoch's batches, interleaved in
   blocks (``--block`` batches of one, then the same batches of the other, the first side
   alternating from block to block) so that machine noise hits both alike. ``--batches N`` times
   only the first N batches and extrapolates the epoch total (the report says so).
3. The trained *ours* model's ``frozen_embeddings()`` are evaluated with the full-ranking
   :func:`fedgraphrec.evaluation.ranking.evaluate_embeddings` (all users with test items, training
   items masked, K=20) and timed.

Run from the repository root, e.g.::

    .venv/bin/python benchmarks/lightgcn_epoch.py                 # full Gowalla epoch (~15-20 min)
    .venv/bin/python benchmarks/lightgcn_epoch.py --batches 40    # quick, extrapolated
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from torch import nn

from fedgraphrec.evaluation.ranking import evaluate_embeddings
from fedgraphrec.models.lightgcn import LightGCN
from fedgraphrec.models.propagation import NormalizedBipartite

if TYPE_CHECKING:
    from fedgraphrec.training.sampler import BPRSampler

Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


# --------------------------------------------------------------------------------------------------
# data


@dataclass(frozen=True)
class Data:
    """Binary train/test matrices of a LightGCN-format dataset."""

    train: sp.csr_matrix
    test: sp.csr_matrix

    @property
    def n_users(self) -> int:
        """Number of users (rows)."""
        return int(self.train.shape[0])

    @property
    def n_items(self) -> int:
        """Number of items (columns)."""
        return int(self.train.shape[1])


def _read_lightgcn_pairs(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``(users, items)`` int64 arrays from a LightGCN-format file (each line: ``user item item ...``)."""
    users: list[np.ndarray] = []
    items: list[np.ndarray] = []
    with path.open() as fh:
        for line in fh:
            ids = np.array(line.split(), dtype=np.int64)
            if ids.size > 1:
                users.append(np.full(ids.size - 1, ids[0], dtype=np.int64))
                items.append(ids[1:])
    if not users:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    return np.concatenate(users), np.concatenate(items)


def load_lightgcn_dir(directory: Path) -> Data:
    """Parse ``train.txt``/``test.txt`` of a LightGCN-format dataset into binary CSR matrices."""
    tu, ti = _read_lightgcn_pairs(directory / "train.txt")
    su, si = _read_lightgcn_pairs(directory / "test.txt")
    n_users = int(max(tu.max(initial=-1), su.max(initial=-1))) + 1
    n_items = int(max(ti.max(initial=-1), si.max(initial=-1))) + 1

    def binary(u: np.ndarray, i: np.ndarray) -> sp.csr_matrix:
        m = sp.csr_matrix((np.ones(len(u)), (u, i)), shape=(n_users, n_items))
        m.sum_duplicates()
        m.data[:] = 1.0
        m.sort_indices()
        return m

    return Data(train=binary(tu, ti), test=binary(su, si))


def load_sampler_class() -> tuple[type[BPRSampler], str]:
    """``BPRSampler`` and where it came from.

    The package ``fedgraphrec.training`` imports the training loop and the data layer; while those
    are being edited its ``__init__`` may fail, so fall back to loading ``sampler.py`` by file (it
    depends only on ``fedgraphrec.seeding``).
    """
    try:
        from fedgraphrec.training.sampler import BPRSampler
    except Exception as exc:
        import fedgraphrec

        path = Path(fedgraphrec.__file__).parent / "training" / "sampler.py"
        name = "_fedgraphrec_bench_sampler"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        origin = f"{path} (loaded by file: package import failed with {type(exc).__name__}: {exc})"
        return module.BPRSampler, origin
    return BPRSampler, "fedgraphrec.training.sampler"


# --------------------------------------------------------------------------------------------------
# the two implementations


def reference_adjacency(train: sp.csr_matrix) -> torch.Tensor:
    r"""The :math:`(n+m)^2` matrix :math:`D^{-1/2} A D^{-1/2}` as a coalesced float32 COO tensor.

    :math:`A = \begin{pmatrix} 0 & R \\ R^\top & 0 \end{pmatrix}`; zero-degree rows get a zero
    factor. Computed in float64 and cast once, so value rounding matches ours.
    """
    n_users, n_items = train.shape
    R = sp.csr_matrix(train, dtype=np.float64)
    adj = sp.bmat([[None, R], [R.T, None]], format="csr")
    deg = np.asarray(adj.sum(axis=1)).ravel()
    with np.errstate(divide="ignore"):
        d_inv_sqrt = np.power(deg, -0.5)
    d_inv_sqrt[np.isinf(d_inv_sqrt)] = 0.0
    D = sp.diags(d_inv_sqrt)
    norm = (D @ adj @ D).tocoo()
    index = torch.from_numpy(np.vstack([norm.row, norm.col]).astype(np.int64))
    values = torch.from_numpy(norm.data).to(torch.float32)
    size = (n_users + n_items, n_users + n_items)
    return torch.sparse_coo_tensor(index, values, size, check_invariants=True).coalesce()


class ReferenceLightGCN(nn.Module):
    """LightGCN as the LightGCN-PyTorch code structures it: one big adjacency, plain autograd."""

    def __init__(self, graph: torch.Tensor, n_users: int, n_items: int, dim: int, n_layers: int) -> None:
        super().__init__()
        self.num_users = n_users
        self.num_items = n_items
        self.n_layers = n_layers
        self.Graph = graph
        self.embedding_user = nn.Embedding(n_users, dim)
        self.embedding_item = nn.Embedding(n_items, dim)

    def computer(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer-mean embeddings of all users and items."""
        all_emb = torch.cat([self.embedding_user.weight, self.embedding_item.weight])
        embs = [all_emb]
        for _ in range(self.n_layers):
            all_emb = torch.sparse.mm(self.Graph, all_emb)
            embs.append(all_emb)
        light_out = torch.stack(embs, dim=1).mean(dim=1)
        users, items = torch.split(light_out, [self.num_users, self.num_items])
        return users, items

    def bpr_loss(
        self, users: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mean softplus(neg - pos), 0.5 * layer-0 squared norms / batch)``."""
        all_users, all_items = self.computer()
        u, p, n = all_users[users], all_items[pos], all_items[neg]
        u0, p0, n0 = self.embedding_user(users), self.embedding_item(pos), self.embedding_item(neg)
        reg = 0.5 * (u0.norm(2).pow(2) + p0.norm(2).pow(2) + n0.norm(2).pow(2)) / float(len(users))
        pos_scores = torch.mul(u, p).sum(dim=1)
        neg_scores = torch.mul(u, n).sum(dim=1)
        loss = torch.mean(F.softplus(neg_scores - pos_scores))
        return loss, reg


class Runner:
    """One implementation behind a common interface: reset to given tables, take a training step."""

    name: str
    module: nn.Module
    optimizer: torch.optim.Optimizer
    lr: float

    def tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The layer-0 user and item parameters."""
        raise NotImplementedError

    def reset(self, user0: torch.Tensor, item0: torch.Tensor) -> None:
        """Copy the initial tables in and start a fresh Adam."""
        U, V = self.tables()
        with torch.no_grad():
            U.copy_(user0)
            V.copy_(item0)
        self.optimizer = torch.optim.Adam(self.module.parameters(), lr=self.lr)

    def loss(self, batch: Batch) -> torch.Tensor:
        """The total minibatch loss (differentiable)."""
        raise NotImplementedError

    def step(self, batch: Batch) -> float:
        """One training step on ``batch``; returns the loss before the step."""
        total = self.loss(batch)
        self.optimizer.zero_grad()
        total.backward()
        self.optimizer.step()
        return float(total.item())

    @torch.no_grad()
    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Final (layer-combined) embeddings, without autograd."""
        raise NotImplementedError


class OursRunner(Runner):
    """:class:`fedgraphrec.models.lightgcn.LightGCN` trained with ``batch_loss``."""

    def __init__(self, model: LightGCN, lr: float, weight_decay: float) -> None:
        self.name = "ours"
        self.model = model
        self.module = model
        self.lr = lr
        self.weight_decay = weight_decay
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The layer-0 user and item parameters."""
        return self.model.user_emb, self.model.item_emb

    def loss(self, batch: Batch) -> torch.Tensor:
        """``batch_loss(...).total`` with ``reg_weight = weight_decay``."""
        return self.model.batch_loss(*batch, reg_weight=self.weight_decay).total

    @torch.no_grad()
    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``model.frozen_embeddings()``."""
        return self.model.frozen_embeddings()


class ReferenceRunner(Runner):
    """:class:`ReferenceLightGCN` trained LightGCN-PyTorch's way (``loss + weight_decay * reg``)."""

    def __init__(self, model: ReferenceLightGCN, lr: float, weight_decay: float) -> None:
        self.name = "reference"
        self.model = model
        self.module = model
        self.lr = lr
        self.weight_decay = weight_decay
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The layer-0 user and item parameters."""
        return self.model.embedding_user.weight, self.model.embedding_item.weight

    def loss(self, batch: Batch) -> torch.Tensor:
        """``loss + weight_decay * reg``, as LightGCN-PyTorch's ``BPRLoss.stagewise``."""
        loss, reg = self.model.bpr_loss(*batch)
        return loss + self.weight_decay * reg

    @torch.no_grad()
    def embeddings(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``model.computer()``."""
        return self.model.computer()


@torch.no_grad()
def max_abs_diff(a: Runner, b: Runner) -> float:
    """Largest absolute difference between the two runners' layer-0 tables."""
    return max(float((x - y).abs().max()) for x, y in zip(a.tables(), b.tables(), strict=True))


# --------------------------------------------------------------------------------------------------
# phases


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def correctness_check(
    ours: Runner, ref: Runner, batches: Sequence[Batch], loss_rtol: float, param_atol: float
) -> dict[str, Any]:
    """Train both on ``batches`` from the tables they hold; compare losses and tables step by step."""
    Uo, Vo = ours.embeddings()
    Ur, Vr = ref.embeddings()
    emb_diff = max(float((Uo - Ur).abs().max()), float((Vo - Vr).abs().max()))
    steps: list[dict[str, float]] = []
    print(f"correctness check on the first {len(batches)} batches (same initial tables):")
    print(f"  propagated embeddings before training: max |ours - reference| = {emb_diff:.3e}")
    for k, batch in enumerate(batches):
        lo, lr_ = ours.step(batch), ref.step(batch)
        rel = abs(lo - lr_) / max(abs(lr_), 1e-30)
        diff = max_abs_diff(ours, ref)
        steps.append(
            {"batch": k, "loss_ours": lo, "loss_reference": lr_, "loss_rel_diff": rel, "param_diff": diff}
        )
        print(
            f"  batch {k}: loss ours {lo:.9f}  reference {lr_:.9f}  rel diff {rel:.2e}   "
            f"after Adam step: max |Δ table| = {diff:.3e}"
        )
    worst_rel = max(s["loss_rel_diff"] for s in steps)
    worst_param = max(s["param_diff"] for s in steps)
    ok = worst_rel <= loss_rtol and worst_param <= param_atol
    print(
        f"  => {'PASS' if ok else 'FAIL'}: worst loss rel diff {worst_rel:.2e} (tol {loss_rtol:g}), "
        f"worst table max abs diff {worst_param:.3e} (tol {param_atol:g})"
    )
    if worst_rel > loss_rtol:
        raise AssertionError(f"losses differ by {worst_rel:.3e} relative (> {loss_rtol:g})")
    if worst_param > param_atol:
        raise AssertionError(f"tables differ by {worst_param:.3e} after Adam steps (> {param_atol:g})")
    return {
        "embedding_diff_before": emb_diff,
        "steps": steps,
        "worst_loss_rel_diff": worst_rel,
        "worst_param_diff": worst_param,
        "passed": ok,
    }


def interleaved_timing(
    runners: tuple[Runner, Runner], batches: Sequence[Batch], block: int
) -> dict[str, list[float]]:
    """Per-batch seconds of each runner, alternating blocks of ``block`` batches between them."""
    times: dict[str, list[float]] = {r.name: [] for r in runners}
    losses: dict[str, list[float]] = {r.name: [] for r in runners}
    n_blocks = -(-len(batches) // block)
    for j, start in enumerate(range(0, len(batches), block)):
        chunk = batches[start : start + block]
        order = runners if j % 2 == 0 else runners[::-1]
        spent: dict[str, float] = {}
        for runner in order:
            t_block = 0.0
            for batch in chunk:
                t0 = time.perf_counter()
                loss = runner.step(batch)
                dt = time.perf_counter() - t0
                times[runner.name].append(dt)
                losses[runner.name].append(loss)
                t_block += dt
            spent[runner.name] = t_block
        print(
            f"  block {j + 1:>3}/{n_blocks}: batches {start}-{start + len(chunk) - 1} "
            + "  ".join(f"{name} {spent[name]:7.2f} s" for name in times),
            flush=True,
        )
    return {**{f"{k}_s": v for k, v in times.items()}, **{f"{k}_loss": v for k, v in losses.items()}}


def summarize(times: list[float], n_epoch_batches: int) -> dict[str, float]:
    measured = float(sum(times))
    return {
        "batches_timed": len(times),
        "measured_s": measured,
        "epoch_s": measured / len(times) * n_epoch_batches,
        "median_batch_s": statistics.median(times),
        "mean_batch_s": statistics.fmean(times),
        "min_batch_s": min(times),
        "max_batch_s": max(times),
    }


# --------------------------------------------------------------------------------------------------
# main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    default_dir = Path(os.environ.get("FEDGRAPHREC_DATA", "/work/shared/datasets")) / "gowalla"
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument(
        "--dataset-dir", type=Path, default=default_dir, help=f"LightGCN-format dir ({default_dir})"
    )
    p.add_argument("--layers", type=int, default=3, help="propagation layers L (3)")
    p.add_argument("--dim", type=int, default=64, help="embedding size d (64)")
    p.add_argument("--batch-size", type=int, default=2048, help="BPR minibatch size (2048)")
    p.add_argument("--lr", type=float, default=0.001, help="Adam learning rate (0.001)")
    p.add_argument("--weight-decay", type=float, default=1e-4, help="layer-0 L2 weight λ (1e-4)")
    p.add_argument("--init-std", type=float, default=0.1, help="σ of the N(0, σ²) initial tables (0.1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the initial tables and the sampler (0)")
    p.add_argument("--epoch", type=int, default=0, help="sampler epoch index whose batches are used (0)")
    p.add_argument("--batches", type=int, default=None, help="time only the first N batches, extrapolate")
    p.add_argument("--block", type=int, default=20, help="batches per interleaving block (20)")
    p.add_argument("--check-batches", type=int, default=3, help="batches of the correctness check (3)")
    p.add_argument("--loss-rtol", type=float, default=1e-6, help="check: loss relative tolerance (1e-6)")
    p.add_argument("--param-atol", type=float, default=1e-5, help="check: table max abs tolerance (1e-5)")
    p.add_argument("--eval-k", type=int, default=20, help="K of the timed full-ranking evaluation (20)")
    p.add_argument("--no-eval", action="store_true", help="skip the evaluation timing")
    p.add_argument("--json", type=Path, default=None, help="also write the results as JSON here")
    args = p.parse_args(argv)
    for name in ("layers", "dim", "batch_size", "block"):
        if getattr(args, name) < (0 if name == "layers" else 1):
            p.error(f"--{name.replace('_', '-')} is out of range")
    if args.batches is not None and args.batches < 1:
        p.error("--batches must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    print(
        f"LightGCN epoch benchmark — torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs"
    )

    data, t_load = timed(lambda: load_lightgcn_dir(args.dataset_dir))
    print(
        f"data: {args.dataset_dir} ({t_load:.1f} s): {data.n_users:,} users, {data.n_items:,} items, "
        f"{data.train.nnz:,} train / {data.test.nnz:,} test interactions"
    )

    sampler_cls, sampler_origin = load_sampler_class()
    sampler = sampler_cls(data.train, args.seed, "users")
    batches, t_sample = timed(lambda: list(sampler.batches(args.epoch, args.batch_size)))
    n_epoch = len(batches)
    n_timed = n_epoch if args.batches is None else min(args.batches, n_epoch)
    print(
        f"config: L={args.layers} d={args.dim} batch={args.batch_size} lr={args.lr:g} "
        f"weight_decay={args.weight_decay:g} init N(0, {args.init_std:g}²) seed={args.seed}"
    )
    print(
        f"sampler: BPRSampler(train, seed={args.seed}, 'users'), epoch {args.epoch}: "
        f"{sampler.n_train:,} triples, {n_epoch} batches (sampled in {t_sample:.2f} s, not timed)\n"
        f"  from {sampler_origin}"
    )

    graph, t_graph_ours = timed(lambda: NormalizedBipartite.from_train(data.train, torch.float32))
    adj, t_graph_ref = timed(lambda: reference_adjacency(data.train))
    print(
        f"graph build: ours {t_graph_ours:.2f} s (R̂ and R̂ᵀ CSR, {graph.csr.nnz:,} nnz each); "
        f"reference {t_graph_ref:.2f} s (COO {adj.shape[0]:,}², {adj._nnz():,} nnz)"
    )

    gen = torch.Generator().manual_seed(args.seed)
    user0 = (torch.randn(data.n_users, args.dim, generator=gen, dtype=torch.float64) * args.init_std).float()
    item0 = (torch.randn(data.n_items, args.dim, generator=gen, dtype=torch.float64) * args.init_std).float()

    ours = OursRunner(
        LightGCN(graph, dim=args.dim, n_layers=args.layers, init_std=args.init_std, dtype=torch.float32),
        args.lr,
        args.weight_decay,
    )
    ref = ReferenceRunner(
        ReferenceLightGCN(adj, data.n_users, data.n_items, args.dim, args.layers), args.lr, args.weight_decay
    )
    for r in (ours, ref):
        r.reset(user0, item0)

    check = correctness_check(ours, ref, batches[: args.check_batches], args.loss_rtol, args.param_atol)

    for r in (ours, ref):
        r.reset(user0, item0)
    gc.collect()
    extrap = n_timed < n_epoch
    print(
        f"timing: {n_timed} of {n_epoch} batches, interleaved in blocks of {args.block} "
        f"(first side alternating), both re-initialised from the same tables"
        + (f"; epoch totals EXTRAPOLATED ×{n_epoch}/{n_timed}" if extrap else "")
    )
    raw, t_wall = timed(lambda: interleaved_timing((ours, ref), batches[:n_timed], args.block))
    s_ours = summarize(raw["ours_s"], n_epoch)
    s_ref = summarize(raw["reference_s"], n_epoch)
    drift = max_abs_diff(ours, ref)
    ratio_total = s_ref["epoch_s"] / s_ours["epoch_s"]
    ratio_median = s_ref["median_batch_s"] / s_ours["median_batch_s"]
    loss_gap = max(abs(a - b) / abs(b) for a, b in zip(raw["ours_loss"], raw["reference_loss"], strict=True))

    result: dict[str, Any] = {
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "environment": {
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
        },
        "data": {
            "n_users": data.n_users,
            "n_items": data.n_items,
            "n_train": int(data.train.nnz),
            "n_test": int(data.test.nnz),
        },
        "epoch_batches": n_epoch,
        "timed_batches": n_timed,
        "extrapolated": extrap,
        "graph_build_s": {"ours": t_graph_ours, "reference": t_graph_ref},
        "check": check,
        "timing": {"ours": s_ours, "reference": s_ref, "wall_s": t_wall},
        "ratio_reference_over_ours": {"total": ratio_total, "median": ratio_median},
        "after_timing": {"max_table_diff": drift, "max_loss_rel_diff": loss_gap},
        "per_batch_s": {"ours": raw["ours_s"], "reference": raw["reference_s"]},
    }

    if not args.no_eval:
        (U, V), t_prop = timed(ours.embeddings)
        res, t_eval = timed(
            lambda: evaluate_embeddings(U, V, data.test, exclude=[data.train], ks=(args.eval_k,))
        )
        result["eval"] = {
            "frozen_embeddings_s": t_prop,
            "ranking_s": t_eval,
            "users_evaluated": res.n_users_evaluated,
            "k": args.eval_k,
            "metrics": res.metrics,
        }

    print_report(result)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n")
        print(f"JSON written to {args.json}")
    return 0


def print_report(r: dict[str, Any]) -> None:
    n_epoch, n_timed = r["epoch_batches"], r["timed_batches"]
    ex = " (extrapolated)" if r["extrapolated"] else ""
    print()
    print("=" * 88)
    print(
        f"RESULT  one epoch = {n_epoch} batches of {r['config']['batch_size']}; timed {n_timed}"
        + (f", totals extrapolated ×{n_epoch}/{n_timed}" if r["extrapolated"] else " (full epoch)")
    )
    print(f"{'':12}{'epoch s' + ex:>26}{'measured s':>12}{'median/batch':>14}{'mean':>9}{'min':>9}{'max':>9}")
    for name in ("ours", "reference"):
        s = r["timing"][name]
        print(
            f"{name:12}{s['epoch_s']:>26.2f}{s['measured_s']:>12.2f}{s['median_batch_s']:>14.4f}"
            f"{s['mean_batch_s']:>9.4f}{s['min_batch_s']:>9.4f}{s['max_batch_s']:>9.4f}"
        )
    q = r["ratio_reference_over_ours"]
    print(f"ratio reference/ours: total {q['total']:.2f}x, per-batch median {q['median']:.2f}x")
    c = r["check"]
    print(
        f"check ({len(c['steps'])} batches): worst loss rel diff {c['worst_loss_rel_diff']:.2e}, "
        f"worst table diff {c['worst_param_diff']:.3e} -> {'PASS' if c['passed'] else 'FAIL'}; after timing: "
        f"table max abs diff {r['after_timing']['max_table_diff']:.3e}, "
        f"loss rel diff max {r['after_timing']['max_loss_rel_diff']:.2e}"
    )
    if "eval" in r:
        e = r["eval"]
        k = e["k"]
        print(
            f"eval (ours after the timed batches): frozen_embeddings {e['frozen_embeddings_s']:.2f} s, "
            f"full ranking @K={k} {e['ranking_s']:.2f} s for {e['users_evaluated']:,} users "
            f"(recall@{k} {e['metrics'][f'recall@{k}']:.4f}, ndcg@{k} {e['metrics'][f'ndcg@{k}']:.4f})"
        )
    print("=" * 88)


if __name__ == "__main__":
    raise SystemExit(main())
