r"""What a GNN4FR client pays per epoch (issue #25): bytes, and real vs accounted crypto time.

One interleaved run: the same configuration is built twice — ``accounted`` crypto (exact sizes, no
cipher) and ``real`` crypto (every sealed row encrypted, bound, relayed and opened) — and every
minibatch of one epoch runs on both back to back, then one prediction each (what the training loop
does before an evaluation), so machine load hits both sides alike. Reported:

* per-client bytes per epoch (sent + received; mean, p50, p99, max over clients), set-up included
  and excluded, from the ledger (identical in both modes: checked);
* the epoch's wall time in each mode and the ratio real / accounted;
* the AEAD floor: the time AES-256-GCM alone needs to seal and open once every sealed message the
  real run sent (message sizes from the ledger, per-message time measured here on the same sizes),
  and the sealing/opening time the runtime measured;
* with ``--paper-literal-bytes``: the bytes of the paper-literal scheme (Algorithm 5 and dense shares;
  the pre-#25 protocol), from ``--paper-batches`` minibatches scaled to the epoch.

    FEDGRAPHREC_DATA=../shared/datasets python benchmarks/gnn4fr_cost.py \
        --config configs/ml100k-lightgcn.toml --set dim=64 --set n_layers=3 \
        --json results/benchmarks/gnn4fr_cost_ml100k.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from fedgraphrec.protocols.settings import MinibatchSettings, ModelSettings
from fedgraphrec.runtime.ledger import Ledger
from fedgraphrec.training.data import prepare_interactions
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.protocol_learner import ProtocolLearner
from fedgraphrec.training.sampler import BPRSampler

SEALED_OVERHEAD = 28  # nonce + tag
SEALED_PHASES = (
    "forward/", "predict/forward/", "backward/", "loss/negative-embeddings", "loss/item-gradients",
    "loss/negative-gradients", "predict/item-embeddings", "aggregate/shares",
)  # fmt: skip
"""GNN4FR's phases whose messages are sealed (``roles.Phase``)."""


def per_client(ledger: Ledger, minus: np.ndarray | None = None) -> dict[str, float]:
    """Mean, p50, p99 and max over clients of the bytes each sent and received."""
    total = (ledger.client_sent + ledger.client_received).astype(np.float64)
    if minus is not None:
        total = total - minus
    return {
        "mean": float(total.mean()),
        "p50": float(np.percentile(total, 50)),
        "p99": float(np.percentile(total, 99)),
        "max": float(total.max()),
    }


def sealed_sends(ledger: Ledger, sealed_phases: set[str]) -> dict[int, int]:
    """Sealed messages clients sent (client -> server hops of sealed phases), by size."""
    out: dict[int, int] = {}
    for r in ledger.rows():
        if r.phase in sealed_phases and r.sender != "server" and r.receiver == "server" and r.messages:
            size = r.payload_bytes // r.messages
            out[size] = out.get(size, 0) + r.messages
    return out


def aead_floor(sends: dict[int, int], repeats: int = 2000) -> float:
    """Seconds to seal and open once each of ``sends`` (messages by ciphertext size) with AES-256-GCM."""
    aead = AESGCM(AESGCM.generate_key(256))
    total = 0.0
    for size, count in sends.items():
        plain = os.urandom(max(size - SEALED_OVERHEAD, 0))
        nonce, aad = os.urandom(12), b"fedgraphrec/v2|gnn4fr|phase|0|client:1|client:*"
        t0 = time.perf_counter()
        for _ in range(repeats):
            aead.decrypt(nonce, aead.encrypt(nonce, plain, aad), aad)
        total += (time.perf_counter() - t0) / repeats * count
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=Path("configs/ml100k-lightgcn.toml"))
    ap.add_argument("--set", action="append", default=[], dest="overrides")
    ap.add_argument("--batches", type=int, default=0, help="minibatches (0: the whole epoch)")
    ap.add_argument("--paper-literal-bytes", action="store_true")
    ap.add_argument("--paper-batches", type=int, default=2)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    cfg = load_config(args.config, args.overrides, protocol="gnn4fr")
    data = prepare_interactions(cfg)
    arms: dict[str, Any] = {}
    setup: dict[str, float] = {}
    for mode in ("accounted", "real"):
        t0 = time.perf_counter()
        arms[mode] = ProtocolLearner(dataclasses.replace(cfg, crypto=mode), data)
        setup[mode] = time.perf_counter() - t0
    base = {m: a.net.ledger.client_sent + a.net.ledger.client_received for m, a in arms.items()}
    batches = list(
        BPRSampler(data.train, cfg.seed, cfg.settings_as(MinibatchSettings).sampler).batches(
            0, cfg.settings_as(MinibatchSettings).batch_size
        )
    )
    run = batches[: args.batches] if args.batches else batches
    seconds = {m: 0.0 for m in arms}
    for users, pos, neg in run:  # interleaved: both modes on the same batch, back to back
        losses = []
        for mode, learner in arms.items():
            t0 = time.perf_counter()
            losses.append(learner.train_batch(users, pos, neg).loss)
            seconds[mode] += time.perf_counter() - t0
        if losses[0] != losses[1]:
            raise SystemExit(f"real and accounted losses differ: {losses}")
    for mode, learner in arms.items():
        t0 = time.perf_counter()
        learner.embeddings()
        seconds[mode] += time.perf_counter() - t0
    acc, real = arms["accounted"].net.ledger, arms["real"].net.ledger
    same = [(r.phase, r.messages, r.payload_bytes) for r in acc.rows()] == [
        (r.phase, r.messages, r.payload_bytes) for r in real.rows()
    ]
    sends = sealed_sends(real, {r.phase for r in real.rows() if r.phase.startswith(SEALED_PHASES)})
    report: dict[str, Any] = {
        "dataset": cfg.dataset,
        "users": int(data.train.shape[0]),
        "items": int(data.train.shape[1]),
        "train": int(data.train.nnz),
        "dim": cfg.settings_as(ModelSettings).dim,
        "layers": cfg.settings.n_layers,
        "dtype": cfg.dtype,
        "batch_size": cfg.settings_as(MinibatchSettings).batch_size,
        "batches": len(run),
        "of_batches": len(batches),
        "ledgers_identical": same,
        "bytes_per_client_epoch": per_client(acc),
        "bytes_per_client_epoch_without_setup": per_client(acc, base["accounted"]),
        "setup_seconds": setup,
        "epoch_seconds": seconds,
        "real_over_accounted": seconds["real"] / seconds["accounted"],
        "crypto_seconds_measured": float(real.client_crypto_seconds.sum()),
        "aead_floor_seconds": aead_floor(sends),
        "sealed_messages_sent": int(sum(sends.values())),
    }
    if args.paper_literal_bytes:
        paper = ProtocolLearner(load_config(base=cfg, paper_literal=True), data)
        start = paper.net.ledger.client_sent + paper.net.ledger.client_received
        for b in batches[: args.paper_batches]:
            paper.train_batch(*b)
        steps = paper.net.ledger.client_sent + paper.net.ledger.client_received - start
        scale = len(batches) / args.paper_batches
        now = acc.client_sent + acc.client_received - base["accounted"]
        report["paper_literal_bytes_per_client_epoch_without_setup_mean"] = float(steps.mean() * scale)
        report["paper_over_default_bytes_without_setup"] = float(steps.mean() * scale / now.mean())
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
