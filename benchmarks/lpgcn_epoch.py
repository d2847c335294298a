"""LP-GCN epoch time against the centralized LightGCN epoch on the same batches, in one run.

Both start from the same initial tables (the run seed's ``init`` stream; a ``real`` run draws its
own) and consume the same minibatches (LightGCN's user-uniform sampler); LP-GCN runs as its party
programs over the in-process transport (one node hosting every client by default). The timed work
is interleaved in blocks of minibatches so machine noise hits every side alike, and the pass over
the batches is repeated (``--repeats``, default 3; the order of the sides alternates by block and
by pass). The report gives each side's median epoch time over the passes and the median ratios
(``--crypto real`` runs the ``accounted`` twin alongside: central / accounted / real side by side),
LP-GCN's set-up time (once per run, not per epoch), bytes per client per epoch from the ledger,
and the peak resident memory of the process. The parameter deviation is the ``accounted`` run's
from the centralized one (a ``real`` run starts from tables of its own).

Examples::

    python benchmarks/lpgcn_epoch.py --dataset gowalla --layers 3 --dim 64 --crypto accounted
    python benchmarks/lpgcn_epoch.py --dataset ml-100k --layers 5 --dim 20 --lr 0.01 --reg 1e-3 \
        --init-std 1 --crypto real
    python benchmarks/lpgcn_epoch.py --dataset yelp2018 --layers 3 --batches 20 --no-central
    python benchmarks/lpgcn_epoch.py --dataset synthetic --users 20 --batch-size 16 --layers 5 \
        --dim 20 --lr 0.01 --reg 1e-3 --init-std 1 --crypto real --block 2 --repeats 30

The last one is a graph so small that next to no arithmetic is left: its median minibatch time is
each side's fixed cost per minibatch (rounds, messages, checks, bookkeeping, the ops' own call
overhead), the part of a small graph's epoch that does not shrink with the data.

The ML-100K configuration is the authors' LP-GCN equivalence experiment (L=5, d=20, batch 2048);
their published simulation takes about 630 s per epoch on this machine (issue #3), which
``--reference-seconds`` turns into a speed-up factor.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import platform
import resource
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import cryptography
import numpy as np
import torch
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from fedgraphrec.data.registry import load_dataset
from fedgraphrec.protocols.central import CentralSettings
from fedgraphrec.protocols.lpgcn.settings import LPGCNSettings
from fedgraphrec.training.central import CentralLearner
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.protocol_learner import ProtocolLearner
from fedgraphrec.training.sampler import BPRSampler


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def machine() -> dict[str, object]:
    """The machine a ratio was measured on: the same code gives other ratios on another host.

    Issue #33 measured the same ML-100K code on two quiet hosts a few hours apart and got other
    ratios (``results/benchmarks/lpgcn_ml100k_profile.md``, "Seventh round" and "Eighth round"):
    the CPU, PyTorch's kernel width and the versions belong beside every figure.
    """
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        names = [ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("model name")]
        cpu = names[0] if names else cpu
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "cryptography": cryptography.__version__,
        "load_average_end": os.getloadavg()[0],
    }


def machine_line(m: dict[str, object]) -> str:
    """The terminal line naming the host of a report (:func:`machine`)."""
    return (f"on {m['cpu']} ({m['torch_cpu_capability']} kernels); load average at the end: "
            f"{m['load_average_end']:.2f} (a loaded machine makes ratios noisy)")  # fmt: skip


def aead_throughput(size: int, total: int = 1 << 26, repeats: int = 3) -> dict[str, float]:
    """``cryptography``'s AES-256-GCM on messages of ``size`` bytes: GB/s sealing and opening.

    ``size`` is the run's mean AEAD call (a batched part is one call of a few hundred KiB), each
    call returns fresh output as in the run, and the best of ``repeats`` passes over ``total``
    bytes is kept. (One 64 MiB buffer, as measured before, mostly timed the page faults of its
    fresh output: about 1.5 GB/s against 8-10 GB/s at the run's sizes on this machine.)
    """
    aead = AESGCM(os.urandom(32))
    count = max(1, total // max(size, 1))
    datas = [os.urandom(size) for _ in range(min(count, 8))]
    nonces = [os.urandom(12) for _ in datas]
    blobs = [aead.encrypt(n, d, b"aad") for n, d in zip(nonces, datas, strict=True)]
    best = {"seal": 0.0, "open": 0.0}
    for _ in range(repeats):
        t = time.perf_counter()
        for k in range(count):
            aead.encrypt(nonces[k % len(datas)], datas[k % len(datas)], b"aad")
        t1 = time.perf_counter()
        for k in range(count):
            aead.decrypt(nonces[k % len(datas)], blobs[k % len(datas)], b"aad")
        t2 = time.perf_counter()
        best["seal"] = max(best["seal"], size * count / (t1 - t) / 1e9)
        best["open"] = max(best["open"], size * count / (t2 - t1) / 1e9)
    return best


Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
Side = tuple[str, Callable[[Batch], object]]


def model_options(
    ap: argparse.ArgumentParser, *, layers: int, dim: int, lr: float, reg: float, init_std: float
) -> None:
    """The LightGCN options every LP-GCN benchmark takes (each script gives its own defaults)."""
    ap.add_argument("--layers", type=int, default=layers)
    ap.add_argument("--dim", type=int, default=dim)
    ap.add_argument("--batch-size", type=int, default=2048)
    ap.add_argument("--lr", type=float, default=lr)
    ap.add_argument("--reg", type=float, default=reg)
    ap.add_argument("--init-std", type=float, default=init_std)
    ap.add_argument("--seed", type=int, default=0)


def model_settings(args: argparse.Namespace) -> dict[str, object]:
    """The settings :func:`model_options` chose, as the protocols' settings classes take them."""
    return dict(model="lightgcn", dim=args.dim, n_layers=args.layers, init_std=args.init_std, lr=args.lr,
                reg=args.reg, batch_size=args.batch_size)  # fmt: skip


def dataset_options(args: argparse.Namespace) -> dict[str, object]:
    """The loader's options: the synthetic graph's size from ``--users``, none for a real dataset."""
    if args.dataset != "synthetic":
        return {}
    return {"n_users": args.users, "n_items": 2 * args.users, "mean_degree": 10.0}


def interleaved_passes(
    sides: Sequence[Side],
    batches: Sequence[Batch],
    block: int,
    repeats: int,
    enter: Mapping[str, Callable[[], contextlib.AbstractContextManager[object]]] | None = None,
) -> tuple[list[dict[str, float]], dict[str, list[float]]]:
    """Each side's seconds in every pass over ``batches``, and each side's seconds per batch.

    Every block of ``block`` batches runs on each side in turn; the sides' order alternates by
    block and by pass, so the machine's drift hits every side alike. ``enter``: a context a side's
    block runs in, entered outside the timed steps (``lpgcn_ab.py``'s copy of the library).
    """
    times: dict[str, list[float]] = {name: [] for name, _ in sides}
    passes: list[dict[str, float]] = []
    for _ in range(repeats):
        spent = dict.fromkeys(times, 0.0)
        for start in range(0, len(batches), block):
            chunk = batches[start : start + block]
            for name, step in sides if (start // block + len(passes)) % 2 == 0 else sides[::-1]:
                with enter[name]() if enter else contextlib.nullcontext():
                    for b in chunk:
                        t = time.perf_counter()
                        step(b)
                        times[name].append(time.perf_counter() - t)
                        spent[name] += times[name][-1]
        passes.append(spent)
    return passes, times


def paired_passes(
    sides: Sequence[Side],
    batches: Sequence[Batch],
    block: int,
    repeats: int,
    enter: Mapping[str, Callable[[], contextlib.AbstractContextManager[object]]],
    pairs: Sequence[str],
) -> tuple[list[dict[str, float]], dict[str, list[float]]]:
    """:func:`interleaved_passes` after an untimed warm-up, with each of ``pairs`` and its twin as one side.

    Two learners of each kind compared (``lpgcn_ab.py``, ``lpgcn_runtime_bound.py``), named ``x`` and
    ``x#2`` and built in the order ``x, y, y#2, x#2``: the learner built first runs ≈ 1-2 % faster
    (``lpgcn_ab.py --null``), so each kind gets one early and one late learner. Every side first
    trains two blocks untimed (operators, caches, the allocator); then ``x#2``'s times and passes
    are added to ``x``'s.
    """
    for name, step in sides:
        with enter[name]():
            for b in batches[: 2 * block]:
                step(b)
    passes, times = interleaved_passes(sides, batches, block, repeats, enter)
    for side in pairs:
        times[side] += times.pop(side + "#2")
        for p in passes:
            p[side] += p.pop(side + "#2")
    return passes, times


def paired_ratios(
    passes: Sequence[Mapping[str, float]], times: Mapping[str, list[float]], new: str, old: str
) -> dict[str, object]:
    """What :func:`paired_passes` measured: medians, ``new`` over ``old``, and each over ``central``.

    Each of ``new`` and ``old`` is two learners (their times summed), so beside the one centralized
    learner each counts half its time.
    """
    med = {k: statistics.median(v) for k, v in times.items()}
    central = sum(p["central"] for p in passes)
    return {
        "median_minibatch_seconds": med,
        f"{new}_over_{old}_median": med[new] / med[old],
        f"{new}_over_{old}_per_pass": [p[new] / p[old] for p in passes],
        f"{new}_over_{old}_total": sum(p[new] for p in passes) / sum(p[old] for p in passes),
        f"{old}_over_central_total": sum(p[old] for p in passes) / 2 / central,
        f"{new}_over_central_total": sum(p[new] for p in passes) / 2 / central,
    }


def emit(report: Mapping[str, object], width: int, summary: str, json_path: Path | None) -> None:
    """Print a report's fields (not its config and machine), a summary line and the host; write the JSON."""
    for k, v in report.items():
        if k not in ("config", "machine"):
            print(f"{k:>{width}}: {v}")
    print(summary)
    machine_info = report["machine"]
    assert isinstance(machine_info, dict)
    print(machine_line(machine_info))
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, indent=2) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="gowalla")
    ap.add_argument("--users", type=int, default=300, help="synthetic dataset: users (items: twice)")
    model_options(ap, layers=3, dim=64, lr=0.001, reg=1e-4, init_std=0.1)
    ap.add_argument("--alpha", type=int, default=0)
    ap.add_argument("--crypto", choices=["accounted", "real"], default="accounted")
    ap.add_argument("--nodes", type=int, default=1, help="in-process nodes hosting the clients")
    ap.add_argument("--batches", type=int, default=0, help="time only this many batches (0: one epoch)")
    ap.add_argument("--block", type=int, default=10, help="batches per interleaved block")
    ap.add_argument("--repeats", type=int, default=3, help="timed passes over the batches (medians)")
    ap.add_argument("--no-central", action="store_true", help="time LP-GCN alone (memory runs)")
    ap.add_argument("--reference-seconds", type=float, default=0.0, help="an external epoch time to compare")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    data = load_dataset(args.dataset, **dataset_options(args))
    model = model_settings(args)
    settings = LPGCNSettings(**model, alpha=args.alpha)  # type: ignore[arg-type]
    cfg = TrainConfig(
        protocol="lpgcn", dataset=args.dataset, seed=args.seed, crypto=args.crypto, settings=settings
    )
    oracle = TrainConfig(protocol="central", dataset=args.dataset, seed=args.seed, crypto=args.crypto,
                         settings=CentralSettings(**model))  # type: ignore[arg-type]  # fmt: skip
    central = CentralLearner(oracle, data)  # the same initial tables
    t0 = time.perf_counter()
    fed = ProtocolLearner(cfg, data, nodes=args.nodes)
    reference = None
    if args.crypto == "real":  # the same run without the cipher, timed alongside
        reference = ProtocolLearner(dataclasses.replace(cfg, crypto="accounted"), data, nodes=args.nodes)
    setup_s = time.perf_counter() - t0
    ledger = fed.net.ledger
    setup_bytes = ledger.client_sent + ledger.client_received
    batches = list(BPRSampler(data.train, args.seed, "users").batches(0, args.batch_size))
    n_epoch = len(batches)
    if args.batches:
        batches = batches[: args.batches]

    def step_central(b: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> None:
        central.train_batch(*b)

    endpoints = fed.transport.endpoints.values()  # type: ignore[attr-defined]
    aead0 = sum(e.aead_bytes for e in endpoints)
    calls0 = sum(e.aead_calls for e in endpoints)
    sides: list[Side] = [("lpgcn", lambda b: fed.train_batch(*b))]
    if reference is not None:
        sides.append(("lpgcn_accounted", lambda b: reference.train_batch(*b)))
    sides += [] if args.no_central else [("central", step_central)]
    passes, times = interleaved_passes(sides, batches, args.block, args.repeats)
    if not args.no_central:
        oracle = central.parameters_for_verification()
        # the accounted run starts from the central run's tables; a real run draws its own
        same_start = reference if reference is not None else fed
        dev = max(
            ((a - oracle[k]).abs().max() / oracle[k].abs().max()).item()
            for k, a in same_start.tables().items()
        )
    scale = n_epoch / len(batches)
    per_client = (ledger.client_sent + ledger.client_received - setup_bytes) * scale / args.repeats
    report = {
        "dataset": args.dataset,
        "config": vars(args) | {"json": str(args.json) if args.json else None},
        "batches_per_epoch": n_epoch,
        "timed_batches": len(batches),
        "setup_seconds": setup_s,
        "repeats": args.repeats,
        "lpgcn_epoch_seconds": statistics.median(p["lpgcn"] for p in passes) * scale,
        "lpgcn_median_batch_seconds": statistics.median(times["lpgcn"]),
        "bytes_per_client_per_epoch_mean": float(per_client.mean()),
        "peak_rss_gib": peak_rss_gib(),
        "conv_clients": int(sum(len(p.conv_senders) for p in fed.server.plans)),  # type: ignore[attr-defined]
        "neighbour_pairs": int(sum(len(p.state.nb_user) for p in fed.programs.values())),  # type: ignore[attr-defined]
        "nodes": args.nodes,
    }
    if not args.no_central:
        report |= {
            "central_epoch_seconds": statistics.median(p["central"] for p in passes) * scale,
            "central_median_batch_seconds": statistics.median(times["central"]),
            "ratio_total": statistics.median(p["lpgcn"] / p["central"] for p in passes),
            "ratio_median": statistics.median(times["lpgcn"]) / statistics.median(times["central"]),
            "ratio_per_pass": [p["lpgcn"] / p["central"] for p in passes],
            "max_relative_parameter_deviation": dev,
        }
        if reference is not None:
            report["accounted_ratio_total"] = statistics.median(
                p["lpgcn_accounted"] / p["central"] for p in passes
            )
            report["accounted_ratio_per_pass"] = [p["lpgcn_accounted"] / p["central"] for p in passes]
    if reference is not None:
        spent = sum(e.aead_bytes for e in endpoints) - aead0
        call_size = spent // max(sum(e.aead_calls for e in endpoints) - calls0, 1)
        gbps = aead_throughput(int(call_size))
        # every byte is sealed once and opened once: the floor pays each direction on half the count
        aead = spent * scale / 2 / args.repeats
        floor = aead * (1 / gbps["seal"] + 1 / gbps["open"]) / 1e9
        accounted = statistics.median(p["lpgcn_accounted"] for p in passes) * scale
        report |= {
            "accounted_epoch_seconds": accounted,
            "aead_gb_per_s": gbps,
            "aead_mean_call_bytes": int(call_size),
            "aead_bytes_per_epoch": aead,
            "aead_floor_seconds": floor,
            "real_over_accounted_plus_floor": report["lpgcn_epoch_seconds"] / (accounted + floor),
        }
    if args.reference_seconds:
        report["speedup_vs_reference"] = args.reference_seconds / report["lpgcn_epoch_seconds"]
    report["machine"] = machine()
    for k, v in report.items():
        if k not in ("config", "machine"):
            shown = [round(x, 3) for x in v] if isinstance(v, list) else v
            print(f"{k:>36}: {v:.4g}" if isinstance(v, float) else f"{k:>36}: {shown}")
    if not args.no_central:  # the three side by side, each the median over the passes
        line = {"central": 1.0}
        if reference is not None:
            line["accounted"] = report["accounted_ratio_total"]
        line[args.crypto] = report["ratio_total"]
        print(
            f"epoch / central (median of {args.repeats}):",
            "  ".join(f"{k} {v:.2f}x" for k, v in line.items()),
        )
    print(machine_line(report["machine"]))
    if len(batches) < n_epoch:
        print(f"(epoch figures extrapolated from {len(batches)} of {n_epoch} batches)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
