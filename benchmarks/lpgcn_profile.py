"""cProfile one ML-100K LP-GCN epoch (L = 5, d = 20) as ``benchmarks/lpgcn_epoch.py`` configures it.

One thread; the first minibatch (operators and caches built) is run before profiling starts.
Prints the top entries by self time and by cumulative time and writes the raw profile.

Example::

    OMP_NUM_THREADS=1 FEDGRAPHREC_DATA=... python benchmarks/lpgcn_profile.py accounted /tmp/acc.prof
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time

import torch

from fedgraphrec.data.registry import load_dataset
from fedgraphrec.protocols.lpgcn.settings import LPGCNSettings
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.protocol_learner import ProtocolLearner
from fedgraphrec.training.sampler import BPRSampler


def main() -> None:
    crypto, out = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    data = load_dataset("ml-100k")
    s = LPGCNSettings(model="lightgcn", dim=20, n_layers=5, init_std=1.0, lr=0.01, reg=1e-3,
                      batch_size=2048, alpha=0)  # fmt: skip
    cfg = TrainConfig(protocol="lpgcn", dataset="ml-100k", seed=0, crypto=crypto, settings=s)  # type: ignore[arg-type]
    fed = ProtocolLearner(cfg, data, nodes=1)
    batches = list(BPRSampler(data.train, 0, "users").batches(0, 2048))
    fed.train_batch(*batches[0])
    pr = cProfile.Profile()
    t = time.perf_counter()
    pr.enable()
    for b in batches[1:]:
        fed.train_batch(*b)
    pr.disable()
    print("batches", len(batches) - 1, "seconds", time.perf_counter() - t)
    pr.dump_stats(out)
    st = pstats.Stats(out)
    st.sort_stats("tottime").print_stats(45)
    st.sort_stats("cumulative").print_stats(60)


if __name__ == "__main__":
    main()
