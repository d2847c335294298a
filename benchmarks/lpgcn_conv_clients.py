r"""LP-GCN Fig. 13: communication cost and neighbour-embedding utilisation vs. number of convolution-clients.

What is computed
----------------
For one dataset (``specs/lpgcn.md`` §8, §9.7; arXiv:2412.01141 §6.3.5):

1. the graph the server sees: real training interactions plus ``--alpha`` virtual items per client,
   drawn uniformly from :math:`\mathcal I \setminus \mathcal I_u` with
   ``numpy_rng(seed, "lpgcn", "virtual")`` (Algorithm 2, lines 8–11);
2. the greedy minimum cover :math:`\overline{\mathcal U}_0` (Algorithm 3), timed;
3. the Fig. 13 sweep (:func:`fedgraphrec.reproduce.lpgcn_fig13.fig13_sweep`): for every
   :math:`\rho` in ``--fractions`` add :math:`\mathrm{round}(\rho n)` random users to the
   candidates, assign convolution-items at random, and evaluate Eq. 30 (:math:`C`, bytes per client
   and iteration, forward neighbour-user embeddings of all :math:`L` layers), Eq. 32 (:math:`R`, mean
   of Eq. 31 ratios) and the authors' pooled :math:`R_\Sigma`, averaged over ``--seeds``.
   The x axis is :math:`k\% = |\tilde{\mathcal U}|/n`, candidates that received ≥ 1 convolution-item.

Which training graph (``--graph``):

* ``train`` — LightGCN's ``train.txt`` as released (default);
* ``train90`` — ``train.txt`` minus a uniformly random 10 % of its pairs, the validation carve-out
  of the authors' data loader ([R]; this is the graph of their Yelp2018 run);
* ``resplit`` — the paper's protocol (§9.2): ``train.txt`` + ``test.txt`` merged and re-split 80/10/10
  per user (``fedgraphrec.data.split_interactions``, ``--split-seed``); the 80 % part is the graph;
* ``resplit90`` — ``resplit`` minus a random 10 % (72 % of all interactions; the graph of the
  authors' Gowalla run, whose stored matrix holds 739,706 of the 1,027,370 pairs);
* ``--graph-npz PATH`` — any binary user×item matrix saved with ``scipy.sparse.save_npz`` (e.g. the
  authors' ``s_pre_R_mat.npz``), overriding ``--graph``.

Outputs ``fig13_<dataset>[_<graph>][_alpha<α>].csv`` and ``.png`` (x: k %; left y: C in KiB; right
y: R) in ``--out``, and prints the sweep and the minimum-cover row beside the paper's values.

Run from the repository root, e.g.::

    FEDGRAPHREC_DATA=/work/shared/datasets .venv/bin/python benchmarks/lpgcn_conv_clients.py \
        --dataset gowalla --layers 4 --out results/lpgcn
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from fedgraphrec.data.registry import load_dataset
from fedgraphrec.data.splits import split_interactions
from fedgraphrec.data.types import Interactions, binary_csr
from fedgraphrec.protocols.lpgcn.cover import greedy_set_cover
from fedgraphrec.reproduce.lpgcn_fig13 import fig13_sweep
from fedgraphrec.reproduce.papers import paper
from fedgraphrec.seeding import numpy_rng

# Paper, §6.3.5 / Fig. 13 (papers/lpgcn.toml): best L, minimum k % (lower end of the Fig. 13 range),
# upper end, C in "KB".
_F13 = paper("lpgcn").section("f13").section("datasets")
PAPER: dict[str, tuple[int, float, float, float]] = {
    ds: (
        _F13.section(ds).integer("layers"),
        _F13.section(ds).number("k_min"),
        _F13.section(ds).number("k_max"),
        _F13.section(ds).number("cost_kb"),
    )
    for ds in _F13.names()
}

COLUMNS = (
    "fraction",
    "k",
    "k_fraction",
    "convolution_fraction",
    "total_neighbours",
    "mean_neighbours",
    "items_per_candidate",
    "cost_bytes",
    "cost_kib",
    "cost_kb",
    "cost_kib_std",
    "R",
    "R_std",
    "R_pooled",
    "n_seeds",
)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def parse_fractions(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def parse_seeds(text: str) -> list[int]:
    """``"0..4"`` (inclusive range) or ``"0,1,2"``."""
    if ".." in text:
        lo, hi = text.split("..")
        return list(range(int(lo), int(hi) + 1))
    return [int(x) for x in text.split(",") if x.strip()]


def sample_virtual_items(real: sp.csr_matrix, alpha: int, rng: np.random.Generator) -> sp.csr_matrix:
    r"""Draw α virtual items per client, uniformly from the items it did not interact with.

    Vectorised: draw α ranks in :math:`[0, m - |\mathcal I_u|)` per client (rows with a repeated rank
    are redrawn), then map rank :math:`r` to the :math:`r`-th item outside :math:`\mathcal I_u`:
    :math:`x = r + |\{t : s_t - t \le r\}|` for the sorted real items :math:`s_0 < s_1 < \dots`
    (one global ``searchsorted`` over per-client offset keys).
    """
    real = sp.csr_matrix(real)
    real.sort_indices()
    n, m = real.shape
    if alpha == 0:
        return sp.csr_matrix((n, m), dtype=np.float32)
    degree = np.diff(real.indptr).astype(np.int64)
    free = m - degree
    if (free < alpha).any():
        raise ValueError(f"alpha={alpha} exceeds the {int(free.min())} non-interacted items of some client")
    ranks = np.floor(rng.random((n, alpha)) * free[:, None]).astype(np.int64)
    while True:
        ranks.sort(axis=1)
        bad = np.flatnonzero((np.diff(ranks, axis=1) == 0).any(axis=1))
        if bad.size == 0:
            break
        ranks[bad] = np.floor(rng.random((bad.size, alpha)) * free[bad, None]).astype(np.int64)
    users = np.repeat(np.arange(n, dtype=np.int64), degree)
    position = np.arange(real.nnz, dtype=np.int64) - real.indptr[users]
    stride = m + 1
    keys = real.indices.astype(np.int64) - position + users * stride
    query_users = np.repeat(np.arange(n, dtype=np.int64), alpha)
    query = ranks.ravel() + query_users * stride
    below = np.searchsorted(keys, query, side="right") - real.indptr[query_users]
    items = ranks.ravel() + below
    virtual = binary_csr(query_users, items, n, m)
    assert virtual.nnz == n * alpha and real.multiply(virtual).nnz == 0
    return virtual


def _drop_random_tenth(graph: sp.csr_matrix, seed: int) -> sp.csr_matrix:
    coo = graph.tocoo()
    keep = numpy_rng(seed, "lpgcn", "train90").random(coo.nnz) >= 0.1
    return binary_csr(coo.row[keep], coo.col[keep], graph.shape[0], graph.shape[1])


def training_graph(data: Interactions, graph: str, split_seed: int) -> sp.csr_matrix:
    if graph in ("train", "train90"):
        train = data.train
    elif graph in ("resplit", "resplit90"):
        both = (data.train + data.test).tocoo()
        train = split_interactions(
            both.row, both.col, data.n_users, data.n_items, name=data.name, seed=split_seed
        ).train
    else:
        raise ValueError(f"unknown graph {graph!r}; choose train, train90, resplit or resplit90")
    return _drop_random_tenth(train, split_seed) if graph.endswith("90") else train


def write_csv(rows: Sequence[dict[str, float]], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: f"{row[k]:.6g}" for k in COLUMNS})


def plot(rows: Sequence[dict[str, float]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [100 * r["convolution_fraction"] for r in rows]
    fig, ax_c = plt.subplots(figsize=(6, 4))
    ax_c.plot(x, [r["cost_kib"] for r in rows], "o-", color="tab:blue", label="C (KiB), Eq. 30")
    ax_c.set_xlabel("convolution-clients k (% of users)")
    ax_c.set_ylabel("C per client and iteration (KiB)", color="tab:blue")
    ax_r = ax_c.twinx()
    ax_r.plot(x, [r["R"] for r in rows], "s-", color="tab:red", label="R, Eq. 32")
    ax_r.plot(x, [r["R_pooled"] for r in rows], "s--", color="tab:red", alpha=0.5, label="R pooled [R]")
    ax_r.set_ylabel("utilisation R", color="tab:red")
    handles = ax_c.get_legend_handles_labels()[0] + ax_r.get_legend_handles_labels()[0]
    ax_c.legend(handles=handles, loc="center right")
    ax_c.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="gowalla", help="name for fedgraphrec.data.load_dataset")
    parser.add_argument("--data-dir", default=None, help="data root (default: $FEDGRAPHREC_DATA)")
    parser.add_argument(
        "--layers", type=int, default=None, help="L (default: the paper's best for the dataset)"
    )
    parser.add_argument("--dim", type=int, default=64, help="embedding dimension d (default: 64)")
    parser.add_argument("--alpha", type=int, default=0, help="virtual items per client (default: 0)")
    parser.add_argument(
        "--fractions",
        default="0,0.05,0.1,0.2,0.3,0.5,0.7,0.9",
        help="comma-separated ρ, share of users added to the minimum cover",
    )
    parser.add_argument("--seeds", default="0..2", help='"0..4" or "0,1,2" (default: 0..2)')
    parser.add_argument("--graph", choices=("train", "train90", "resplit", "resplit90"), default="train")
    parser.add_argument("--split-seed", type=int, default=0, help="seed of the re-split / 10 %% drop")
    parser.add_argument(
        "--graph-npz", type=Path, default=None, help="training graph from a .npz (overrides --graph)"
    )
    parser.add_argument("--out", type=Path, default=Path("results/lpgcn"), help="output folder")
    args = parser.parse_args(argv)

    paper = PAPER.get(args.dataset)
    layers = args.layers if args.layers is not None else (paper[0] if paper else None)
    if layers is None:
        parser.error(f"--layers is required for {args.dataset!r} (no paper default)")
    fractions, seeds = parse_fractions(args.fractions), parse_seeds(args.seeds)

    start = time.perf_counter()
    data = load_dataset(args.dataset, data_dir=args.data_dir)
    if not isinstance(data, Interactions):
        parser.error(f"{args.dataset!r} is a rating dataset; Fig. 13 needs implicit interactions")
    if args.graph_npz is not None:
        loaded = sp.load_npz(args.graph_npz)
        if loaded.shape != (data.n_users, data.n_items):
            parser.error(
                f"{args.graph_npz} has shape {loaded.shape}, expected {(data.n_users, data.n_items)}"
            )
        coo = loaded.tocoo()
        real = binary_csr(coo.row[coo.data != 0], coo.col[coo.data != 0], data.n_users, data.n_items)
        args.graph = "npz"
    else:
        real = training_graph(data, args.graph, args.split_seed)
    virtual = sample_virtual_items(real, args.alpha, numpy_rng(seeds[0], "lpgcn", "virtual"))
    holdings = (real + virtual).tocsr()
    log(
        f"{args.dataset} ({args.graph}): n={data.n_users} m={data.n_items} real edges={real.nnz} "
        f"virtual={virtual.nnz} (α={args.alpha}); loaded in {time.perf_counter() - start:.1f}s"
    )

    start = time.perf_counter()
    cover = greedy_set_cover(holdings)
    t_cover = time.perf_counter() - start
    csc = holdings.tocsc()
    n_sole = int(np.unique(csc.indices[csc.indptr[np.flatnonzero(np.diff(csc.indptr) == 1)]]).size)
    log(f"greedy cover: {cover.size} clients ({n_sole} mandatory sole holders) in {t_cover:.2f}s")

    start = time.perf_counter()
    rows = fig13_sweep(real, holdings, fractions, seeds, args.dim, layers)
    t_sweep = time.perf_counter() - start
    log(f"sweep: {len(fractions)} fractions × {len(seeds)} seeds in {t_sweep:.1f}s")

    suffix = ("" if args.graph == "train" else f"_{args.graph}") + (
        f"_alpha{args.alpha}" if args.alpha else ""
    )
    args.out.mkdir(parents=True, exist_ok=True)
    csv_path = args.out / f"fig13_{args.dataset}{suffix}.csv"
    png_path = args.out / f"fig13_{args.dataset}{suffix}.png"
    write_csv(rows, csv_path)
    plot(rows, png_path, f"{args.dataset}: L={layers}, d={args.dim}, α={args.alpha}, graph={args.graph}")

    print(f"# {args.dataset}  graph={args.graph}  L={layers}  d={args.dim}  α={args.alpha}  seeds={seeds}")
    print(f"{'rho':>5} {'k%':>7} {'cand%':>7} {'sum|N|':>10} {'C KiB':>8} {'C kB':>8} {'R':>7} {'R_pool':>7}")
    for r in rows:
        print(
            f"{r['fraction']:5.2f} {100 * r['convolution_fraction']:7.2f} {100 * r['k_fraction']:7.2f} "
            f"{r['total_neighbours']:10.0f} {r['cost_kib']:8.2f} {r['cost_kb']:8.2f} {r['R']:7.4f} "
            f"{r['R_pooled']:7.4f}"
        )
    base = min(rows, key=lambda r: r["fraction"])
    ours_k, top_k = 100 * base["convolution_fraction"], 100 * rows[-1]["convolution_fraction"]
    print(
        f"minimum cover (ρ={base['fraction']:g}): k = {ours_k:.2f} %  C = {base['cost_kib']:.2f} KiB "
        f"({base['cost_kb']:.2f} kB)  R = {base['R']:.4f}  R_pooled = {base['R_pooled']:.4f}"
    )
    if paper is not None:
        p_layers, p_k, p_top, p_cost = paper
        print(
            f"paper (L={p_layers}):          k = {p_k:.2f} %  C = {p_cost:.1f} KB   "
            f"Fig. 13 range [{p_k}, {p_top}] %"
        )
        print(
            f"deviation: k {100 * (ours_k / p_k - 1):+.1f} %, "
            f"C {100 * (base['cost_kib'] / p_cost - 1):+.1f} % (KiB) / "
            f"{100 * (base['cost_kb'] / p_cost - 1):+.1f} % (kB); "
            f"top of range {top_k:.2f} % vs {p_top} % (ρ={rows[-1]['fraction']:g})"
        )
    print(f"timing: cover {t_cover:.2f}s, sweep {t_sweep:.1f}s; wrote {csv_path} and {png_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
