"""Privacy audit: run a protocol with transcripts on and attack what each party received.

The FedGRec family (``fedgrec``, ``federank``, ``fcf``) is attacked here (LP-GCN and GNN4FR in
:mod:`.audit_graph`, P4GCN in :mod:`.audit_p4gcn`, DGREC in :mod:`.audit_dgrec`): the server's query
intersection across rounds and its inference from users' item updates, the latter once with secure
aggregation (``real`` crypto, so the server's transcript holds the actual masked vectors) and once
with uploads in the clear (protection off, the baseline the protection is measured against). The
report (``audit.json``, ``audit.md``, ``query_intersection.png``) states each attack's success next
to a random guess.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from fedgraphrec.attacks.query_intersection import query_intersection
from fedgraphrec.attacks.upload_inference import upload_inference
from fedgraphrec.audits.graph import audit_gnn4fr, audit_lpgcn, save_fraction_plot
from fedgraphrec.audits.queries import audit_queries, query_leaks, query_markdown
from fedgraphrec.protocols.fedgrec.settings import FedGRecSettings
from fedgraphrec.protocols.settings import ModelSettings
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.data import prepare_interactions
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.protocol_learner import ProtocolLearner

__all__ = ["audit"]


def _run(cfg: TrainConfig, rounds: int, secure: bool) -> Any:
    arm = load_config(
        base=cfg, transcripts=True, secure_aggregation=secure, crypto="real" if secure else "accounted"
    )
    data = prepare_interactions(arm)
    learner = ProtocolLearner(arm, data)
    for r in range(rounds):
        learner.train_round(r)
    return learner, data


def audit(cfg: TrainConfig, rounds: int, out_dir: str | Path) -> dict[str, Any]:
    """Run ``rounds`` rounds twice (secure aggregation on / off), attack both, write the report.

    Raises:
        ValueError: no attack is implemented for ``cfg.protocol`` yet.
    """
    if cfg.protocol == "lpgcn":  # set-up only: the attack reads tokens and verification answers
        return audit_lpgcn(cfg, out_dir)
    if cfg.protocol == "gnn4fr":  # one forward propagation: the attack reads layer-1 user rows
        return audit_gnn4fr(cfg, out_dir)
    if cfg.protocol in ("fedncf", "fedpergnn"):  # one round: the attacks read its item queries
        return audit_queries(cfg, out_dir)
    if not isinstance(cfg.settings, FedGRecSettings):  # FedGRec's programs (FedeRank, FCF): uploads, queries
        raise ValueError(
            f"audit: attacks exist for fedgrec, federank, fcf, fedncf, fedpergnn, lpgcn, gnn4fr, p4gcn "
            "and dgrec, "
            f"not for {cfg.protocol!r}"
        )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"protocol": cfg.protocol, "dataset": cfg.dataset, "rounds": rounds}
    arms: dict[str, Any] = {}
    for name, secure in (("secure_aggregation", True), ("in_the_clear", False)):
        learner, data = _run(cfg, rounds, secure)
        uploads = upload_inference(
            learner.net.transcript,
            data.train,
            cfg.settings_as(ModelSettings).dim,
            frac_bits=learner.settings.frac_bits,
        ).summary()
        arms[name] = {"upload_inference": uploads}
        if secure:  # the queries are the same either way: attack them once
            qi = query_intersection(learner.net.transcript, data.train, min_rounds=1)
            report["query_intersection"] = {
                "mean_recall": float(qi.recall.mean()),
                "by_rounds_seen": qi.by_rounds_seen(),
            }
            report["query_order"] = query_leaks(cfg, learner.net.transcript, data.train)
    report["upload_inference"] = arms
    (out / "audit.json").write_text(json.dumps(report, indent=2) + "\n")
    _markdown(report, out / "audit.md")
    _plot(report, out / "query_intersection.png")
    return report


def _markdown(report: dict[str, Any], path: Path) -> None:
    up = report["upload_inference"]
    lines = [
        f"# Privacy audit: {report['protocol']} on {report['dataset']}, {report['rounds']} rounds",
        "",
        "## The server infers users' items from their item updates",
        "",
        "| uploads | AUC (0.5 = random) | support precision | random-guess precision |",
        "|---|---|---|---|",
    ]
    for arm in ("secure_aggregation", "in_the_clear"):
        s = up[arm]["upload_inference"]
        support = s.get("mean_support_precision")
        lines.append(
            f"| {arm.replace('_', ' ')} | {s['mean_auc']:.3f} | "
            f"{'-' if support is None else f'{support:.3f}'} | {s['mean_random_precision']:.3f} |"
        )
    lines += [
        "",
        "## The server intersects each user's queries across rounds",
        "",
        "| rounds the user took part in | users | precision | recovered exactly |",
        "|---|---|---|---|",
    ]
    for r in report["query_intersection"]["by_rounds_seen"]:
        exact = 100 * r["exact_fraction"]
        lines.append(f"| {r['rounds_seen']} | {r['users']} | {r['mean_precision']:.3f} | {exact:.1f} % |")
    lines.append("")
    recall = report["query_intersection"]["mean_recall"]
    lines.append(f"Recall of the intersection: {recall:.3f} (positives are in every query).")
    lines += ["", *query_markdown(report["query_order"])]
    path.write_text("\n".join(lines) + "\n")


def _plot(report: dict[str, Any], path: Path) -> None:
    rows = report["query_intersection"]["by_rounds_seen"]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(
        [r["rounds_seen"] for r in rows], [r["mean_precision"] for r in rows], marker="o", label="precision"
    )
    ax.plot([r["rounds_seen"] for r in rows], [r["exact_fraction"] for r in rows], marker="s", label="exact")
    save_fraction_plot(
        fig,
        ax,
        path,
        xlabel="rounds the user took part in",
        ylabel="recovered training items",
        title=f"{report['protocol']}: query intersection",
    )
