"""FedGRec: time of one batched round vs the same round computed user by user, on the same draws.

Both start from the same warmed-up state and process the same sampled users, negatives and pairs
(round ``r`` of the run seed); the batched round is the party programs' (one node, in process,
:class:`~fedgraphrec.training.protocol_learner.ProtocolLearner`), the per-user version is
:func:`benchmarks.fedgrec_reference.reference_round` (autograd and ``torch.optim.Adam``
per user, every queried row a parameter). Prints the median of ``--rounds`` rounds and the ratio.

    FEDGRAPHREC_DATA=../shared/datasets python -m benchmarks.fedgrec_round --dataset gowalla --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from benchmarks.fedgrec_reference import reference_round
from fedgraphrec.protocols.fedgrec.sampling import sample_round
from fedgraphrec.training.data import prepare_interactions
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.protocol_learner import ProtocolLearner


def main() -> None:
    """Time both versions side by side and print the medians."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="gowalla")
    ap.add_argument("--K", type=int, default=2)
    ap.add_argument("--clients", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", default="")
    ap.add_argument("--no-reference", action="store_true", help="time the batched round only")
    args = ap.parse_args()
    cfg = load_config(
        None,
        [f"dataset={args.dataset}", "protocol=fedgrec", f"K={args.K}", f"clients_per_round={args.clients}"],
    )
    data = prepare_interactions(cfg)
    learner = ProtocolLearner(cfg, data)  # one node: the whole population as one shard
    server, (program,) = learner.server, learner.programs.values()
    s = learner.settings
    batched, per_user = [], []
    for r in range(args.rounds):
        if not args.no_reference:
            rs = sample_round(data.train, r, s)
            t0 = time.perf_counter()
            reference_round(s, server.E, program.state.user, data.train, rs)
            per_user.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        learner.train_round(r)
        batched.append(time.perf_counter() - t0)
    out = {
        "dataset": args.dataset,
        "K": args.K,
        "clients_per_round": args.clients,
        "threads": torch.get_num_threads(),
        "batched_round_s_median": statistics.median(batched),
    }
    if per_user:
        out["per_user_round_s_median"] = statistics.median(per_user)
        out["speedup"] = statistics.median(per_user) / statistics.median(batched)
    print(json.dumps(out, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
