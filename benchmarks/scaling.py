"""How cost grows with the population: epoch time, peak memory and per-client bytes vs users.

Runs centralized LightGCN, LP-GCN, GNN4FR and FedGRec (``--methods`` adds FedMF, FedNCF,
FedPerGNN, P-GCN) on seeded user samples of a LightGCN-format dataset (Gowalla by default: 10 %,
25 %, 50 %, 100 % of the users, each keeping all its own interactions; ``data.splits.sample_users``),
each (method, fraction) in a fresh process so its peak resident memory is its own. A run trains
``--batches`` minibatches (round protocols: ``--rounds`` rounds) through the same learner the
training loop uses (``training.make_learner``) and extrapolates to a full epoch (minibatch time ×
minibatches per epoch; a round protocol's "epoch" is one round); per-client bytes per epoch come
from the ledger the same way, without the set-up traffic. It then fits ``cost ∝ users^b`` (least
squares on log-log) per method and metric and writes ``scaling.json``, ``scaling.md`` and
``scaling.png``.

Examples::

    FEDGRAPHREC_DATA=../shared/datasets python benchmarks/scaling.py --out results/benchmarks/scaling
    python benchmarks/scaling.py --fractions 0.1 0.25 --methods central lpgcn --batches 5 --out /tmp/s

Set-up (keys, tokens, routing) is once per run and is reported apart, not in the epoch time.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

METHODS = {  # each on its protocol's own backbone (its settings' default model, e.g. fedncf: ncf)
    "central": {"protocol": "central"},
    "lpgcn": {"protocol": "lpgcn"},
    "gnn4fr": {"protocol": "gnn4fr"},
    "fedgrec": {"protocol": "fedgrec", "n_layers": 2},
    "fedmf": {"protocol": "fedmf"},
    "fedncf": {"protocol": "fedncf"},
    "fedpergnn": {"protocol": "fedpergnn"},
    "pgcn": {"protocol": "pgcn"},
}
DEFAULT_METHODS = ["central", "lpgcn", "gnn4fr", "fedgrec"]


def run_one(method: str, fraction: float, args: argparse.Namespace) -> dict[str, Any]:
    """One (method, fraction) in this process: returns the measurements (child side)."""
    from fedgraphrec.protocols.settings import MinibatchSettings
    from fedgraphrec.training.data import prepare_interactions
    from fedgraphrec.training.learners import make_learner
    from fedgraphrec.training.loading import load_config
    from fedgraphrec.training.sampler import BPRSampler

    spec = dict(METHODS[method])
    options = {"user_fraction": fraction, "sample_seed": 0} if fraction < 1 else {}
    sizes = [
        f"dim={args.dim}",
        f"n_layers={spec.pop('n_layers', args.layers)}",
        f"batch_size={args.batch_size}",
    ]
    cfg = load_config(
        None,
        [f"dataset_options.{k}={v}" for k, v in options.items()],
        shared=sizes,
        dataset=args.dataset,
        seed=0,
        crypto=args.crypto,
        **spec,
    )  # fmt: skip  (each size where the method's settings have it)
    data = prepare_interactions(cfg)
    t0 = time.perf_counter()
    learner = make_learner(cfg, data)
    setup_s = time.perf_counter() - t0
    ledger = learner.ledger
    setup_bytes = (  # set-up traffic (keys, tokens, enrolment) is once per run, not per epoch
        (ledger.client_sent + ledger.client_received).astype(np.float64) if ledger is not None else None
    )
    rounds = getattr(learner, "train_round", None)
    times: list[float] = []
    if rounds is not None:
        for r in range(args.rounds):
            t = time.perf_counter()
            rounds(r)
            times.append(time.perf_counter() - t)
        per_epoch_steps = 1
    else:
        sampler = BPRSampler(data.train, cfg.seed)
        batch_size = cfg.settings_as(MinibatchSettings).batch_size
        per_epoch_steps = sampler.n_batches(batch_size)
        for k, (users, pos, neg) in enumerate(sampler.batches(0, batch_size)):
            if k >= args.batches:
                break
            t = time.perf_counter()
            learner.train_batch(users, pos, neg)
            times.append(time.perf_counter() - t)
    steps = len(times)
    epoch_s = float(np.median(times)) * per_epoch_steps
    out: dict[str, Any] = {
        "method": method,
        "fraction": fraction,
        "users": int(data.n_users),
        "items": int(data.n_items),
        "interactions": int(data.n_train),
        "setup_seconds": setup_s,
        "steps_timed": steps,
        "steps_per_epoch": per_epoch_steps,
        "epoch_seconds": epoch_s,
        "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }
    if ledger is not None and setup_bytes is not None:
        per_client = (ledger.client_sent + ledger.client_received).astype(np.float64) - setup_bytes
        per_client *= per_epoch_steps / max(steps, 1)  # the timed steps' traffic, scaled to an epoch
        out["bytes_per_client_per_epoch"] = {
            "mean": float(per_client.mean()),
            "p50": float(np.percentile(per_client, 50)),
            "max": float(per_client.max()),
        }
    return out


def fit_exponent(xs: list[float], ys: list[float]) -> float | None:
    """``b`` of ``y ∝ x^b`` by least squares on logarithms (``None`` with fewer than two points)."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys, strict=True) if x > 0 and y > 0]
    if len(pts) < 2:
        return None
    lx, ly = np.array(pts).T
    return float(np.polyfit(lx, ly, 1)[0])


def report(rows: list[dict[str, Any]], out: Path) -> None:
    """``scaling.json``, ``scaling.md`` (table + exponents) and ``scaling.png`` in ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = {
        "epoch_seconds": lambda r: r["epoch_seconds"],
        "peak_rss_gib": lambda r: r["peak_rss_gib"],
        "bytes_per_client_per_epoch": lambda r: r.get("bytes_per_client_per_epoch", {}).get("mean", 0.0),
    }
    fits: dict[str, dict[str, dict[str, float | None]]] = {}
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    colours = {m: f"C{k}" for k, m in enumerate(METHODS)}  # one colour per method in every panel
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = sorted((r for r in rows if r["method"] == method), key=lambda r: r["users"])
        for ax, (name, get) in zip(axes, metrics.items(), strict=True):
            ys = [get(r) for r in mine]
            fits.setdefault(method, {})[name] = {
                "vs_users": fit_exponent([r["users"] for r in mine], ys),
                "vs_interactions": fit_exponent([r["interactions"] for r in mine], ys),
            }
            if any(y > 0 for y in ys):
                ax.loglog([r["users"] for r in mine], ys, "o-", label=method, color=colours[method])
    for ax, name in zip(axes, metrics, strict=True):
        ax.set_xlabel("users")
        ax.set_title(name.replace("_", " "))
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    fig.tight_layout()
    fig.savefig(out / "scaling.png", dpi=120)
    (out / "scaling.json").write_text(json.dumps({"runs": rows, "exponents": fits}, indent=2) + "\n")
    lines = [
        "| method | users | interactions | epoch (s) | peak RSS (GiB) | bytes / client / epoch (mean) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        b = r.get("bytes_per_client_per_epoch", {}).get("mean")
        lines.append(
            f"| {r['method']} | {r['users']:,} | {r['interactions']:,} | {r['epoch_seconds']:.2f} | "
            f"{r['peak_rss_gib']:.2f} | {'—' if b is None else f'{b / 2**20:.2f} MiB'} |"
        )
    lines += ["", "Fitted exponents b of cost ∝ users^b (and ∝ interactions^b):", ""]
    lines += ["| method | epoch time | peak memory | bytes per client |", "|---|---|---|---|"]
    for method, per in fits.items():
        cells = []
        for name in metrics:
            e = per[name]
            u, i = e["vs_users"], e["vs_interactions"]
            cells.append("—" if u is None else f"{u:.2f} ({i:.2f})")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    (out / "scaling.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="gowalla")
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.1, 0.25, 0.5, 1.0])
    ap.add_argument("--methods", nargs="+", default=DEFAULT_METHODS, choices=list(METHODS))
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=2048)
    ap.add_argument("--batches", type=int, default=10, help="minibatches timed per run")
    ap.add_argument("--rounds", type=int, default=3, help="FedGRec rounds timed per run")
    ap.add_argument("--crypto", choices=["accounted", "real"], default="accounted")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds before a run is abandoned")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--replot", action="store_true", help="redraw the report from OUT/scaling.json")
    ap.add_argument("--child", nargs=2, metavar=("METHOD", "FRACTION"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.replot:
        report(json.loads((args.out / "scaling.json").read_text())["runs"], args.out)
        return
    if args.child:
        print(json.dumps(run_one(args.child[0], float(args.child[1]), args)))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    passthrough = [
        "--dataset", args.dataset, "--layers", str(args.layers), "--dim", str(args.dim),
        "--batch-size", str(args.batch_size), "--batches", str(args.batches), "--rounds", str(args.rounds),
        "--crypto", args.crypto, "--out", str(args.out),
    ]  # fmt: skip
    for fraction in sorted(args.fractions):
        for method in args.methods:  # interleaved: every method at one size before the next size
            cmd = [sys.executable, __file__, *passthrough, "--child", method, str(fraction)]
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, check=True)
            except (subprocess.TimeoutExpired, subprocess.CalledProcessError) as exc:
                tail = getattr(exc, "stderr", "") or ""
                print(f"{method} at {fraction:.0%}: not measured ({type(exc).__name__}) {tail[-300:]}")
                continue
            row = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(
                f"{method:8s} {fraction:5.0%} users {row['users']:6d}  epoch {row['epoch_seconds']:8.2f} s  "
                f"peak {row['peak_rss_gib']:.2f} GiB"
            )
            report(rows, args.out)  # partial results survive an interrupted sweep
    report(rows, args.out)


if __name__ == "__main__":
    main()
