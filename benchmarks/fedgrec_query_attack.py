r"""Measure FedGRec's query-intersection leakage (spec fedgrec.md §1.4) on a real dataset.

Runs ``--rounds`` rounds with transcripts on and lets the server intersect each user's queried item
sets; prints the precision of the recovered set by the number of rounds the user took part in
(recall is 1 by construction: positives are in every query).

    FEDGRAPHREC_DATA=../shared/datasets python benchmarks/fedgrec_query_attack.py --dataset gowalla \\
        --rounds 150 --json results/fedgrec/query_attack_gowalla.json
"""

from __future__ import annotations

import argparse
import json

from fedgraphrec.attacks.query_intersection import query_intersection
from fedgraphrec.training.data import prepare_interactions
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.protocol_learner import ProtocolLearner


def main() -> None:
    """Run, attack, print."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="gowalla")
    ap.add_argument("--rounds", type=int, default=150)
    ap.add_argument("--clients", type=int, default=400)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    cfg = load_config(
        None,
        [
            f"dataset={args.dataset}",
            "protocol=fedgrec",
            "K=1",
            f"clients_per_round={args.clients}",
            "local_steps=1",
            "transcripts=true",
        ],
    )
    data = prepare_interactions(cfg)
    learner = ProtocolLearner(cfg, data)
    for r in range(args.rounds):
        learner.train_round(r)
    result = query_intersection(learner.net.transcript, data.train, min_rounds=1)
    out = {
        "dataset": args.dataset,
        "rounds": args.rounds,
        "clients_per_round": args.clients,
        "n_negatives": learner.settings.n_negatives,
        "mean_recall": float(result.recall.mean()),
        "by_rounds_seen": result.by_rounds_seen(),
    }
    print(json.dumps(out, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
