"""What LP-GCN's bookkeeping costs on a small graph, and where the rest of its epoch goes.

A diagnostic for issue #33, not a mode of the library. Three sides consume the same minibatches,
interleaved by block and alternating by pass as in ``lpgcn_epoch.py``: the centralized LightGCN
epoch, LP-GCN (``accounted``) as it runs, and a second LP-GCN learner during whose turns the
ledger's booking (``Ledger.record``), the node's checks of the parts it receives against its own
expectation (``check_parts``, ``check_content``) and the transport's payload check are replaced by
no-ops. The library never runs without them; the third side is the floor that making them cheaper
could reach, everything else (the party programs' arithmetic, routing, lookups) left as it is.
Both LP-GCN learners must end with the same tables (the checks change no number); the report says so.

Then ``--repeats`` more passes time the layers of the LP-GCN epoch, each beside a centralized pass
(``breakdown``): the client programs' stage bodies (their arithmetic, lookups and the parts they
build), the node endpoint around them (stage order and part checks; sealing in ``real`` mode), the
transport around the endpoint (booking, payload checks, delivery) and the server program (routing,
synchronisation, the negatives' answers, its own rows), each as a multiple of the centralized epoch.
The stage bodies alone bound from below what any runtime could reach with the programs as they are.

Example (the issue's ML-100K configuration)::

    python benchmarks/lpgcn_bookkeeping.py --dataset ml-100k --layers 5 --dim 20 --lr 0.01 \
        --reg 1e-3 --init-std 1 --block 2 --repeats 3
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

import fedgraphrec.runtime.endpoint as endpoint
from fedgraphrec.data.registry import load_dataset
from fedgraphrec.protocols.base import ClientProgram
from fedgraphrec.protocols.central import CentralSettings
from fedgraphrec.protocols.lpgcn.settings import LPGCNSettings
from fedgraphrec.runtime.ledger import Ledger
from fedgraphrec.runtime.local import LocalTransport
from fedgraphrec.runtime.transport import Transport
from fedgraphrec.training.central import CentralLearner
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.protocol_learner import ProtocolLearner
from fedgraphrec.training.sampler import BPRSampler

# the benchmark beside this file
from lpgcn_epoch import Batch, Side, interleaved_passes, machine, machine_line, model_options, model_settings


def _skip(*args: Any, **kwargs: Any) -> None:
    return None


@contextlib.contextmanager
def patched(changes: Sequence[tuple[object, str, object]]) -> Iterator[None]:
    """Set each ``(owner, name)`` attribute to its new value, and restore the old ones on exit."""
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in changes]
    for owner, name, value in changes:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


BOOKKEEPING = ((Ledger, "record"), (endpoint, "check_parts"), (endpoint, "check_content"),
               (Transport, "_check_payload"))  # fmt: skip
"""What :func:`without_bookkeeping` turns into no-ops: the ledger's booking and the checks of parts."""


def without_bookkeeping() -> contextlib.AbstractContextManager[None]:
    """The ledger's booking and the node's part checks as no-ops, restored on exit."""
    return patched([(owner, name, _skip) for owner, name in BOOKKEEPING])


LAYERS = (
    (ClientProgram, "handle", "stage_bodies"),
    (endpoint.NodeEndpoint, "handle", "endpoint"),
    (LocalTransport, "round", "transport"),
)
"""The nested calls timed: a transport round holds the endpoints' handling, which holds the stage bodies."""


def timed_layers(spent: dict[str, float]) -> contextlib.AbstractContextManager[None]:
    """Add the seconds spent in each of :data:`LAYERS` to ``spent``, restored on exit."""

    def timer(f: Callable[..., Any], key: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                spent[key] += time.perf_counter() - t

        return timed

    return patched([(cls, name, timer(getattr(cls, name), key)) for cls, name, key in LAYERS])


def breakdown(
    step_central: Callable[[Batch], object], fed: ProtocolLearner, batches: list[Batch], repeats: int
) -> dict[str, float]:
    """Median share of each layer of the LP-GCN epoch, as a multiple of the centralized epoch beside it."""
    ratios: dict[str, list[float]] = {}
    for _ in range(repeats):
        t = time.perf_counter()
        for b in batches:
            step_central(b)
        base = time.perf_counter() - t
        spent = dict.fromkeys(("stage_bodies", "endpoint", "transport"), 0.0)
        t = time.perf_counter()
        with timed_layers(spent):
            for b in batches:
                fed.train_batch(*b)
        epoch = time.perf_counter() - t
        layers = {
            "client_stage_bodies": spent["stage_bodies"],
            "node_endpoint": spent["endpoint"] - spent["stage_bodies"],
            "transport": spent["transport"] - spent["endpoint"],
            "server_program": epoch - spent["transport"],
            "lpgcn_epoch": epoch,
        }
        for key, seconds in layers.items():
            ratios.setdefault(key, []).append(seconds / base)
    return {key: statistics.median(v) for key, v in ratios.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="ml-100k")
    model_options(ap, layers=5, dim=20, lr=0.01, reg=1e-3, init_std=1.0)
    ap.add_argument("--block", type=int, default=2, help="batches per interleaved block")
    ap.add_argument("--repeats", type=int, default=3, help="timed passes over the batches (medians)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    data = load_dataset(args.dataset)
    model = model_settings(args)
    cfg = TrainConfig(protocol="lpgcn", dataset=args.dataset, seed=args.seed, crypto="accounted",
                      settings=LPGCNSettings(**model, alpha=0))  # type: ignore[arg-type]  # fmt: skip
    oracle = TrainConfig(protocol="central", dataset=args.dataset, seed=args.seed, crypto="accounted",
                         settings=CentralSettings(**model))  # type: ignore[arg-type]  # fmt: skip
    central = CentralLearner(oracle, data)
    fed, bare = ProtocolLearner(cfg, data), ProtocolLearner(cfg, data)
    batches = list(BPRSampler(data.train, args.seed, "users").batches(0, args.batch_size))

    def run_bare(b: Batch) -> None:
        with without_bookkeeping():
            bare.train_batch(*b)

    sides: list[Side] = [
        ("central", lambda b: central.train_batch(*b)),
        ("lpgcn", lambda b: fed.train_batch(*b)),
        ("lpgcn_bare", run_bare),
    ]
    passes, _ = interleaved_passes(sides, batches, args.block, args.repeats)
    a, b = fed.tables(), bare.tables()
    same = all(torch.equal(a[k], b[k]) for k in a)
    layers = breakdown(sides[0][1], fed, batches, args.repeats)
    report = {
        "dataset": args.dataset,
        "config": vars(args) | {"json": str(args.json) if args.json else None},
        "repeats": args.repeats,
        "central_epoch_seconds": statistics.median(p["central"] for p in passes),
        "lpgcn_ratio": statistics.median(p["lpgcn"] / p["central"] for p in passes),
        "lpgcn_without_bookkeeping_ratio": statistics.median(p["lpgcn_bare"] / p["central"] for p in passes),
        "bookkeeping_share_of_lpgcn": statistics.median(1 - p["lpgcn_bare"] / p["lpgcn"] for p in passes),
        "passes": passes,
        "breakdown_over_central_epoch": layers,
        "same_tables": same,
        "machine": machine(),  # with the load at the end
    }
    for k, v in report.items():
        if k not in ("config", "passes", "breakdown_over_central_epoch", "machine"):
            print(f"{k:>34}: {v:.4g}" if isinstance(v, float) else f"{k:>34}: {v}")
    for k, v in layers.items():
        print(f"{k + ' / central epoch':>34}: {v:.3f}")
    print(machine_line(report["machine"]))
    if not same:
        raise SystemExit(
            "the learner without bookkeeping ended with other tables: the stubs changed a number"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
