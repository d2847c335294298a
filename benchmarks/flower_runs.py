r"""One protocol's run on Flower beside the same run in process: equality, rounds, latency, bytes.

Trains ``PROTOCOL`` twice from one configuration (``train``'s ``--config`` and ``--set``): on Flower,
with the clients sharded over ``--supernodes`` SuperNodes, and in process over as many nodes
(``ProtocolLearner``). The engines:

* ``simulate``: Flower's simulation runtime in this process (Ray backend), as
  ``fedgraphrec flower simulate`` runs it;
* ``flwr-run``: ``flwr run deploy/flower`` submitted to a local SuperLink started with
  ``--simulation`` (``local_federation(simulation=True)``), as a user runs a Flower app;
* ``deploy``: ``flwr run`` to a loopback SuperLink with ``--supernodes`` real SuperNode processes.

Reports whether the two runs agree (test metrics and losses of every evaluated epoch, relative
difference; the training ledger's rows), the Flower run's rounds and bytes before and after set-up
(what the ledger counts, one message per client as the papers count, beside what Flower serialised:
requests and replies) and each stage's rounds, mean wall time and Flower bytes. Writes ``--out``
(JSON) with the exact command and the host.

Example::

    FEDGRAPHREC_DATA=../shared/datasets OMP_NUM_THREADS=1 python benchmarks/flower_runs.py lpgcn \\
        --engine simulate --supernodes 4 --config configs/ml100k-lightgcn.toml --epochs 1 \\
        --crypto real --set alpha=5 --set dtype=float64 --set reproducible=true \\
        --out results/flower/lpgcn-ml100k-simulate.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from lpgcn_epoch import machine  # the one description of a host, beside every figure

PARTS = ("setup", "after_setup")


def ledger_bytes(run: Path) -> int:
    """All payload bytes of the run folder's saved ledger."""
    from fedgraphrec.runtime.ledger import read_saved

    saved = read_saved(run)
    if saved is None:
        raise SystemExit(f"{run}: the run saved no ledger")
    return sum(int(row["payload_bytes"]) for row in saved.get("rows", []))


def flower_rounds(run: Path) -> dict[str, list[dict[str, Any]]]:
    """The Flower run's rounds (``flower.json``): set-up (protocol step -1) and after set-up.

    Set-up is the one boundary both engines know exactly: every protocol runs it at step -1 (key
    agreement, tokens, FedGRec's warm-up sums, ...), and the in-process ledger's total when the
    learner is built. After it, protocols differ in how they interleave training, prediction
    passes and evaluation (LP-GCN gives a prediction pass a step of its own, FedGRec evaluates in
    the round's step), so the stages are reported one by one (:func:`per_stage`).
    """
    out: dict[str, list[dict[str, Any]]] = {p: [] for p in PARTS}
    for r in json.loads((run / "flower.json").read_text())["rounds"]:
        out["setup" if r["label"].rsplit("@", 1)[1] == "-1" else "after_setup"].append(r)
    return out


def largest_difference(got: list[dict[str, Any]], ref: list[dict[str, Any]]) -> dict[str, float]:
    """Largest relative difference of the losses and of the test metrics, epoch by epoch."""
    if len(got) != len(ref):
        raise SystemExit(f"the runs evaluated {len(got)} and {len(ref)} epochs")

    def rel(a: float, b: float) -> float:
        return abs(a - b) / max(abs(b), 1e-12)

    loss, metric = 0.0, 0.0
    for a, b in zip(got, ref, strict=True):
        if b.get("loss") is not None:
            loss = max(loss, rel(a["loss"], b["loss"]))
        for name, value in b["test"].items():
            metric = max(metric, rel(a["test"][name], value))
    return {"loss": loss, "test_metrics": metric}


def training_rows(run: Path) -> list[str]:
    """The ledger's rows without evaluation (each engine evaluates its own way), sorted."""
    lines = (run / "ledger.csv").read_text().splitlines()[1:]
    return sorted(ln for ln in lines if not ln.startswith(("evaluate/", "export/")))


def flower_bytes(rounds: list[dict[str, Any]]) -> int:
    """What Flower serialised in ``rounds``: requests and replies."""
    return sum(int(r["sent_bytes"]) + int(r["received_bytes"]) for r in rounds)


def round_summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Rounds, their median and mean wall time and the bytes Flower serialised, for one part."""
    seconds = [float(r["seconds"]) for r in rounds]
    return {
        "rounds": len(rounds),
        "median_round_seconds": statistics.median(seconds) if seconds else 0.0,
        "mean_round_seconds": statistics.fmean(seconds) if seconds else 0.0,
        "seconds": math.fsum(seconds),
        "flower_bytes": flower_bytes(rounds),
    }


def per_stage(rounds: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Each stage's rounds: how many, their mean wall time and the bytes Flower serialised."""
    by_op: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rounds:
        by_op[r["op"]].append(r)
    return {op: {"rounds": len(v), "mean_seconds": statistics.fmean(float(r["seconds"]) for r in v),
                 "flower_bytes": flower_bytes(v)}
            for op, v in sorted(by_op.items())}  # fmt: skip


def run_flower(engine: str, cfg: Any, out: Path, supernodes: int, work: Path, limit_s: float) -> float:
    """Train ``cfg`` on Flower with ``engine``; the run folder is ``out``. Returns wall seconds."""
    from fedgraphrec.engines.flower.party_app import deploy, simulate

    t = time.perf_counter()
    if engine == "simulate":
        simulate(cfg, out, supernodes)
        return time.perf_counter() - t
    from fedgraphrec.engines.flower.local import local_federation

    root = Path(__file__).resolve().parents[1]  # the SuperNodes and ServerApp import this checkout
    paths = (str(root / "src"), os.environ.get("PYTHONPATH", ""))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    with local_federation(work / "fed", supernodes, simulation=engine == "flwr-run") as fed:
        t = time.perf_counter()
        deploy(cfg, out, supernodes, fed.connection, env=fed.env, limit_s=limit_s)
        return time.perf_counter() - t


def run_in_process(cfg: Any, out: Path, nodes: int) -> tuple[float, int]:
    """Train ``cfg`` in process over ``nodes`` nodes (run folder ``out``): wall seconds, set-up bytes.

    Set-up runs when the learner is built, so the ledger's total then is what set-up sent.
    """
    from fedgraphrec.training.protocol_learner import ProtocolLearner
    from fedgraphrec.training.trainer import Trainer

    setup: list[int] = []

    def learner(c: Any, d: Any) -> ProtocolLearner:
        made = ProtocolLearner(c, d, nodes=nodes)
        setup.append(made.net.ledger.total_bytes())
        return made

    t = time.perf_counter()
    Trainer(cfg, out, progress=False, learner=learner).fit()
    return time.perf_counter() - t, setup[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("protocol")
    ap.add_argument("--engine", choices=["simulate", "flwr-run", "deploy"], default="simulate")
    ap.add_argument("--supernodes", type=int, default=4)
    ap.add_argument("--config", type=Path)
    ap.add_argument("--dataset")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="as train's --set")
    ap.add_argument("--epochs", type=int)
    ap.add_argument("--crypto", choices=["accounted", "real"])
    ap.add_argument("--limit", type=float, default=3600.0, help="seconds a deployed run may take")
    ap.add_argument("--keep", type=Path, help="keep both run folders here (default: a temporary folder)")
    ap.add_argument("--out", type=Path, required=True, help="the JSON report")
    args = ap.parse_args()

    from fedgraphrec.training.loading import load_config
    from fedgraphrec.training.rundir import RunDir

    cfg = load_config(
        args.config, args.overrides, protocol=args.protocol, dataset=args.dataset, epochs=args.epochs,
        crypto=args.crypto,
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        work = (args.keep or Path(tmp)).resolve()
        flower_dir, local_dir = work / "flower", work / "in-process"
        flower_s = run_flower(args.engine, cfg, flower_dir, args.supernodes, work, args.limit)
        local_s, setup_bytes = run_in_process(cfg, local_dir, args.supernodes)
        rounds = flower_rounds(flower_dir)
        ledger = {"setup": setup_bytes, "after_setup": ledger_bytes(local_dir) - setup_bytes}
        parts = {part: {**round_summary(rounds[part]), "ledger_bytes": ledger[part]} for part in PARTS}
        for p in parts.values():
            p["flower_over_ledger"] = p["flower_bytes"] / max(p["ledger_bytes"], 1)
        report: dict[str, Any] = {
            "command": shlex.join([sys.executable.rsplit("/", 1)[-1], *sys.argv]),
            "host": machine(),
            "protocol": args.protocol,
            "engine": args.engine,
            "supernodes": args.supernodes,
            "config": cfg.to_dict(),
            "equal": {
                "largest_relative_difference": largest_difference(
                    RunDir(flower_dir).read_metrics(), RunDir(local_dir).read_metrics()
                ),
                "training_ledger_rows_equal": training_rows(flower_dir) == training_rows(local_dir),
                "test": RunDir(flower_dir).read_summary()["test"],
            },
            "seconds": {"flower_run": flower_s, "in_process_run": local_s},
            "parts": parts,
            "stages": per_stage([r for part in PARTS for r in rounds[part]]),
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    eq = report["equal"]
    print(f"{args.protocol} on {args.engine} ({args.supernodes} SuperNodes) vs in process: "
          f"largest relative difference {eq['largest_relative_difference']}, training ledger rows equal: "
          f"{eq['training_ledger_rows_equal']}")  # fmt: skip
    print(f"wall seconds: Flower {flower_s:.1f}, in process {local_s:.1f}")
    for part, p in report["parts"].items():
        print(f"{part:>11}: {p['rounds']} rounds, median {p['median_round_seconds']:.3f} s, "
              f"ledger {p['ledger_bytes'] / 1e6:.2f} MB -> Flower {p['flower_bytes'] / 1e6:.2f} MB "
              f"({p['flower_over_ledger']:.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
