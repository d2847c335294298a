"""Where a minibatch's CPU time goes by *kind* of code: PyTorch's kernels, numpy, the allocator, Python.

A diagnostic for issue #33, not a mode of the library. ``lpgcn_bookkeeping.py`` splits LP-GCN's
epoch by what the code does (stage bodies, server, transport, checks); this script splits it by
where the CPU is when a sample is taken. For each side (the centralized LightGCN learner, LP-GCN in
``accounted`` or ``real`` mode; ``lpgcn_epoch.py``'s model options, its ML-100K run by default), it
starts a child process that trains on ML-100K's minibatches in a loop. It then attaches
``py-spy record --native`` (``pip install py-spy``) and classifies each sample of the training loop
by the library its innermost frame is in:

- PyTorch's native code (``libtorch*``, ``libc10``, ``libgomp``);
- numpy's compiled code;
- the C library (``malloc``, ``memcpy``, page handling);
- the cipher (``cryptography``'s Rust library);
- Python code (the interpreter running a ``.py`` line).

Multiplying a side's shares by its minibatch time gives milliseconds per kind, so two sides can
be compared kind by kind. The child times its minibatches before the profiler attaches, because
py-spy pauses it for each sample. One process runs at a time, and the machine must be otherwise
quiet. The shares come from samples, so expect ±1-2 points.

Example::

    OMP_NUM_THREADS=1 FEDGRAPHREC_DATA=../shared/datasets python benchmarks/native_split.py \
        --side central --side accounted --side real --seconds 10
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

# the benchmark beside this file
from lpgcn_epoch import machine, model_options, model_settings

KINDS = ("torch", "numpy", "libc", "crypto", "python", "other native")
_LIB = re.compile(r"\(([^()]*\.so[^()]*)\)$")


def kind_of(frame: str) -> str:
    """The kind of code a py-spy frame (``name (file:line)`` or ``symbol (library.so)``) is in."""
    m = _LIB.search(frame)
    if m is None:
        return "python"
    lib = m.group(1)
    if any(x in lib for x in ("torch", "c10", "gomp")):
        return "torch"
    if "numpy" in lib:
        return "numpy"
    if any(x in lib for x in ("libc.so", "libm.so", "libstdc++", "ld-linux")):
        return "libc"
    if "cryptography" in lib or "_rust" in lib:
        return "crypto"
    if Path(lib).name.startswith("libpython"):  # not a "cpython-311" extension module
        return "python"
    return "other native"


def split(raw: str, within: str = "train_batch") -> tuple[dict[str, float], int]:
    """Shares of each kind among the samples whose stack passes through ``within``; the sample count."""
    counts: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, n = line.rstrip().rpartition(" ")
        if not stack or within not in stack:
            continue
        counts[kind_of(stack.split(";")[-1])] += int(n)
    total = sum(counts.values())
    return {k: counts[k] / total if total else 0.0 for k in KINDS}, total


def loop(args: argparse.Namespace) -> None:
    """The child: after READY, train side ``args.loop`` on ML-100K minibatches, timed, then while sampled."""
    from fedgraphrec.data.registry import load_dataset
    from fedgraphrec.protocols.central import CentralSettings
    from fedgraphrec.protocols.lpgcn.settings import LPGCNSettings
    from fedgraphrec.training.central import CentralLearner
    from fedgraphrec.training.config import TrainConfig
    from fedgraphrec.training.protocol_learner import ProtocolLearner
    from fedgraphrec.training.sampler import BPRSampler

    side, seconds = args.loop, args.seconds
    data = load_dataset("ml-100k")
    model = model_settings(args)
    learner: CentralLearner | ProtocolLearner
    if side == "central":
        central = CentralSettings(**model)  # type: ignore[arg-type]
        learner = CentralLearner(
            TrainConfig(protocol="central", dataset="ml-100k", seed=args.seed, settings=central), data
        )
    else:
        settings = LPGCNSettings(**model)  # type: ignore[arg-type]
        learner = ProtocolLearner(
            TrainConfig(protocol="lpgcn", dataset="ml-100k", seed=args.seed, crypto=side, settings=settings),
            data,
        )
    batches = list(BPRSampler(data.train, args.seed, "users").batches(0, args.batch_size))
    for b in batches[:3]:  # operators and caches built before the profiler attaches
        learner.train_batch(*b)
    print("READY", flush=True)

    def run(seconds: float) -> float:
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for b in batches:
                learner.train_batch(*b)
                n += 1
        return (time.perf_counter() - t0) / n

    # timed without the profiler (py-spy pauses the process for every sample), then sampled
    print(json.dumps({"ms_per_batch": run(seconds) * 1e3}), flush=True)
    run(seconds + 4)


def profile(side: str, seconds: float, rate: int, py_spy: str) -> dict[str, object]:
    """One child for ``side``: its minibatch time over ``seconds``, then ``seconds`` sampled."""
    argv = [sys.executable, __file__, *sys.argv[1:], "--loop", side]  # the same model options and seconds
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    try:
        if child.stdout.readline().strip() != "READY":
            raise RuntimeError(f"{side}: the training child did not start")
        ms = float(json.loads(child.stdout.readline())["ms_per_batch"])
        time.sleep(1)
        with tempfile.TemporaryDirectory() as tmp:
            raw = Path(tmp) / "raw.txt"
            cmd = [py_spy, "record", "--native", "--rate", str(rate), "--duration", str(int(seconds)),
                   "--format", "raw", "--output", str(raw), "--pid", str(child.pid)]  # fmt: skip
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode:
                raise RuntimeError(f"{side}: py-spy failed ({done.returncode}): {done.stderr.strip()}")
            shares, samples = split(raw.read_text())
        child.wait()
    finally:
        child.kill()
    return {"side": side, "ms_per_batch": ms, "samples": samples, "shares": shares}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--side", action="append", choices=["central", "accounted", "real"])
    ap.add_argument("--seconds", type=float, default=10.0, help="sampled seconds per side")
    ap.add_argument("--rate", type=int, default=400, help="py-spy samples a second")
    ap.add_argument("--loop", choices=["central", "accounted", "real"], help=argparse.SUPPRESS)
    model_options(ap, layers=5, dim=20, lr=0.01, reg=1e-3, init_std=1.0)  # lpgcn_epoch.py's ML-100K run
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.loop:
        loop(args)
        return
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(py_spy).exists():
        sys.exit("native_split.py needs py-spy: pip install py-spy")
    rows = [profile(side, args.seconds, args.rate, py_spy) for side in args.side or ["central", "accounted"]]
    print("| side | ms a minibatch | samples | " + " | ".join(KINDS) + " |")
    print("|---|---|---|" + "---|" * len(KINDS))
    for r in rows:
        shares, ms = r["shares"], float(r["ms_per_batch"])  # type: ignore[arg-type]
        cells = [f"{shares[k] * 100:.1f} % ({shares[k] * ms:.2f} ms)" for k in KINDS]  # type: ignore[index]
        print(f"| {r['side']} | {ms:.2f} | {r['samples']} | " + " | ".join(cells) + " |")
    if args.json:
        report = {
            "command": "python " + " ".join(sys.argv),
            "machine": machine(),
            "finished_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
            "rows": rows,
            "config": vars(args) | {"json": str(args.json)},
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
