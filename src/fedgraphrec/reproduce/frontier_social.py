"""The frontier of the vertical (P4GCN) and decentralized (DGREC) settings on one social dataset.

``python benchmarks/frontier_social.py --dataset flixster --p4gcn DIR --dgrec DIR
--p4gcn-audit A.json --dgrec-audit B.json --out OUT`` collects run files that the dedicated runners
wrote (:mod:`~fedgraphrec.reproduce.p4gcn_table`, :mod:`~fedgraphrec.reproduce.dgrec_runs`) and the
two audits (``fedgraphrec audit p4gcn|dgrec``), and reports, per method:

* **utility**: test RMSE (rating methods) or Recall@20 / NDCG@20 (DGREC and its baselines), mean ±
  std over the seeds found;
* **privacy**: the DP ε the run spent (P4GCN: matrix-Gaussian accountant; DGREC: the paper's
  per-coordinate one-bit figure, natural log) and the *measured* leakage of the audit arm that matches
  the method (P4GCN: the recommender's link inference at the closest ε; DGREC and its baselines: a
  neighbour's inference of private items from what it received);
* **communication**: ledger bytes per epoch, all parties together (two platforms, or all users).

The two settings answer different tasks (ratings vs top-K), so they stay two panels of one table.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from fedgraphrec.reproduce.report import reported
from fedgraphrec.training.plots import bytes_axis, label_points

__all__ = ["collect", "frontier_social", "social_figure"]

_RATING = {  # run-file method → (label, mechanism)
    "lightgcn": ("LightGCN (local, ratings only)", "none: no social data used"),
    "pmf": ("PMF (local)", "none"),
    "sesorec": ("SeSoRec / S3Rec (accuracy only)", "2-party secret sharing (not run; bytes not counted)"),
    "p4gcn": ("P4GCN", "Paillier/CKKS sandwich + matrix-Gaussian DP"),
    "p4gcn*": ("P4GCN* (no DP)", "HE sandwich, no noise"),
}
_RANKING = {
    "dmf": ("DMF", "plain gradient gossip"),
    "dlgnn": ("DLGNN", "plain gradient gossip"),
    "dgrec": ("DGREC", "one-bit LDP gossip"),
}


def _mean_std(values: list[float]) -> tuple[float, float]:
    a = np.asarray(values, dtype=np.float64)
    return float(a.mean()), float(a.std(ddof=1)) if len(a) > 1 else 0.0


def _p4gcn_leak(audit: dict[str, Any], eps: float | None) -> float | None:
    """Forward-attack AUC of the audit arm with the ε closest to ``eps`` (``None``: the no-noise arm)."""
    arms = audit["arms"]
    if eps is None:
        arm = next(a for a in arms if a["eps"] is None)
    else:
        noisy = [a for a in arms if a["eps"] is not None]
        arm = min(noisy, key=lambda a: abs(math.log(a["eps"]) - math.log(max(eps, 1e-9))))
    return float(arm["attacks"]["forward"]["mean_auc"])


def collect(
    dataset: str, p4gcn_dir: Path, dgrec_dir: Path, p4gcn_audit: Path | None, dgrec_audit: Path | None
) -> list[dict[str, Any]]:
    """One row per method and social-graph variant found in the two folders."""
    pa = json.loads(p4gcn_audit.read_text()) if p4gcn_audit else None
    da = json.loads(dgrec_audit.read_text()) if dgrec_audit else None
    rows: list[dict[str, Any]] = []
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for f in sorted(p4gcn_dir.glob(f"{dataset}_*.json")):
        r = json.loads(f.read_text())
        groups[(r["method"], r.get("social", "real"))].append(r)
    for (method, social), runs in sorted(groups.items()):
        if method not in _RATING:
            continue
        label, mech = _RATING[method]
        rmse, rmse_sd = _mean_std([r["test_rmse"] for r in runs])
        epochs = [len(r.get("curve", [])) or 1 for r in runs]
        gb = [r.get("cipher_GB", 0.0) for r in runs]
        eps = [r["epsilon_spent"] for r in runs if r.get("epsilon_spent")]
        n_eps = float(np.mean(eps)) if eps else None
        leak = None
        if pa is not None and method.startswith("p4gcn") and social == "real":
            leak = _p4gcn_leak(pa, n_eps if method == "p4gcn" else None)
        rows.append(
            {
                "setting": "vertical (ratings)",
                "method": label + (" — social ids permuted (control)" if social == "shuffled" else ""),
                "seeds": len(runs),
                "utility": f"RMSE {rmse:.4f} ± {rmse_sd:.4f}",
                "rmse": rmse,
                "epsilon": n_eps,
                "bytes_per_epoch": float(np.mean([g * 1e9 / e for g, e in zip(gb, epochs, strict=True)])),
                "mechanism": mech,
                "leakage_auc": leak,
                "leakage": "recommender infers social links" if leak is not None else "",
                "control": social != "real",
            }
        )
    runs_by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for f in sorted(dgrec_dir.glob(f"{dataset}_*.json")):
        r = json.loads(f.read_text())
        runs_by[r["variant"]].append(r)
    for variant, (label, mech) in _RANKING.items():
        runs = runs_by.get(variant, [])
        if not runs:
            continue
        rec, rec_sd = _mean_std([reported(r)["recall@20"] for r in runs])
        ndcg, _ = _mean_std([reported(r)["ndcg@20"] for r in runs])
        per = [r["ledger_bytes"] / r["epochs"] for r in runs]
        leak = None
        if da is not None:
            leak = float(da["arms"]["one_bit" if variant == "dgrec" else "plain"]["mean_auc"])
        d_eps = (
            runs[0]["accounting_per_sharing"]["paper_rdp_ln_per_coordinate"] if variant == "dgrec" else None
        )
        rows.append(
            {
                "setting": "decentralized (top-K)",
                "method": label,
                "seeds": len(runs),
                "utility": f"Recall@20 {rec:.4f} ± {rec_sd:.4f}, NDCG@20 {ndcg:.4f}",
                "recall@20": rec,
                "epsilon": d_eps,
                "bytes_per_epoch": float(np.mean(per)),
                "mechanism": mech,
                "leakage_auc": leak,
                "leakage": "a neighbour infers private items" if leak is not None else "",
            }
        )
    return rows


def _write(rows: list[dict[str, Any]], dataset: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "frontier.json").write_text(json.dumps({"dataset": dataset, "rows": rows}, indent=2) + "\n")
    lines = [
        f"# Vertical and decentralized frontier on {dataset}",
        "",
        "Bytes: P4GCN rows are the ledger's ciphertext bytes between the two platforms per epoch "
        "(Paillier-2048 count); DGREC rows are all users' gossip bytes per epoch. ε: P4GCN's spent "
        "budget (δ = 1e-4); DGREC's per-coordinate one-bit figure (natural log). Leakage: AUC of the "
        "audit's attack (0.5 = random).",
        "",
        "| setting | method | seeds | utility | ε | bytes / epoch | mechanism | leakage AUC |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        eps = "–" if r["epsilon"] is None else f"{r['epsilon']:.2f}"
        leak = "–" if r["leakage_auc"] is None else f"{r['leakage_auc']:.3f} ({r['leakage']})"
        lines.append(
            f"| {r['setting']} | {r['method']} | {r['seeds']} | {r['utility']} | {eps} | "
            f"{r['bytes_per_epoch']:,.0f} | {r['mechanism']} | {leak} |"
        )
    (out / "frontier.md").write_text("\n".join(lines) + "\n")
    fig = social_figure(rows)
    fig.savefig(out / "frontier.png", dpi=120)
    plt.close(fig)


def social_figure(rows: list[dict[str, Any]]) -> Figure:
    """Two panels, vertical (test RMSE) and decentralized (Recall@20), against bytes per epoch.

    One labelled point per method (controls left out); the colour is the measured leakage AUC
    (grey: none). Every label stays readable and inside the figure
    (:func:`~fedgraphrec.training.plots.label_points`).
    """
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), layout="constrained")
    placed = []
    for ax, key, setting in ((axes[0], "rmse", "vertical"), (axes[1], "recall@20", "decentralized")):
        points = []
        for r in (r for r in rows if r["setting"].startswith(setting) and not r.get("control")):
            auc = r["leakage_auc"]
            colour = "0.5" if auc is None else plt.cm.coolwarm(min(max((auc - 0.5) * 2, 0.0), 1.0))
            x = max(r["bytes_per_epoch"], 1.0)
            ax.scatter(x, r[key], s=60, color=colour, edgecolor="k")
            points.append((x, r[key], r["method"]))
        bytes_axis(ax, [x for x, _, _ in points], "bytes per epoch (ledger; 1 = none)")
        ax.set_ylabel("test RMSE (lower is better)" if key == "rmse" else "test Recall@20")
        ax.set_title(f"{setting}: colour = measured leakage AUC (grey: none)", fontsize=9)
        ax.grid(alpha=0.3)
        placed.append((ax, points))
    for ax, points in placed:
        label_points(ax, points)
    return fig


def frontier_social(
    dataset: str,
    p4gcn_dir: Path,
    dgrec_dir: Path,
    out: Path,
    p4gcn_audit: Path | None = None,
    dgrec_audit: Path | None = None,
) -> str:
    """Collect the runs, write ``frontier.md/.json/.png`` into ``out`` and return the markdown.

    Raises:
        FileNotFoundError: no run file of ``dataset`` in either folder.
    """
    rows = collect(dataset, p4gcn_dir, dgrec_dir, p4gcn_audit, dgrec_audit)
    if not rows:
        raise FileNotFoundError(f"no {dataset} run files in {p4gcn_dir} or {dgrec_dir}")
    _write(rows, dataset, out)
    return (out / "frontier.md").read_text()
