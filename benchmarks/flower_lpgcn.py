r"""LP-GCN on Flower (simulation or loopback deployment) next to the in-process engine.

Runs a :class:`~fedgraphrec.engines.flower.job.FlowerJob` with ``protocol = "lpgcn"`` either in
Flower's simulation runtime (``--engine simulate``: Ray backend, ``--supernodes`` virtual SuperNodes)
or on a SuperLink and SuperNodes started on loopback (``--engine deploy``, submitted with
``flwr run``), or submitted with ``flwr run`` to a SuperLink running Flower's simulation runtime with
``--supernodes`` virtual SuperNodes (``--engine flwr-simulation``), runs the same job in-process,
and writes one JSON: whether embeddings and metrics agree, the rounds (set-up, per minibatch,
prediction), the mean latency per round, and the bytes the in-process ledger counts next to the bytes
Flower serialised (requests and replies, every object of each message), per phase. Example
(ML-100K, the reference configuration, 4 virtual SuperNodes)::

    PYTHONPATH=$PWD/src OMP_NUM_THREADS=1 FEDGRAPHREC_DATA=../shared/datasets \
        .venv/bin/python benchmarks/flower_lpgcn.py --engine simulate --supernodes 4 \
        --config configs/ml100k-lightgcn.toml --set "alpha=5" --batches 4 \
        --out results/flower/lpgcn-ml100k-simulate.json
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from fedgraphrec.engines.flower.job import FlowerJob


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


def main() -> None:
    """Run both engines; print and save the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=["simulate", "flwr-simulation", "deploy"], default="simulate")
    parser.add_argument("--supernodes", type=int, default=4)
    parser.add_argument("--config", default="", help="training TOML (empty: small synthetic data)")
    parser.add_argument("--set", dest="overrides", default="", help="';'-separated key=value overrides")
    parser.add_argument("--batches", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600.0, help="bound on one round (seconds)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    config = str(Path(args.config).resolve()) if args.config else ""
    job = FlowerJob(
        protocol="lpgcn",
        train_config=config,
        train_set=args.overrides,
        batches=args.batches,
        min_nodes=args.supernodes,
        stage_timeout=args.timeout,
    )
    cfg = job.lpgcn_config()
    from fedgraphrec.engines.flower.app import simulate
    from fedgraphrec.engines.flower.local import flwr_run, local_federation
    from fedgraphrec.engines.flower.lpgcn import run_lpgcn_in_process

    got: dict[str, Any]
    if args.engine == "simulate":
        res = simulate(job, args.supernodes)
        got = {
            **res.extra,
            "metrics": res.metrics,
            "losses": res.losses,
            "user": res.user_emb,
            "item": res.item_emb,
        }
    else:
        simulation = args.engine == "flwr-simulation"
        with (
            tempfile.TemporaryDirectory() as tmp,
            local_federation(tmp, args.supernodes, simulation=simulation) as fed,
        ):
            got = flwr_run(fed, job, limit_s=3600.0)
    ref = run_lpgcn_in_process(job)
    phases = got["flower_phases"]
    ledger = ref.extra["ledger_bytes"]
    assert isinstance(ledger, dict)
    bytes_cmp = {
        name: {
            "ledger_bytes": int(ledger[name]),
            "flower_bytes": int(phases[name]["sent_bytes"]) + int(phases[name]["received_bytes"]),
        }
        for name in ("setup", "train", "predict")
    }
    for row in bytes_cmp.values():
        row["flower_over_ledger"] = row["flower_bytes"] / max(row["ledger_bytes"], 1)
    report = {
        "command": _PREFIX + " ".join(shlex.quote(a) for a in sys.argv),
        "engine": args.engine,
        "supernodes": args.supernodes,
        "job": job.to_config(),
        "train_config": {k: v for k, v in cfg.to_dict().items() if k in _SHOWN},
        "max_rel_diff": {"user": _rel(got["user"], ref.user_emb), "item": _rel(got["item"], ref.item_emb)},
        "identical_metrics": got["metrics"] == ref.metrics,
        "metrics": {"flower": got["metrics"], "in_process": ref.metrics},
        "losses": {"flower": got["losses"], "in_process": ref.losses},
        "rounds": {
            "total": got["rounds"],
            "setup": got["setup_rounds"],
            "per_minibatch": got["rounds_per_minibatch"],
            "predict": got["predict_rounds"],
        },
        "latency_seconds": {
            "mean_round": {k: v["mean_round_seconds"] for k, v in phases.items()},
            "per_op_mean_round": {k: v["mean_seconds"] for k, v in got["flower_traffic"]["per_op"].items()},
            "flower_wall": got["wall_seconds"],
            "in_process_wall": ref.extra["wall_seconds"],
        },
        "bytes": bytes_cmp,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report[k] for k in _SUMMARY}, indent=2))


_PREFIX = "PYTHONPATH=$PWD/src OMP_NUM_THREADS=1 FEDGRAPHREC_DATA=../shared/datasets .venv/bin/python "
_SUMMARY = ("max_rel_diff", "identical_metrics", "rounds", "latency_seconds", "bytes")
_SHOWN = (
    "dataset",
    "dataset_options",
    "dim",
    "n_layers",
    "alpha",
    "lr",
    "reg",
    "batch_size",
    "seed",
    "dtype",
    "init_std",
    "sampler",
    "crypto",
    "ks",
)

if __name__ == "__main__":
    main()
