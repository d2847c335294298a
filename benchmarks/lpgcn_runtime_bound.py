r"""The most a cheaper runtime could save LP-GCN: the same minibatches with its per-part work stubbed out.

Issue #33 asks for LP-GCN's ML-100K ``accounted`` epoch within 1.5x the centralized one. Beyond the
model's arithmetic, every stage of a minibatch pays the runtime's work on each part it carries:

* ``booking``: the transport books every part into the ledger (``Transport._book``) after checking
  its payload is present (``Transport._check_payload``);
* ``checks``: the node endpoint holds each stage to the program's stage order, asks the program what
  it expects and checks every part's labels and content against it (``NodeEndpoint.handle``);
* ``validation``: a part checks its own fields, and makes its id arrays int64, when it is made
  (``Part.__post_init__``).

Four LP-GCN learners of the same configuration and seed, two *full* and two *bounded*, and a
centralized one train on the same minibatches in one process, interleaved as in ``lpgcn_ab.py``.
On the bounded ones the chosen layers are replaced by stubs that do nothing, only while they run
(the stage counter a program reads is still kept, so they compute the same numbers). The ratio
bounded / full is the most a redesign that made those layers free could win. It is a measuring
device and nothing else: the stubs drop checks the library never drops, so they live in this
script and ``accounted`` mode only (they do not open or seal). ``lpgcn_bookkeeping.py``'s floor
no-ops a subset inside two of these layers (the ledger's record call and the part checks) on one
learner; this script stubs the whole layers, each alone if asked, on two learners against two.

Example (issue #33's configuration)::

    python benchmarks/lpgcn_runtime_bound.py --dataset ml-100k --layers 5 --dim 20 --lr 0.01 \
        --reg 1e-3 --init-std 1 --passes 10 [--skip booking checks validation]
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from fedgraphrec.data.registry import load_dataset
from fedgraphrec.data.types import Interactions
from fedgraphrec.protocols.central import CentralSettings
from fedgraphrec.protocols.lpgcn.settings import LPGCNSettings
from fedgraphrec.runtime.endpoint import NodeEndpoint
from fedgraphrec.runtime.message import Message
from fedgraphrec.runtime.part import Part
from fedgraphrec.runtime.transport import Transport
from fedgraphrec.training.central import CentralLearner
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.protocol_learner import ProtocolLearner
from fedgraphrec.training.sampler import BPRSampler
from lpgcn_bookkeeping import patched
from lpgcn_epoch import (
    Batch,
    Side,
    dataset_options,
    emit,
    machine,
    model_options,
    model_settings,
    paired_passes,
    paired_ratios,
)

LAYERS = ("booking", "checks", "validation")


def _nothing(*_: object) -> None:
    return None


def _unchecked_handle(self: NodeEndpoint, node: Any, stage: str, step: int, request: Message) -> Message:
    """``NodeEndpoint.handle`` without its checks: only the stage counter the program reads."""
    last_step, counts = self.__dict__.get("_bound_flow", (None, {}))
    if last_step != step:  # a new step: every stage's count starts again (as ``FlowState`` does)
        counts = {}
        self.__dict__["_bound_flow"] = (step, counts)
    node.occurrence = counts.get(stage, 0)  # what ``begin_stage`` records before the program runs
    counts[stage] = node.occurrence + 1
    reply: Message = node.handle(stage, step, request)
    return reply


def _trainer(learner: ProtocolLearner | CentralLearner) -> Callable[[Batch], object]:
    return lambda b: learner.train_batch(*b)


def _progress(fed: ProtocolLearner) -> tuple[int, list[int | None]]:
    """Messages booked so far and the step each node's endpoint last checked (what the stubs skip)."""
    endpoints = fed.transport.endpoints.values()  # type: ignore[attr-defined]
    return fed.net.ledger.total_messages(), [e.flow.step for e in endpoints]


def _stubs(layers: list[str]) -> list[tuple[type, str, Callable[..., Any]]]:
    out: list[tuple[type, str, Callable[..., Any]]] = []
    if "booking" in layers:
        out += [(Transport, "_book", _nothing), (Transport, "_check_payload", _nothing)]
    if "checks" in layers:
        out.append((NodeEndpoint, "handle", _unchecked_handle))
    if "validation" in layers:
        out.append((Part, "__post_init__", _nothing))
    return out


def stubbed(layers: list[str]) -> contextlib.AbstractContextManager[None]:
    """The chosen runtime layers replaced by stubs while inside (class attributes, restored after)."""
    return patched(_stubs(layers))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="ml-100k")
    ap.add_argument("--users", type=int, default=300, help="synthetic dataset: users (items: twice)")
    model_options(ap, layers=5, dim=20, lr=0.01, reg=1e-3, init_std=1.0)
    ap.add_argument("--skip", nargs="+", choices=LAYERS, default=list(LAYERS), help="layers stubbed out")
    ap.add_argument("--block", type=int, default=2, help="minibatches per interleaved block")
    ap.add_argument("--passes", type=int, default=10, help="passes over the epoch's minibatches")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    data = load_dataset(args.dataset, **dataset_options(args))  # type: ignore[arg-type]
    assert isinstance(data, Interactions), "LP-GCN trains on implicit interactions"
    model = model_settings(args)
    cfg = TrainConfig(protocol="lpgcn", dataset=args.dataset, seed=args.seed, crypto="accounted",
                      settings=LPGCNSettings(**model, alpha=0))  # type: ignore[arg-type]  # fmt: skip
    oracle = TrainConfig(protocol="central", dataset=args.dataset, seed=args.seed, crypto="accounted",
                         settings=CentralSettings(**model))  # type: ignore[arg-type]  # fmt: skip
    # built full, bounded, bounded, full: one early and one late learner of each kind (paired_passes)
    learners = {name: ProtocolLearner(cfg, data) for name in ("full", "bounded", "bounded#2", "full#2")}
    central = CentralLearner(oracle, data)
    batches = list(BPRSampler(data.train, args.seed, "users").batches(0, args.batch_size))
    enter: dict[str, Callable[[], contextlib.AbstractContextManager[object]]] = {
        name: (lambda: stubbed(args.skip)) if name.startswith("bounded") else contextlib.nullcontext
        for name in learners
    }
    enter["central"] = contextlib.nullcontext
    before = {name: _progress(fed) for name, fed in learners.items()}  # after set-up, before any minibatch
    sides: list[Side] = [(name, _trainer(fed)) for name, fed in learners.items()]
    sides.append(("central", _trainer(central)))
    passes, times = paired_passes(sides, batches, args.block, args.passes, enter, ("full", "bounded"))
    # a stub on a method the run never calls would change nothing: the stubbed layers did no work
    moved = {name: [a != b for a, b in zip(before[name], _progress(fed), strict=True)]
             for name, fed in learners.items()}  # fmt: skip
    first, *rest = (fed.tables() for fed in learners.values())
    same = all(t.keys() == first.keys() and all(torch.equal(t[k], first[k]) for k in t) for t in rest)
    report = {
        "skipped": args.skip,
        "config": vars(args) | {"json": str(args.json) if args.json else None},
        "minibatches": len(batches),
        **paired_ratios(passes, times, "bounded", "full"),
        "same_tables": same,
        "booked_in_training": {name: m[0] for name, m in moved.items()},
        "checked_in_training": {name: m[1] for name, m in moved.items()},
        "machine": machine(),
    }
    summary = (f"bounded / full: {report['bounded_over_full_median']:.4f} (median minibatch), "
               f"{report['bounded_over_full_total']:.4f} (all passes); over central: full "
               f"{report['full_over_central_total']:.3f}x, "
               f"bounded {report['bounded_over_central_total']:.3f}x")  # fmt: skip
    emit(report, 28, summary, args.json)


if __name__ == "__main__":
    main()
