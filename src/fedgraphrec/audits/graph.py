"""Privacy audits of the vertical-message protocols: LP-GCN collusion and GNN4FR neighbours.

* LP-GCN: set-up (Algorithms 2–3 and verification) runs in ``real`` crypto mode with transcripts
  on, once per number of virtual items α; for each α a coalition of the server and c random
  clients (seeded) attacks the other clients' real items (:func:`~fedgraphrec.attacks.lpgcn_collusion`).
  Only set-up is run: the tokens and verification answers the attack reads are all sent there.
* GNN4FR: one minibatch in ``real`` mode from the initial tables; each neighbour's layer-1 rows of
  its forward propagation (Algorithm 4) are attacked (:func:`~fedgraphrec.attacks.gnn4fr_neighbour`),
  and the relaying server (no S) is scored as the baseline.

The report (``audit.json``, ``audit.md``, and ``lpgcn_collusion.png`` for LP-GCN) puts every
number next to the random guess.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from fedgraphrec.attacks.gnn4fr_neighbour import gnn4fr_neighbour
from fedgraphrec.attacks.lpgcn_collusion import lpgcn_collusion
from fedgraphrec.protocols.lpgcn.client import key_material
from fedgraphrec.protocols.settings import MinibatchSettings, ModelSettings
from fedgraphrec.seeding import numpy_rng
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.data import prepare_interactions
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.protocol_learner import ProtocolLearner
from fedgraphrec.training.sampler import BPRSampler

__all__ = ["audit_gnn4fr", "audit_lpgcn", "save_fraction_plot", "write_report"]

ALPHAS = (0, 4, 16, 64)
COALITIONS = (0, 1, 10, 100, 400)


def audit_lpgcn(
    cfg: TrainConfig,
    out_dir: str | Path,
    alphas: tuple[int, ...] = ALPHAS,
    coalitions: tuple[int, ...] = COALITIONS,
) -> dict[str, Any]:
    """Server + c clients vs α virtual items: one set-up per α, one attack per c; writes the report."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = prepare_interactions(dataclasses.replace(cfg, transcripts=True, crypto="real"))
    n = data.train.shape[0]
    rows = []
    for alpha in alphas:
        arm = load_config(base=cfg, alpha=alpha, transcripts=True, crypto="real")
        learner = ProtocolLearner(arm, data)  # set-up only: the attack reads tokens and answers
        shared_key, keypairs = key_material(learner.programs.values(), n)  # type: ignore[arg-type]
        for c in coalitions:
            colluders = numpy_rng(cfg.seed, "audit", "colluders", str(c)).permutation(n)[: min(c, n - 1)]
            res = lpgcn_collusion(
                learner.net.transcript,
                data.train,
                colluders.tolist(),
                shared_key if c else None,
                keypairs,
            )
            rows.append({"alpha": alpha, "c": c, **res.summary()})
    report = {"protocol": "lpgcn", "dataset": cfg.dataset, "seed": cfg.seed, "collusion": rows}
    lines = [
        f"# Privacy audit: lpgcn on {cfg.dataset}: the server colluding with c clients",
        "",
        "Victims are the non-colluding clients; means over victims. `recovered`: real items verified",
        "real by a colluding convolution-client; `held prec.`: precision of the decoded held set",
        "(real + virtual); `prec.`/`recall`/`AUC`: the guess 'held and not verified virtual'.",
        "",
        "| α | c | recovered | held prec. | prec. | recall | AUC | random prec. |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['alpha']} | {r['c']} | {r['mean_recovered']:.3f} | {r['mean_held_precision']:.3f} | "
            f"{r['mean_precision']:.3f} | {r['mean_recall']:.3f} | {r['mean_auc']:.3f} | "
            f"{r['mean_random_precision']:.4f} |"
        )
    write_report(out, report, lines)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for alpha in alphas:
        sel = [r for r in rows if r["alpha"] == alpha and r["c"] > 0]
        ax.plot([r["c"] for r in sel], [r["mean_precision"] for r in sel], marker="o", label=f"α={alpha}")
    ax.set_xscale("log")
    save_fraction_plot(
        fig,
        ax,
        out / "lpgcn_collusion.png",
        xlabel="colluding clients c",
        ylabel="precision of inferred real items",
        title=f"lpgcn on {cfg.dataset}: server + c clients",
    )
    return report


def audit_gnn4fr(cfg: TrainConfig, out_dir: str | Path) -> dict[str, Any]:
    """A neighbour vs the relaying server on the first forward propagation; writes the report."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    arm = dataclasses.replace(cfg, transcripts=True, crypto="real")
    data = prepare_interactions(arm)
    learner = ProtocolLearner(arm, data, nodes=2)  # per-message sealing, as one device per client
    table = learner.tables()["item_emb"].detach().clone()  # the initial item table (the attacked step's)
    learner.train_batch(
        *next(BPRSampler(data.train, seed=cfg.seed).batches(0, cfg.settings_as(MinibatchSettings).batch_size))
    )
    arms = {}
    for name, key in (("neighbour (holds S)", learner.programs[0].group_key()), ("server (no S)", None)):
        res = gnn4fr_neighbour(learner.net.transcript, data.train, table, None, key)
        arms[name] = res.summary()
    report = {
        "protocol": "gnn4fr",
        "dataset": cfg.dataset,
        "seed": cfg.seed,
        "dim": cfg.settings_as(ModelSettings).dim,
        "attack": arms,
    }
    lines = [
        f"# Privacy audit: gnn4fr on {cfg.dataset}: membership from synchronised user embeddings",
        "",
        "Each victim's layer-1 user embedding as received at the first step; items scored by their",
        "projection on it (the attacker knows the initial item table). Means over victims.",
        "",
        "| attacker | victims | AUC (0.5 = random) | top-\\|I_u\\| precision | random precision |",
        "|---|---|---|---|---|",
    ]
    for name, s in arms.items():
        lines.append(
            f"| {name} | {int(s['victims'])} | {s['mean_auc']:.3f} | {s['mean_precision']:.3f} | "
            f"{s['mean_random_precision']:.4f} |"
        )
    write_report(out, report, lines)
    return report


def write_report(out: Path, report: dict[str, Any], lines: list[str]) -> None:
    """An audit's two reports in ``out``: ``audit.json`` (the numbers) and ``audit.md`` (``lines``)."""
    (out / "audit.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "audit.md").write_text("\n".join(lines) + "\n")


def save_fraction_plot(fig: Figure, ax: Axes, path: Path, *, xlabel: str, ylabel: str, title: str) -> None:
    """Label, grid and save (then close) an audit's plot of fractions in [0, 1] with its legend."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
