"""FedGRec on a loopback Flower deployment: per-round latency and ledger bytes vs Flower's bytes.

Starts a SuperLink and ``--supernodes`` SuperNodes, submits the job with ``flwr run``, runs the same
job in-process, and writes ``deploy.json`` into ``--out``: whether the two engines agree, the mean
latency of each kind of ``send_and_receive`` round, and the bytes the protocol's ledger counted next
to the bytes Flower serialised (requests and replies, every object of each message). Example::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/flower_deploy.py --supernodes 2 --out results/flower
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch

from fedgraphrec.engines.flower.job import FlowerJob, run_fedgrec_job
from fedgraphrec.engines.flower.local import flwr_run, local_federation


def main() -> None:
    """Run the deployment and the in-process engine; print and save the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--supernodes", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--users", type=int, default=40)
    parser.add_argument("--items", type=int, default=60)
    parser.add_argument("--out", type=Path, default=Path("results/flower"))
    args = parser.parse_args()
    job = FlowerJob(users=args.users, items=args.items, rounds=args.rounds, min_nodes=args.supernodes)
    with tempfile.TemporaryDirectory() as tmp, local_federation(tmp, args.supernodes) as fed:
        got = flwr_run(fed, job, limit_s=1200.0)
    ref = run_fedgrec_job(job)
    traffic = got["flower_traffic"]
    rows = ref.ledger["rows"]
    assert isinstance(rows, list)
    # Only secure aggregation crosses the wire in this engine; the other phases stay in the ServerApp.
    ledger_bytes = sum(int(r["payload_bytes"]) for r in rows if "/secagg-" in r["phase"])
    flower_bytes = int(traffic["sent_bytes"]) + int(traffic["received_bytes"])
    report = {
        "job": job.to_config(),
        "supernodes": args.supernodes,
        "identical_embeddings": bool(
            torch.equal(got["user"], ref.user_emb) and torch.equal(got["item"], ref.item_emb)
        ),
        "identical_metrics": got["metrics"] == ref.metrics,
        "identical_ledger": got["ledger"] == ref.ledger,
        "metrics": ref.metrics,
        "send_and_receive_rounds": traffic["rounds"],
        "mean_round_seconds": traffic["seconds"] / traffic["rounds"],
        "per_op": traffic["per_op"],
        "ledger_secagg_bytes": ledger_bytes,
        "ledger_total_bytes": ref.ledger["total_bytes"],
        "flower_bytes": flower_bytes,
        "flower_input_bytes_not_in_ledger": got["input_bytes"],
        "flower_over_ledger": flower_bytes / ledger_bytes,
        "flower_minus_inputs_over_ledger": (flower_bytes - int(got["input_bytes"])) / ledger_bytes,
        "server_wall_seconds": got["wall_seconds"],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "deploy.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
