r"""FedGRec-K vs FedeRank (K = 0): Recall@20 / NDCG@20 curves over rounds and a table beside Table 1.

Reads FedGRec run folders (``fedgraphrec train fedgrec ...``), plots both metrics against the round
(spec Fig. 2) and writes a JSON table of the last evaluated round of every run next to the paper's
Table 1 (reached after 10^5 rounds; the runs here are far shorter, so compare the curves, not the
absolute level).

    python benchmarks/fedgrec_compare.py --dataset gowalla --out results/fedgrec/gowalla \\
        FedeRank=runs/gowalla-K0 FedGRec-1=runs/gowalla-K1 FedGRec-2=runs/gowalla-K2 FedGRec-3=runs/gowalla-K3
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from fedgraphrec.reproduce.papers import paper

# spec fedgrec.md §5.6 (papers/fedgrec.toml): (Recall@20, NDCG@20) after 10^5 rounds
_ROWS = {  # label here → row of the paper's table
    "FedeRank": "FedeRank",
    "FedGRec-1": "FedGRec-1",
    "FedGRec-2": "FedGRec-2",
    "FedGRec-3": "FedGRec-3",
    "LightGCN-3 (centralized)": "LightGCN-3",
}
_T1 = paper("fedgrec").section("t1").section("paper")
PAPER_TABLE1 = {
    ds: {label: _T1.section(ds).numbers(row)[:2] for label, row in _ROWS.items()} for ds in _T1.names()
}


def _curve(run: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in rows if "test" in r]


def main() -> None:
    """Plot the curves and write the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="LABEL=run_folder")
    ap.add_argument("--dataset", required=True, choices=sorted(PAPER_TABLE1))
    ap.add_argument("--out", required=True, help="output prefix: writes <out>.png and <out>.json")
    args = ap.parse_args()
    curves = {}
    for item in args.runs:
        label, _, folder = item.partition("=")
        curves[label] = _curve(Path(folder))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, metric in zip(axes, ("recall@20", "ndcg@20"), strict=True):
        for label, rows in curves.items():
            ax.plot([r["epoch"] for r in rows], [r["test"][metric] for r in rows], marker=".", label=label)
        ax.set_xlabel("round")
        ax.set_ylabel(f"test {metric}")
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle(f"FedGRec vs FedeRank on {args.dataset} (S=400, τ=10, 2048 negatives)")
    fig.tight_layout()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out.with_suffix(".png"), dpi=120)
    table = {
        "dataset": args.dataset,
        "ours": {
            label: {
                "rounds": rows[-1]["epoch"],
                "recall@20": rows[-1]["test"]["recall@20"],
                "ndcg@20": rows[-1]["test"]["ndcg@20"],
                "curve": [(r["epoch"], r["test"]["recall@20"], r["test"]["ndcg@20"]) for r in rows],
            }
            for label, rows in curves.items()
        },
        "paper_table1_after_1e5_rounds": {
            k: {"recall@20": v[0], "ndcg@20": v[1]} for k, v in PAPER_TABLE1[args.dataset].items()
        },
    }
    out.with_suffix(".json").write_text(json.dumps(table, indent=2) + "\n")
    print(f"{'run':<12} {'rounds':>7} {'Recall@20':>10} {'NDCG@20':>9}   paper (10^5 rounds)")
    for label, row in table["ours"].items():
        paper = PAPER_TABLE1[args.dataset].get(label)
        ref = f"{paper[0]:.4f} / {paper[1]:.4f}" if paper else "-"
        print(f"{label:<12} {row['rounds']:>7} {row['recall@20']:>10.4f} {row['ndcg@20']:>9.4f}   {ref}")


if __name__ == "__main__":
    main()
