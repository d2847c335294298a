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
build), the node endpoint around them (stage order and part checks; with ``--crypto real`` the
sealing and opening too, also shown alone as ``node_sealing``), the
transport around the endpoint (booking, payload checks, delivery) and the server program (routing,
synchronisation, the negatives' answers, its own rows), each as a multiple of the centralized epoch.
The stage bodies alone bound from below what any runtime could reach with the programs as they are.
Inside the stage bodies, the same passes time the model's arithmetic (``client_arithmetic``): the
sparse products of Eqs. 7, 8 and 18-27 (every ``@`` whose left operand is a CSR operator), the local
BPR and Adam, the work the centralized learner does too. The rest of the bodies
(``client_protocol_work``: the batch's id lookups, the gradient messages and their tokens, the
parts) is what the protocol adds on the clients' side.

Example (the issue's ML-100K configuration)::

    python benchmarks/lpgcn_bookkeeping.py --dataset ml-100k --layers 5 --dim 20 --lr 0.01 \
        --reg 1e-3 --init-std 1 --block 2 --repeats 3 [--crypto real]
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

import fedgraphrec.protocols.lpgcn.client_loss as client_loss
import fedgraphrec.protocols.lpgcn.client_train as client_train
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
    (endpoint.NodeEndpoint, "_seal", "sealing"),
    (endpoint.NodeEndpoint, "_open", "sealing"),
    (LocalTransport, "round", "transport"),
)
"""The nested calls timed: a transport round holds the endpoints' handling, which holds the stage
bodies and the sealing and opening of the parts (a no-op pass-through in ``accounted`` mode)."""


ARITHMETIC = ((client_loss, "local_bpr", "bpr"), (client_train, "adam_step", "adam"))
"""The model's arithmetic the client programs call by name (the products are timed at ``@``)."""


def _timer(f: Callable[..., Any], spent: dict[str, float], key: str) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return f(*args, **kwargs)
        finally:
            spent[key] += time.perf_counter() - t

    return timed


@contextlib.contextmanager
def timed_layers(spent: dict[str, float]) -> Iterator[None]:
    """Add the seconds spent in :data:`LAYERS`, :data:`ARITHMETIC` and the sparse products to ``spent``."""
    changes = [(cls, name, _timer(getattr(cls, name), spent, key)) for cls, name, key in LAYERS]
    changes += [(mod, name, _timer(getattr(mod, name), spent, key)) for mod, name, key in ARITHMETIC]
    with patched(changes), timed_sparse_products(spent):
        yield


@contextlib.contextmanager
def timed_sparse_products(spent: dict[str, float]) -> Iterator[None]:
    """Add the seconds of every ``csr @ x`` to ``spent["products"]`` (``Tensor.__matmul__`` wrapped)."""
    matmul = torch.Tensor.__matmul__
    sparse = _timer(matmul, spent, "products")

    def timed(self: torch.Tensor, other: Any) -> Any:
        return sparse(self, other) if self.layout is torch.sparse_csr else matmul(self, other)

    own = torch.Tensor.__dict__.get("__matmul__")  # None: the operator is inherited from the C base
    torch.Tensor.__matmul__ = timed  # type: ignore[method-assign]
    try:
        yield
    finally:
        if own is None:
            del torch.Tensor.__matmul__
        else:
            torch.Tensor.__matmul__ = own  # type: ignore[method-assign]


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
        keys = ("stage_bodies", "endpoint", "sealing", "transport", "products", "bpr", "adam")
        spent = dict.fromkeys(keys, 0.0)
        t = time.perf_counter()
        with timed_layers(spent):
            for b in batches:
                fed.train_batch(*b)
        epoch = time.perf_counter() - t
        arithmetic = spent["products"] + spent["bpr"] + spent["adam"]
        layers = {
            "client_stage_bodies": spent["stage_bodies"],
            "client_arithmetic": arithmetic,
            "client_sparse_products": spent["products"],
            "client_local_bpr": spent["bpr"],
            "client_adam": spent["adam"],
            "client_protocol_work": spent["stage_bodies"] - arithmetic,
            "node_endpoint": spent["endpoint"] - spent["stage_bodies"],
            "node_sealing": spent["sealing"],
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
    ap.add_argument("--crypto", choices=("accounted", "real"), default="accounted",
                    help="both LP-GCN learners' mode (real: seeded, so the tables compare)")  # fmt: skip
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    data = load_dataset(args.dataset)
    model = model_settings(args)
    cfg = TrainConfig(protocol="lpgcn", dataset=args.dataset, seed=args.seed, crypto=args.crypto,
                      reproducible=True if args.crypto == "real" else None,
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
