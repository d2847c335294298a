"""What Flower adds per round: the same party programs in process and in Flower's simulation runtime.

Runs one protocol on synthetic data twice over three nodes: in process (``LocalTransport``, every
``round`` call timed) and in Flower's simulation runtime (virtual SuperNodes on Ray; each
``send_and_receive`` timed by the Flower transport, ``flower.json``). Both drive the same rounds in
the same order (training and federated evaluation), so the rounds pair up by stage (Flower adds
the hello that configures each node, reported apart); the overhead of a round is the difference of
the pair's wall times. Prints and writes (``--json``) the
number of rounds, the medians of both, the median and mean overhead per round and the ratio of the
total round times. Ray's start-up is outside every round and not counted.

Example::

    python benchmarks/flower_overhead.py --protocol gnn4fr \
        --json results/benchmarks/flower_overhead_gnn4fr.json
"""

from __future__ import annotations

import argparse
import difflib
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

SETTINGS = [
    "dataset_options.n_users=60", "dataset_options.n_items=80", "dataset_options.mean_degree=5.0",
    "dim=8", "n_layers=2", "batch_size=64", "ks=[10]", "metric='recall@10'", "checkpoint_every=0",
    "clients_per_round=20", "local_steps=2", "n_negatives=4",
]  # fmt: skip


def local_rounds(cfg: Any, out: Path, nodes: int) -> list[tuple[str, float]]:
    """Stage and wall time of every transport round of an in-process run with ``nodes`` nodes."""
    from fedgraphrec.runtime.local import LocalTransport
    from fedgraphrec.training.protocol_learner import ProtocolLearner
    from fedgraphrec.training.trainer import Trainer

    times: list[tuple[str, float]] = []
    original = LocalTransport.round

    def timed(self: LocalTransport, stage: str, *args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return original(self, stage, *args, **kwargs)
        finally:
            times.append((stage, time.perf_counter() - t))

    LocalTransport.round = timed  # type: ignore[method-assign]
    try:
        Trainer(cfg, out, progress=False, learner=lambda c, d: ProtocolLearner(c, d, nodes=nodes)).fit()
    finally:
        LocalTransport.round = original  # type: ignore[method-assign]
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--protocol", default="gnn4fr")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--crypto", choices=["accounted", "real"], default="real")
    ap.add_argument("--json", type=Path, help="write the measurements here")
    args = ap.parse_args()

    from fedgraphrec.engines.flower.party_app import simulate
    from fedgraphrec.training.loading import load_config

    cfg = load_config(
        None,
        [],
        shared=SETTINGS,
        protocol=args.protocol,
        dataset="synthetic",
        epochs=args.epochs,
        crypto=args.crypto,
    )
    with tempfile.TemporaryDirectory() as tmp:
        local = local_rounds(cfg, Path(tmp) / "local", args.nodes)
        run = simulate(cfg, Path(tmp) / "flower", args.nodes)
        flower = [(r.op, r.seconds) for r in run.learner.traffic.rounds]
    # Flower drives a few rounds of its own (the hello that configures each node): pair the rounds
    # of the same stage in order and report the unmatched ones apart
    matcher = difflib.SequenceMatcher(a=[s for s, _ in local], b=[s for s, _ in flower], autojunk=False)
    pairs = [
        (local[blk.a + k][1], flower[blk.b + k][1])
        for blk in matcher.get_matching_blocks()
        for k in range(blk.size)
    ]
    matched_b = {blk.b + k for blk in matcher.get_matching_blocks() for k in range(blk.size)}
    extra = [flower[k] for k in range(len(flower)) if k not in matched_b]
    overhead = [f - loc for loc, f in pairs]
    result = {
        "protocol": args.protocol,
        "crypto": args.crypto,
        "nodes": args.nodes,
        "epochs": args.epochs,
        "rounds_paired": len(pairs),
        "rounds_only_on_flower": [{"stage": st, "seconds": sec} for st, sec in extra],
        "rounds_only_in_process": len(local) - len(pairs),
        "median_round_in_process_s": statistics.median(loc for loc, _ in pairs),
        "median_round_flower_s": statistics.median(f for _, f in pairs),
        "median_overhead_per_round_s": statistics.median(overhead),
        "mean_overhead_per_round_s": statistics.fmean(overhead),
        "total_ratio_paired": sum(f for _, f in pairs) / sum(loc for loc, _ in pairs),
    }
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
