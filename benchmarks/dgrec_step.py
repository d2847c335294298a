r"""DGREC: one group step on the exact fast path against the reference path, on the same groups.

For each embedding size ``d`` one Flixster population is built (the variant's settings, run seed
0) and ``--groups`` groups are sampled once (Algorithm 1 from as many centres). Each repetition
times every group on both paths, interleaved (fast then reference, the order swapped every other
group), on the same population; a group's time per path is its median over ``--repeats``
repetitions (at least 3). Printed per ``d``: the median over groups of each path's time, the ratio
of those medians and the median of the per-group ratios.

    FEDGRAPHREC_DATA=/work/shared/datasets OMP_NUM_THREADS=1 python benchmarks/dgrec_step.py \
        [--dims 16 64] [--groups 20] [--repeats 3] [--variant dgrec] [--json out.json]
    ... --quick     # smoke run: d = 16, 3 groups, 3 repetitions

Timings mean something on a quiet machine only (one thread; nothing else running).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from typing import Any

import numpy as np
import torch

from fedgraphrec.protocols.dgrec.sampling import sample_group, sampling_weights
from fedgraphrec.protocols.dgrec.settings import VARIANTS, DGRECSettings
from fedgraphrec.protocols.dgrec.trainer import DGREC
from fedgraphrec.seeding import numpy_rng
from fedgraphrec.training.dgrec import load_data


def _timed(rec: DGREC, path: str, links: dict[int, set[int]], seed: int) -> float:
    """Seconds of one group step of ``links`` on ``path`` (the population's settings switched to it)."""
    rec.s = dataclasses.replace(rec.s, step_path="auto" if path == "fast" else "reference")
    assert rec.path == path
    rng = numpy_rng(seed, "bench")
    t0 = time.perf_counter()
    rec.group_step(links, rng)
    return time.perf_counter() - t0


def bench(dataset: str, variant: str, d: int, groups: int, repeats: int) -> dict[str, Any]:
    """Both paths' times on ``groups`` groups of one population at embedding size ``d``."""
    data = load_data(dataset)
    s = DGRECSettings.for_variant(variant, d=d)
    t0 = time.perf_counter()
    rec = DGREC(data.interactions.train, data.social, data.tags, s, seed=0)
    build = time.perf_counter() - t0
    rng = numpy_rng(0, "bench", "groups")
    active = np.flatnonzero(rec.deg > 0)
    weights = sampling_weights(rec.loss, rec.count)
    sampled = [
        sample_group(rec.social, int(c), s.hops, s.fanout, weights, rng)
        for c in rng.choice(active, size=groups, replace=False)
    ]
    times: dict[str, list[list[float]]] = {"fast": [[] for _ in sampled], "reference": [[] for _ in sampled]}
    for rep in range(repeats):
        for g, links in enumerate(sampled):
            order = ("fast", "reference") if (g + rep) % 2 == 0 else ("reference", "fast")
            for path in order:
                times[path][g].append(_timed(rec, path, links, rep * groups + g))
    per = {path: [statistics.median(ts) for ts in t] for path, t in times.items()}
    med = {path: statistics.median(v) for path, v in per.items()}
    ratios = [r / f for f, r in zip(per["fast"], per["reference"], strict=True)]
    return {
        "dataset": dataset,
        "variant": variant,
        "d": d,
        "groups": groups,
        "repeats": repeats,
        "group_sizes": [len(links) for links in sampled],
        "build_seconds": build,
        "median_seconds": med,
        "ratio_of_medians": med["reference"] / med["fast"],
        "median_ratio": statistics.median(ratios),
        "per_group_seconds": per,
    }


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="flixster")
    ap.add_argument("--variant", default="dgrec", choices=sorted(VARIANTS))
    ap.add_argument("--dims", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--groups", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="smoke run: d = 16, 3 groups, 3 repetitions")
    ap.add_argument("--json", default="")
    a = ap.parse_args(argv)
    if a.quick:
        a.dims, a.groups, a.repeats = [16], 3, 3
    if a.repeats < 3 or a.groups < 1:
        ap.error("--repeats must be >= 3 (medians of at least three) and --groups >= 1")
    torch.set_num_threads(1)
    results = []
    for d in a.dims:
        r = bench(a.dataset, a.variant, d, a.groups, a.repeats)
        results.append(r)
        med = r["median_seconds"]
        print(
            f"{a.dataset} {a.variant} d={d}: {a.groups} groups (median |U| "
            f"{statistics.median(r['group_sizes']):.0f}) x {a.repeats} repeats: "
            f"fast {1e3 * med['fast']:.1f} ms, reference {1e3 * med['reference']:.1f} ms per group step; "
            f"ratio of medians {r['ratio_of_medians']:.1f}x, median ratio {r['median_ratio']:.1f}x",
            flush=True,
        )
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
