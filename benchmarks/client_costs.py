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

``--device-profile N`` adds ``--set device_profile=N``: each run also replays N seeded clients' epochs
one AEAD per logical message (``summary.json`` → ``communication.per_device``,
:mod:`fedgraphrec.runtime.device_profile`), and the files are ``per_device_<crypto>.json``/``.md``,
the replayed per-device seconds beside the batched simulator's per-client crypto CPU, with the exact
command and the load average before and after each run (a run with a load average above 1.5 is marked
"measured under load").

Example::

    FEDGRAPHREC_DATA=../shared/datasets python benchmarks/client_costs.py --dataset ml-100k \
        --out results/benchmarks/client_costs
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
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
    if args.device_profile:
        command += ["--set", f"device_profile={args.device_profile}"]
    load_before = os.getloadavg()
    t = time.perf_counter()
    try:
        subprocess.run(command, check=True, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"protocol": protocol, "error": f"no epoch within {args.timeout:.0f} s"}
    except subprocess.CalledProcessError as exc:
        return {"protocol": protocol, "error": (exc.stderr or exc.stdout).strip()[-300:]}
    summary = json.loads((out / "summary.json").read_text())
    cost = summary["communication"]["per_client_per_epoch"]
    extra: dict[str, Any] = {}
    if args.device_profile:
        load = [*load_before, *os.getloadavg()]
        extra = {
            "command": shlex.join(
                ["fedgraphrec", *(f"/tmp/{protocol}" if c == str(out) else c for c in command[1:])]
            ),
            "load_average_1_5_15_before_after": [round(x, 2) for x in load],
            "measured_under_load": max(load[0], load[3]) > 1.5,
            "per_device": {k: v for k, v in summary["communication"]["per_device"].items() if k != "clients"},
        }
    return {
        "protocol": protocol,
        "wall_seconds": time.perf_counter() - t,
        "train_seconds": summary.get("train_seconds"),
        "clients": summary["dataset_stats"]["users"],
        "per_client_per_epoch": cost,
        "test": summary["test"],
        **extra,
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


def device_table(rows: list[dict[str, Any]]) -> str:
    """The markdown table of the replayed per-device cost beside the batched per-client crypto CPU."""
    lines = [
        "| protocol | devices | per device (replayed, one AEAD per message): time / epoch p50 / p99 / max "
        "| messages sent / received (p50) | bytes / epoch p50 / p99 / max "
        "| crypto CPU per client (batched, in-process): mean / p99 / max | load (1 min, before / after) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r or "per_device" not in r:
            lines.append(f"| {r['protocol']} | {r.get('error', 'no per-device figures')} ||||||")
            continue
        d, c = r["per_device"], r["per_client_per_epoch"].get("crypto_seconds", {})
        sec, size, msg = d["seconds"]["total"], d["bytes"]["total"], d["messages"]
        under = " (measured under load)" if r["measured_under_load"] else ""
        load = r["load_average_1_5_15_before_after"]
        lines.append(
            f"| {r['protocol']} | {d['devices']} | "
            + " / ".join(f"{sec[k] * 1e3:.2f} ms" for k in ("p50", "p99", "max"))
            + f" | {msg['sent']['p50']:.0f} / {msg['received']['p50']:.0f} | "
            + " / ".join(f"{size[k] / 2**20:.2f} MiB" for k in ("p50", "p99", "max"))
            + " | "
            + (" / ".join(f"{c[k] * 1e3:.2f} ms" for k in ("mean", "p99", "max")) if c else "—")
            + f" | {load[0]:.2f} / {load[3]:.2f}{under} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="ml-100k")
    ap.add_argument("--protocols", nargs="+", default=PROTOCOLS, choices=PROTOCOLS)
    ap.add_argument("--crypto", choices=["accounted", "real"], default="accounted")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device-profile", type=int, default=0, help="replay this many clients per message")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for protocol in args.protocols:
            rows.append(run(protocol, args, Path(tmp)))
            print(json.dumps(rows[-1]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {"dataset": args.dataset, "crypto": args.crypto, "epochs": 1}
    if args.device_profile:
        meta.update(
            device_profile=args.device_profile, measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        )
        name = f"per_device_{args.crypto}"
        text = (
            f"# Per device vs batched: {args.dataset}, one epoch, --crypto {args.crypto} "
            f"({meta['measured_at']})\n\n"
            "Per device: the replay of `device_profile` sampled clients' epochs, one AES-256-GCM seal per "
            "message sent, one open per message received, one HKDF per rotating step key "
            "(`fedgraphrec.runtime.device_profile`; local model compute, tokens, masking, homomorphic and "
            "public-key work, set-up and TLS are not replayed). Batched: the simulator's in-process "
            "sealing time split over each part's clients (set-up included). Benchmark command: "
            f"`{shlex.join(['python', 'benchmarks/client_costs.py', *sys.argv[1:]])}`.\n\n"
            + device_table(rows)
        )
        commands = "\n".join(r["command"] for r in rows if "command" in r)
        env = " ".join(f"{k}={os.environ.get(k, '')}" for k in ("FEDGRAPHREC_DATA", "OMP_NUM_THREADS"))
        text += f"\nCommands (environment: {env}):\n\n```\n{commands}\n```\n"
    else:
        name, text = "client_costs", table(rows, args.crypto)
    (args.out / f"{name}.json").write_text(json.dumps({**meta, "runs": rows}, indent=1) + "\n")
    (args.out / f"{name}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
