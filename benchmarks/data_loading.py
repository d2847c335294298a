"""Time the data layer: synthetic generation and loading the real datasets (not a test: timings).

    FEDGRAPHREC_DATA=../shared/datasets python benchmarks/data_loading.py [--repeat 3]

Prints the median seconds of each load over ``--repeat`` runs (the first load of a real dataset
fills the cache, so it is reported apart).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from fedgraphrec.data.registry import load_dataset
from fedgraphrec.data.synthetic import synthetic_interactions, synthetic_ratings


def _median_seconds(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--datasets", nargs="*", default=["gowalla", "yelp2018", "epinions"])
    args = parser.parse_args()
    t_int = _median_seconds(lambda: synthetic_interactions(2000, 3000, seed=0), args.repeat)
    t_rat = _median_seconds(lambda: synthetic_ratings(2000, 3000, seed=0), args.repeat)
    print(f"synthetic_interactions(2000, 3000): {t_int:.3f} s")
    print(f"synthetic_ratings(2000, 3000):      {t_rat:.3f} s")
    for name in args.datasets:
        start = time.perf_counter()
        load_dataset(name)
        first = time.perf_counter() - start
        again = _median_seconds(lambda n=name: load_dataset(n), args.repeat)
        print(f"load_dataset({name!r}): first {first:.2f} s, then median {again:.2f} s")


if __name__ == "__main__":
    main()
