r"""LP-GCN's minibatch under two versions of the library in one process: the working tree against a base.

Separate invocations of ``lpgcn_epoch.py`` cannot resolve a change of a few percent: on a shared
host the same code's ratio to the centralized epoch varies by more than that from one invocation to
the next (issue #33, ``results/benchmarks/lpgcn_ml100k_profile.md``, eighth round). Here both
versions train on the same minibatches in the same process, interleaved in blocks whose order
alternates by block and by pass (``lpgcn_epoch.interleaved_passes``), so the host's drift hits both
alike; a centralized learner runs alongside for scale.

The base revision's ``src/`` is extracted with ``git archive`` into a temporary folder and imported
as a second copy of ``fedgraphrec``. Each copy's modules are swapped into ``sys.modules`` for each
block of its turns, outside the timed steps, so every import either copy makes at run time finds
its own modules. Both learners are built from the same configuration and seed; in ``accounted`` mode the
report says whether they end with the same tables (a change meant to keep every number must).

``--null`` runs the working tree on both sides: the harness's own spread (which learner was built
second, where its memory landed), the yardstick for a measured difference.

Examples::

    python benchmarks/lpgcn_ab.py --base HEAD --dataset ml-100k --layers 5 --dim 20 --lr 0.01 \
        --reg 1e-3 --init-std 1 --passes 10
    python benchmarks/lpgcn_ab.py --null --dataset ml-100k --layers 5 --dim 20 --lr 0.01 \
        --reg 1e-3 --init-std 1 --crypto real --passes 10
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from lpgcn_epoch import (
    dataset_options,
    emit,
    machine,
    model_options,
    model_settings,
    paired_passes,
    paired_ratios,
)

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "fedgraphrec"
_API = {
    "load_dataset": "fedgraphrec.data.registry",
    "CentralSettings": "fedgraphrec.protocols.central",
    "LPGCNSettings": "fedgraphrec.protocols.lpgcn.settings",
    "CentralLearner": "fedgraphrec.training.central",
    "TrainConfig": "fedgraphrec.training.config",
    "ProtocolLearner": "fedgraphrec.training.protocol_learner",
    "BPRSampler": "fedgraphrec.training.sampler",
}


def _ours(name: str) -> bool:
    return name == PACKAGE or name.startswith(PACKAGE + ".")


class Tree:
    """One copy of the library, imported from ``src``, with the modules it has loaded.

    Raises:
        RuntimeError: if an import resolved to another copy (a path earlier on ``sys.path``).
    """

    def __init__(self, src: Path, label: str) -> None:
        self.src, self.label = src.resolve(), label
        self.modules: dict[str, ModuleType] = {}
        with self.active():
            self.api = {name: getattr(importlib.import_module(mod), name) for name, mod in _API.items()}
            for name in list(sys.modules):
                file = getattr(sys.modules[name], "__file__", None) if _ours(name) else None
                if file is not None and not Path(file).resolve().is_relative_to(self.src):
                    raise RuntimeError(f"{label}: {name} was imported from {file}, not from {self.src}")

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """This copy's modules in ``sys.modules`` (and its ``src`` first on the path) while inside."""
        saved = {k: sys.modules.pop(k) for k in [k for k in sys.modules if _ours(k)]}
        sys.modules.update(self.modules)
        sys.path.insert(0, str(self.src))
        importlib.invalidate_caches()
        try:
            yield
        finally:
            sys.path.remove(str(self.src))
            self.modules = {k: sys.modules.pop(k) for k in [k for k in sys.modules if _ours(k)]}
            sys.modules.update(saved)


def extract(rev: str, into: Path) -> tuple[Path, str]:
    """``src/`` of revision ``rev`` under ``into`` (``git archive``), and the commit it resolved to."""
    sha = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.strip()  # fmt: skip
    tar = subprocess.run(["git", "archive", sha, "src"], cwd=ROOT, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as t:
        t.extractall(into, filter="data")
    return into / "src", sha


def learner(tree: Tree, args: argparse.Namespace, central: bool = False) -> tuple[Any, Any]:
    """A learner of ``tree`` (LP-GCN, or the centralized one) and its dataset, from the options."""
    a = tree.api
    with tree.active():
        data = a["load_dataset"](args.dataset, **dataset_options(args))
        model = model_settings(args)
        if central:
            cfg = a["TrainConfig"](protocol="central", dataset=args.dataset, seed=args.seed,
                                   crypto="accounted", settings=a["CentralSettings"](**model))  # fmt: skip
            return a["CentralLearner"](cfg, data), data
        cfg = a["TrainConfig"](protocol="lpgcn", dataset=args.dataset, seed=args.seed, crypto=args.crypto,
                               settings=a["LPGCNSettings"](**model, alpha=0))  # fmt: skip
        return a["ProtocolLearner"](cfg, data), data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="HEAD", help="the revision the working tree is measured against")
    ap.add_argument("--null", action="store_true", help="working tree on both sides: the harness's spread")
    ap.add_argument("--dataset", default="ml-100k")
    ap.add_argument("--users", type=int, default=300, help="synthetic dataset: users (items: twice)")
    model_options(ap, layers=5, dim=20, lr=0.01, reg=1e-3, init_std=1.0)
    ap.add_argument("--crypto", choices=["accounted", "real"], default="accounted")
    ap.add_argument("--block", type=int, default=2, help="minibatches per interleaved block")
    ap.add_argument("--passes", type=int, default=10, help="passes over the epoch's minibatches")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    work = Tree(ROOT / "src", "working tree")
    with tempfile.TemporaryDirectory() as tmp:
        if args.null:
            base, sha = Tree(ROOT / "src", "working tree (second copy)"), "working tree"
        else:
            src, sha = extract(args.base, Path(tmp))
            base = Tree(src, f"base {args.base}")
        # built base, work, work, base: the learner built first runs ≈ 1-2 % faster (measured with
        # --null), so each version gets one early and one late learner
        old, _ = learner(base, args)
        new, data = learner(work, args)
        new2, _ = learner(work, args)
        old2, _ = learner(base, args)
        central, _ = learner(work, args, central=True)
        with work.active():
            batches = list(work.api["BPRSampler"](data.train, args.seed, "users").batches(0, args.batch_size))
        learners = {"base": (base, old), "work": (work, new), "work#2": (work, new2), "base#2": (base, old2),
                    "central": (work, central)}  # fmt: skip
        sides = [(name, lambda b, fed=fed: fed.train_batch(*b)) for name, (_, fed) in learners.items()]
        enter = {name: tree.active for name, (tree, _) in learners.items()}  # swapped once a block, untimed
        passes, times = paired_passes(sides, batches, args.block, args.passes, enter, ("base", "work"))
        same = None
        if args.crypto == "accounted":  # a real run draws its own tables on each side
            tables = []
            for tree, fed in ((base, old), (work, new), (work, new2), (base, old2)):
                with tree.active():
                    tables.append(fed.tables())
            a = tables[0]
            same = all(t.keys() == a.keys() and all(torch.equal(t[k], a[k]) for k in a) for t in tables)
    report = {
        "base": args.base if not args.null else None,
        "base_commit": sha,
        "config": vars(args) | {"json": str(args.json) if args.json else None},
        "minibatches": len(batches),
        **paired_ratios(passes, times, "work", "base"),
        "same_tables": same,
        "machine": machine(),
    }
    summary = (f"work / base: {report['work_over_base_median']:.4f} (median minibatch), "
               f"{report['work_over_base_total']:.4f} (all passes)")  # fmt: skip
    emit(report, 26, summary, args.json)


if __name__ == "__main__":
    main()
