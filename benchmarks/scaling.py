"""How cost grows with the population: per-client bytes, epoch time and peak memory vs users.

Runs centralized LightGCN, LP-GCN, GNN4FR and FedGRec by default; ``--methods`` takes every
horizontal protocol of the registry (``fedgrec``, ``federank``, ``fcf``, ``fedmf``, ``fedncf``,
``fedpergnn``, ``pgcn``) and ``p4gcn``. The horizontal ones run on seeded user samples of a
LightGCN-format dataset (Gowalla by default, each user keeping all its interactions;
``data.splits.sample_users``); P4GCN on user samples of ``--rating-dataset`` (Epinions by default;
``scaling_model.sample_rating_users``), in bytes per organisation. Each (method, fraction) runs in
a fresh process so its peak resident memory is its own. A run trains ``--batches`` minibatches
(round protocols: ``--rounds`` rounds; P4GCN: iterations) through the learner the training loop
uses and extrapolates to an epoch (mean step × steps per epoch; a round protocol's "epoch" is one
round); bytes come from the ledger the same way, without the set-up traffic, with every phase kept.
The report (``scaling_report.py``) fits ``bytes ∝ users^b`` on the samples, sets each protocol's
formula (``scaling_model.FORMULAS``) beside it, extrapolates to the full dataset and shows a
measured full-size run beside the fit; ``--whole-epochs`` adds whole epochs as a check of the
extrapolation and ``--neighbours`` writes GNN4FR's neighbour counts. Bytes are counts (the machine's
load does not change them); each run records the load average its times were measured under.

Examples (the committed sweep's commands are in ``results/benchmarks/README.md``)::

    FEDGRAPHREC_DATA=../shared/datasets python benchmarks/scaling.py --out results/benchmarks/scaling
    python benchmarks/scaling.py --fractions 0.1 0.25 --methods central lpgcn --batches 5 --out /tmp/s

Set-up (keys, tokens, routing) is once per run and is reported apart, not in the epoch time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the helper module beside this file
from scaling_model import epoch_total, neighbour_counts, organisation_bytes, sample_rating_users
from scaling_report import report

METHODS: dict[
    str, dict[str, Any]
] = {  # each on its protocol's own backbone (its settings' default model, e.g. fedncf: ncf)
    "central": {"protocol": "central"},
    "lpgcn": {"protocol": "lpgcn"},
    "gnn4fr": {"protocol": "gnn4fr"},
    "fedgrec": {"protocol": "fedgrec", "n_layers": 2},
    "federank": {"protocol": "federank"},
    "fcf": {"protocol": "fcf"},
    "fedmf": {"protocol": "fedmf"},
    "fedncf": {"protocol": "fedncf"},
    "fedpergnn": {"protocol": "fedpergnn"},
    "pgcn": {"protocol": "pgcn"},
    "p4gcn": {"protocol": "p4gcn"},  # on --rating-dataset; bytes per organisation
}
DEFAULT_METHODS = ["central", "lpgcn", "gnn4fr", "fedgrec"]


def _phases(ledger: Any) -> dict[str, int]:
    """Bytes booked so far per ledger phase (all roles)."""
    out: dict[str, int] = {}
    for r in ledger.rows():
        out[r.phase] = out.get(r.phase, 0) + int(r.payload_bytes)
    return out


def run_p4gcn(fraction: float, args: argparse.Namespace) -> dict[str, Any]:
    """P4GCN on a user sample of ``--rating-dataset``: per-organisation bytes and time per epoch."""
    from fedgraphrec.data.registry import load_dataset
    from fedgraphrec.protocols.p4gcn.roles import ORGANISATIONS
    from fedgraphrec.protocols.p4gcn.settings import P4GCNSettings
    from fedgraphrec.training.p4gcn_learner import P4GCNLearner

    full = load_dataset(args.rating_dataset)
    data = sample_rating_users(full, fraction, seed=0)
    settings = P4GCNSettings(method="p4gcn", dim=args.dim, epochs=1)
    t0 = time.perf_counter()
    learner = P4GCNLearner(settings, data, seed=0, crypto=args.crypto)
    setup_s = time.perf_counter() - t0
    ledger = learner.ledger
    times: list[float] = []
    per_org: list[dict[str, int]] = []
    before_phases = _phases(ledger)
    for _ in range(min(args.batches, learner.run.n_batches_per_epoch)):
        before = organisation_bytes(ledger.rows(), ORGANISATIONS)
        t = time.perf_counter()
        learner.run.step()
        times.append(time.perf_counter() - t)
        after = organisation_bytes(ledger.rows(), ORGANISATIONS)
        per_org.append({o: after[o] - before[o] for o in ORGANISATIONS})
    steps = learner.run.n_batches_per_epoch
    phases = {k: v - before_phases.get(k, 0) for k, v in _phases(ledger).items()}
    return {
        "method": "p4gcn",
        "dataset": args.rating_dataset,
        "fraction": fraction,
        "users": int(data.n_users),
        "full_users": int(np.count_nonzero(np.bincount(full.train.users))),  # users with a training rating
        "items": int(data.n_items),
        "interactions": len(data.train),
        "setup_seconds": setup_s,
        "steps_timed": len(times),
        "steps_per_epoch": steps,
        "epoch_seconds": float(np.median(times)) * steps,
        "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "load_avg_1min": os.getloadavg()[0],
        "bytes_per_step_total": [float(sum(b.values())) for b in per_org],
        "bytes_by_phase_per_epoch": {k: v * steps / max(len(times), 1) for k, v in phases.items() if v > 0},
        "bytes_per_client_per_epoch": {  # a "client" here is an organisation
            org: epoch_total([b[org] for b in per_org], steps) for org in ORGANISATIONS
        }
        | {"mean": float(np.mean([epoch_total([b[o] for b in per_org], steps) for o in ORGANISATIONS]))},
    }


def run_one(method: str, fraction: float, args: argparse.Namespace) -> dict[str, Any]:
    """One (method, fraction) in this process: returns the measurements (child side)."""
    if method == "p4gcn":
        return run_p4gcn(fraction, args)
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
    setup_phases = _phases(ledger) if ledger is not None else {}
    rounds = getattr(learner, "train_round", None)
    times: list[float] = []
    step_bytes: list[float] = []  # each timed step's bytes, summed over every client

    def traffic() -> float:
        return float((ledger.client_sent + ledger.client_received).sum()) if ledger is not None else 0.0

    if rounds is not None:
        for r in range(args.rounds):
            t, b = time.perf_counter(), traffic()
            rounds(r)
            times.append(time.perf_counter() - t)
            step_bytes.append(traffic() - b)
        per_epoch_steps = 1
    else:
        sampler = BPRSampler(data.train, cfg.seed)
        batch_size = cfg.settings_as(MinibatchSettings).batch_size
        per_epoch_steps = sampler.n_batches(batch_size)
        for k, (users, pos, neg) in enumerate(sampler.batches(0, batch_size)):
            if k >= args.batches:
                break
            t, b = time.perf_counter(), traffic()
            learner.train_batch(users, pos, neg)
            times.append(time.perf_counter() - t)
            step_bytes.append(traffic() - b)
    steps = len(times)
    epoch_s = float(np.median(times)) * per_epoch_steps
    out: dict[str, Any] = {
        "method": method,
        "dataset": args.dataset,
        "fraction": fraction,
        "users": int(data.n_users),
        "full_users": int(dict(data.info.get("user_sample", {})).get("of_users", data.n_users)),  # type: ignore[call-overload]
        "items": int(data.n_items),
        "interactions": int(data.n_train),
        "setup_seconds": setup_s,
        "steps_timed": steps,
        "steps_per_epoch": per_epoch_steps,
        "epoch_seconds": epoch_s,
        "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "load_avg_1min": os.getloadavg()[0],  # the machine's load when the run ended (timings' context)
    }
    if ledger is not None and setup_bytes is not None:
        per_client = (ledger.client_sent + ledger.client_received).astype(np.float64) - setup_bytes
        per_client *= per_epoch_steps / max(steps, 1)  # the timed steps' traffic, scaled to an epoch
        active = per_client[per_client > 0]
        out["bytes_per_step_total"] = step_bytes  # every client's bytes, step by step (spread check)
        out["bytes_by_phase_per_epoch"] = {
            k: (v - setup_phases.get(k, 0)) * per_epoch_steps / max(steps, 1)
            for k, v in _phases(ledger).items()
            if v > setup_phases.get(k, 0)
        }
        out["bytes_per_client_per_epoch"] = {
            "mean": float(per_client.mean()),
            "mean_active": float(active.mean()) if active.size else 0.0,  # over clients that sent
            "active_clients": int(active.size),
            "p50": float(np.percentile(per_client, 50)),
            "max": float(per_client.max()),
        }
    return out


def write_neighbours(args: argparse.Namespace) -> None:
    """``neighbours.json``: per fraction, users, interactions and the mean and median ``|N(u)|``."""
    from fedgraphrec.data.registry import load_dataset
    from fedgraphrec.data.types import Interactions

    out = []
    for fraction in sorted(args.fractions):
        options = {"user_fraction": fraction, "sample_seed": 0} if fraction < 1 else {}
        data = load_dataset(args.dataset, **options)
        if not isinstance(data, Interactions):
            raise ValueError(f"--neighbours needs implicit feedback; {args.dataset} is a rating dataset")
        n = neighbour_counts(data.train)
        out.append({
            "fraction": fraction, "users": int(data.n_users), "interactions": int(data.train.nnz),
            "mean_neighbours": float(n.mean()), "median_neighbours": float(np.median(n)),
        })  # fmt: skip
        print(out[-1])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "neighbours.json").write_text(
        json.dumps({"dataset": args.dataset, "samples": out}, indent=2) + "\n"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="gowalla")
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.1, 0.25, 0.5, 1.0])
    ap.add_argument("--methods", nargs="+", default=DEFAULT_METHODS, choices=list(METHODS))
    ap.add_argument("--rating-dataset", default="epinions", help="P4GCN's dataset (ratings + social)")
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=2048)
    ap.add_argument("--batches", type=int, default=10, help="minibatches timed per run")
    ap.add_argument("--rounds", type=int, default=3, help="FedGRec rounds timed per run")
    ap.add_argument("--crypto", choices=["accounted", "real"], default="accounted")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds before a run is abandoned")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--keep", action="store_true", help="add these runs to those in OUT/scaling.json")
    ap.add_argument("--merge", type=Path, nargs="+", default=[], help="with --replot: add the runs of these")
    ap.add_argument("--replot", action="store_true", help="redraw the report from OUT/scaling.json")
    ap.add_argument(
        "--whole-epochs",
        type=Path,
        help="a scaling.json of whole-epoch runs to check the extrapolation against",
    )
    ap.add_argument("--neighbours", action="store_true", help="write OUT/neighbours.json and stop")
    ap.add_argument("--child", nargs=2, metavar=("METHOD", "FRACTION"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.neighbours:  # GNN4FR's |N(u)| on each sample (the quadratic term's second factor)
        write_neighbours(args)
        return
    whole = json.loads(args.whole_epochs.read_text())["runs"] if args.whole_epochs else None
    if args.replot:
        saved = json.loads((args.out / "scaling.json").read_text())
        runs, command = saved["runs"], saved.get("command", "")
        commands = [c for c in command.split(" ; ") if c]
        for extra in (json.loads(m.read_text()) for m in args.merge):  # e.g. full-size runs made apart
            runs = runs + extra["runs"]
            commands += [c for c in extra.get("command", "").split(" ; ") if c and c not in commands]
        runs = list({(r["method"], r.get("dataset"), r["fraction"]): r for r in runs}.values())  # one per run
        command = " ; ".join(dict.fromkeys(commands))
        report(runs, args.out, command, whole or saved.get("whole_epochs"))
        return
    if args.child:
        print(json.dumps(run_one(args.child[0], float(args.child[1]), args)))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/scaling.py " + " ".join(sys.argv[1:])
    rows: list[dict[str, Any]] = []
    if args.keep:  # add to the runs already in OUT (e.g. the full-size points after the samples)
        saved = json.loads((args.out / "scaling.json").read_text())
        rows, command = saved["runs"], f"{saved.get('command', '')} ; {command}"
        whole = whole or saved.get("whole_epochs")
    passthrough = [
        "--dataset", args.dataset, "--rating-dataset", args.rating_dataset,
        "--layers", str(args.layers), "--dim", str(args.dim),
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
            report(rows, args.out, command, whole)  # partial results survive an interrupted sweep
    report(rows, args.out, command, whole)


if __name__ == "__main__":
    main()
