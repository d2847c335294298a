"""What one client pays per epoch in each federated protocol, side by side on one dataset.

Runs ``fedgraphrec train PROTOCOL --epochs 1`` for every protocol written as party programs (each in
its own process, default settings) and reads the per-client cost the run folder reports
(``summary.json`` → ``communication.per_client_per_epoch``): bytes sent and received per client
(mean, p50, p99, max, set-up included; the same in both crypto modes) and, with ``--crypto real``,
the CPU seconds of a client's own sealing and opening. ``accounted`` is the default: in ``real``
mode the secure sums of FedGRec's warm-up and of P-GCN's forward over every user take many minutes
an epoch on this CPU. Round protocols (FedGRec, FedMF, FedNCF, FedPerGNN) train one
round of ``clients_per_round`` users per epoch, so their means are over every client, taking part
or not. P4GCN (two organisations) and DGREC (no server) are not client/server protocols and are
not in the table. Writes ``client_costs.json`` and ``client_costs.md``.

Example::

    FEDGRAPHREC_DATA=../shared/datasets python benchmarks/client_costs.py --dataset ml-100k \
        --out results/benchmarks/client_costs
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROTOCOLS = ["lpgcn", "gnn4fr", "fedgrec", "fedmf", "fedncf", "fedpergnn", "pgcn"]


def run(protocol: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """One epoch of ``protocol`` through the CLI; its per-client cost and test metric."""
    out = folder / protocol
    command = [
        str(Path(sys.executable).with_name("fedgraphrec")), "train", protocol,
        "--dataset", args.dataset, "--epochs", "1", "--crypto", args.crypto, "--out", str(out),
        "--no-progress",
    ]  # fmt: skip
    t = time.perf_counter()
    try:
        subprocess.run(command, check=True, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"protocol": protocol, "error": f"no epoch within {args.timeout:.0f} s"}
    except subprocess.CalledProcessError as exc:
        return {"protocol": protocol, "error": (exc.stderr or exc.stdout).strip()[-300:]}
    summary = json.loads((out / "summary.json").read_text())
    cost = summary["communication"]["per_client_per_epoch"]
    return {
        "protocol": protocol,
        "wall_seconds": time.perf_counter() - t,
        "train_seconds": summary.get("train_seconds"),
        "clients": summary["dataset_stats"]["users"],
        "per_client_per_epoch": cost,
        "test": summary["test"],
    }


def table(rows: list[dict[str, Any]], crypto: str) -> str:
    """The markdown table of ``rows``."""
    mib = 2**20
    lines = [
        "| protocol | sent / client (mean) | received / client (mean) | total p99 | total max "
        "| client crypto CPU (mean, max) | training (s) | recall@20 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['protocol']} | {r['error']} |||||||")
            continue
        c = r["per_client_per_epoch"]
        crypto_cell = "—"
        if crypto == "real" and "crypto_seconds" in c:
            crypto_cell = (
                f"{c['crypto_seconds']['mean'] * 1e3:.1f} ms, {c['crypto_seconds']['max'] * 1e3:.1f} ms"
            )
        lines.append(
            f"| {r['protocol']} | {c['sent']['mean'] / mib:.2f} MiB | {c['received']['mean'] / mib:.2f} MiB "
            f"| {c['total']['p99'] / mib:.2f} MiB | {c['total']['max'] / mib:.2f} MiB | {crypto_cell} "
            f"| {r['train_seconds']:.1f} | {r['test'].get('recall@20', float('nan')):.4f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="ml-100k")
    ap.add_argument("--protocols", nargs="+", default=PROTOCOLS, choices=PROTOCOLS)
    ap.add_argument("--crypto", choices=["accounted", "real"], default="accounted")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for protocol in args.protocols:
            rows.append(run(protocol, args, Path(tmp)))
            print(json.dumps(rows[-1]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"dataset": args.dataset, "crypto": args.crypto, "epochs": 1}
    (args.out / "client_costs.json").write_text(json.dumps({**meta, "runs": rows}, indent=1) + "\n")
    (args.out / "client_costs.md").write_text(table(rows, args.crypto))
    print(table(rows, args.crypto))


if __name__ == "__main__":
    main()
