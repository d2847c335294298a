"""Compare two run folders epoch by epoch (e.g. LP-GCN against centralized LightGCN).

Prints how many evaluated epochs agree on the chosen metrics at 4 decimals, the largest absolute
metric difference, the largest training-loss difference, and the largest ``--verify`` deviation
recorded by the federated run; ``--json`` writes the same figures.

    python benchmarks/compare_runs.py runs/central runs/lpgcn --metrics precision@5 recall@5
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def load(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reference", type=Path)
    ap.add_argument("candidate", type=Path)
    ap.add_argument("--metrics", nargs="+", default=["precision@5", "recall@5", "ndcg@5"])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    ref = {r["epoch"]: r for r in load(args.reference) if "test" in r}
    cand = {r["epoch"]: r for r in load(args.candidate) if "test" in r}
    epochs = sorted(set(ref) & set(cand))
    if not epochs:
        raise SystemExit("the two runs share no evaluated epoch")
    diffs = {e: max(abs(ref[e]["test"][k] - cand[e]["test"][k]) for k in args.metrics) for e in epochs}
    same = [
        e
        for e in epochs
        if all(round(ref[e]["test"][k], 4) == round(cand[e]["test"][k], 4) for k in args.metrics)
    ]
    losses = [abs(ref[e]["loss"] - cand[e]["loss"]) for e in epochs if ref[e].get("loss") is not None]
    report = {
        "epochs_compared": len(epochs),
        "epochs_identical_at_4_decimals": len(same),
        "epochs_differing": [e for e in epochs if e not in same],
        "max_abs_metric_difference": max(diffs.values()),
        "max_abs_loss_difference": max(losses) if losses else None,
        "max_verify_deviation": max(
            (r.get("verify_max_deviation", 0.0) for r in cand.values()), default=None
        ),
        "metrics": args.metrics,
    }
    for k, v in report.items():
        print(f"{k:>32}: {v}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
