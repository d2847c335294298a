"""Privacy–utility–communication frontier: ``fedgraphrec frontier --dataset NAME``.

Every applicable method on one dataset, split and budget (through
:func:`~fedgraphrec.reproduce.compare.compare`), reported on three axes:

* **utility**: test Recall@20 / NDCG@20 (mean over seeds);
* **privacy**: the mechanism, a DP ``ε`` where the method has one, and a *measured* leakage: the
  server's interaction inference from what it received (:func:`~fedgraphrec.attacks.upload_inference`,
  ROC AUC over each user's items; 0.5 is a random guess), run on a short transcript-enabled run
  with ``real`` cryptography, so masked uploads are the actual masked bytes;
* **communication**: bytes per client per epoch from the ledger.

Methods whose server receives no per-client item update (LP-GCN, GNN4FR: encrypted, synchronised
embeddings) have no such attack; their cell says so, and ``fedgraphrec audit`` reports what their
own attacks measure.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from fedgraphrec.attacks.upload_inference import upload_inference
from fedgraphrec.privacy.laplace import laplace_ldp_epsilon as ldp_epsilon
from fedgraphrec.protocols.baselines.fedpergnn.settings import FedPerGNNSettings
from fedgraphrec.protocols.settings import ModelSettings, SecureSumSettings
from fedgraphrec.reproduce.compare import MethodSpec, compare, parse_method
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.data import prepare_interactions
from fedgraphrec.training.learner_base import Learner
from fedgraphrec.training.learners import make_learner
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.plots import bytes_axis, label_points
from fedgraphrec.training.protocol_learner import ProtocolLearner
from fedgraphrec.training.sampler import BPRSampler

__all__ = ["HORIZONTAL", "FrontierMethod", "frontier", "frontier_figure", "server_inference_auc"]


@dataclass(frozen=True)
class FrontierMethod:
    """A method on the frontier: its spec, its mechanism, and where its server gets item updates."""

    label: str
    method: str
    mechanism: str
    upload_phase: str | None  # ledger phase of per-client item updates the server receives


HORIZONTAL = (
    FrontierMethod("LightGCN (centralized)", "central:model=lightgcn", "none: one party sees all", None),
    FrontierMethod("LP-GCN", "lpgcn:model=lightgcn+", "AEAD + item tokens + virtual items; lossless", None),
    FrontierMethod("GNN4FR", "gnn4fr:model=lightgcn", "AEAD + item tokens + secret sharing; lossless", None),
    FrontierMethod("P-GCN", "pgcn:model=lightgcn+", "secure aggregation", "train/item-gradients"),
    FrontierMethod("FedMF", "fedmf:model=mf", "secure aggregation", "train/item-gradients"),
    FrontierMethod("FedGRec-2", "fedgrec:K=2", "secure aggregation", "train/upload"),
    FrontierMethod("FedeRank", "federank", "secure aggregation", "train/upload"),
    FrontierMethod("FedNCF", "fedncf:model=ncf", "secure aggregation", "train/upload"),
    FrontierMethod("FedPerGNN", "fedpergnn", "LDP (Laplace) + pseudo items, plain uploads", "train/upload"),
)


def _epsilon(cfg: TrainConfig) -> float | None:
    """Per-coordinate, per-upload ε of the methods with a DP mechanism (``None``: no DP)."""
    s = cfg.settings
    if isinstance(s, FedPerGNNSettings) and (s.ldp_scale == 0 or s.ldp_clip > 0):
        return ldp_epsilon(s.ldp_clip, s.ldp_scale)
    return None


def server_inference_auc(cfg: TrainConfig, phase: str, *, participants: int = 32) -> float:
    """Mean AUC of the server's inference of users' items from one step or round it received.

    The run is short (one minibatch of ``participants`` triples, or one round of that many users)
    with transcripts on and ``real`` cryptography for that step. Set-up runs in ``accounted`` mode
    (same numbers, no cipher): FedGRec's warm-up sums over *every* user would otherwise run full
    secure aggregation among all of them, hours on a laptop, and the attack does not read them. For
    the same reason the step's other secure sums (P-GCN's forward over every user) stay ``accounted``:
    only the attacked phase's are enciphered.
    """
    size: dict[str, Any] = {
        k: participants for k in ("batch_size", "clients_per_round") if hasattr(cfg.settings, k)
    }
    short = load_config(base=cfg, transcripts=True, crypto="accounted", **size)
    data = prepare_interactions(short)
    learner = make_learner(short, data)
    protocol: Any = getattr(learner, "protocol", None)
    net = learner.net if isinstance(learner, ProtocolLearner) else protocol.net
    net.crypto = "real"  # the attacked step is enciphered for real
    net.real_phases = (phase,)  # party programs' secure sums of other phases stay accounted
    step = getattr(learner, "train_round", None)
    if step is not None:
        step(0)
    else:
        users, pos, neg = next(iter(BPRSampler(data.train, short.seed).batches(0, participants)))
        cast(Learner, learner).train_batch(users, pos, neg)
    settings = getattr(learner, "settings", None) or getattr(protocol, "fp", None)
    own = getattr(short.settings, "frac_bits", SecureSumSettings.frac_bits)  # plain uploads: the default
    frac_bits = getattr(settings, "frac_bits", None) or own
    dim = short.settings_as(ModelSettings).dim
    result = upload_inference(net.transcript, data.train, dim, phase=phase, frac_bits=frac_bits)
    return float(result.summary()["mean_auc"])


def frontier(
    dataset: str,
    out_dir: str | Path,
    *,
    methods: Sequence[FrontierMethod] = HORIZONTAL,
    seeds: Sequence[int] = (1,),
    config: str | Path | None = None,
    overrides: Sequence[str] = (),
    attack: bool = True,
    reuse: str | Path | Sequence[str | Path] = (),
    progress: bool = False,
) -> list[dict[str, Any]]:
    """Run ``methods`` on ``dataset``; write ``frontier.md`` / ``.json`` / ``.csv`` and ``frontier.png``.

    ``reuse``: :func:`~fedgraphrec.reproduce.compare.compare` folders run with the same config; a
    method whose spec (``"pgcn:model=lightgcn+"``) or label names a row there is not run again (the
    first folder that has it wins). A reused row keeps its folder's seeds, and the table shows them
    where they differ from ``seeds``: a method too slow for every seed can come from a shorter run.
    """
    base = [f"dataset={dataset}", *overrides]
    done: dict[str, dict[str, Any]] = {}
    for folder in [reuse] if isinstance(reuse, str | Path) else list(reuse):
        saved = json.loads((Path(folder) / "compare.json").read_text())
        for r in saved["rows"]:
            done.setdefault(r["method"], {**r, "seeds": sorted(saved["seeds"])})
    done.update({m.method: done[m.label] for m in methods if m.label in done and m.method not in done})
    specs = []
    for m in methods:
        spec = parse_method(m.method)
        specs.append(MethodSpec(label=m.label, protocol=spec.protocol, overrides=spec.overrides))
    out = Path(out_dir)
    todo = [s for s, m in zip(specs, methods, strict=True) if m.method not in done]
    ran = compare(todo, seeds, out / "runs", config=config, overrides=base, progress=progress) if todo else []
    rows = {r["method"]: {**r, "seeds": sorted(seeds)} for r in ran}
    rows.update({m.label: done[m.method] for m in methods if m.method in done})
    table = []
    for m, spec in zip(methods, specs, strict=True):
        cfg = load_config(config, [*spec.overrides], shared=base, protocol=spec.protocol)
        auc = None
        if attack and m.upload_phase is not None:
            auc = server_inference_auc(cfg, m.upload_phase)
        r = rows[m.label]
        table.append(
            {
                "method": m.label,
                "spec": m.method,
                "recall@20": r.get("recall@20_mean", math.nan),
                "ndcg@20": r.get("ndcg@20_mean", math.nan),
                "bytes_per_client_per_epoch": r["bytes_per_client_per_epoch"],
                "mechanism": m.mechanism,
                "epsilon": _epsilon(cfg),
                "server_inference_auc": auc,
                "seeds": r["seeds"],
            }
        )
    _write(out, dataset, list(seeds), table)
    return table


def _fmt(x: float | None, spec: str = ".3f") -> str:
    if x is None:
        return "–"
    return "∞" if math.isinf(x) else format(x, spec)


def _seed_note(row_seeds: list[int], seeds: list[int]) -> str:
    """`` (seeds [1])`` where a reused row ran other seeds than the table's."""
    return "" if sorted(row_seeds) == sorted(seeds) else f" (seeds {row_seeds})"


def _write(out: Path, dataset: str, seeds: list[int], table: list[dict[str, Any]]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "frontier.json").write_text(
        json.dumps({"dataset": dataset, "seeds": seeds, "rows": table}, indent=2) + "\n"
    )
    with (out / "frontier.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
    md = [
        f"# Privacy–utility–communication frontier on {dataset} (seeds {seeds})",
        "",
        "Server inference AUC: ROC AUC of the server ranking each user's items from the per-client "
        "update it received (0.5 = random guess; – where the server receives no such update). "
        "ε: FedPerGNN's per-coordinate, per-upload Laplace ε = 2δ/λ (– : no DP mechanism).",
        "",
        "| method | Recall@20 | NDCG@20 | bytes / client / epoch | mechanism | ε | server inference AUC |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in table:
        md.append(
            f"| {r['method']}{_seed_note(r['seeds'], seeds)} | {_fmt(r['recall@20'], '.4f')} | "
            f"{_fmt(r['ndcg@20'], '.4f')} | "
            f"{r['bytes_per_client_per_epoch']:,.0f} | {r['mechanism']} | {_fmt(r['epsilon'], '.1f')} | "
            f"{_fmt(r['server_inference_auc'])} |"
        )
    (out / "frontier.md").write_text("\n".join(md) + "\n")
    fig = frontier_figure(dataset, table)
    fig.savefig(out / "frontier.png", dpi=120)
    plt.close(fig)


def frontier_figure(dataset: str, table: list[dict[str, Any]]) -> Figure:
    """Recall@20 against bytes per client per epoch, one labelled point per method of ``table``.

    The colour is the server's inference AUC (grey: no attack); every label stays readable and
    inside the figure (:func:`~fedgraphrec.training.plots.label_points`).
    """
    fig, ax = plt.subplots(figsize=(7.5, 4.8), layout="constrained")
    points = []
    for r in table:
        auc = r["server_inference_auc"]
        colour = "0.5" if auc is None else plt.cm.coolwarm(min(max((auc - 0.5) * 2, 0.0), 1.0))
        x = max(r["bytes_per_client_per_epoch"], 1.0)
        ax.scatter(x, r["recall@20"], s=60, color=colour, edgecolor="k")
        points.append((x, r["recall@20"], r["method"]))
    bytes_axis(ax, [x for x, _, _ in points], "bytes per client per epoch (ledger; 1 = none)")
    ax.set_ylabel("test Recall@20")
    ax.set_title(
        f"{dataset}: colour = server inference AUC\n(blue 0.5 … red 1.0; grey: no attack)", fontsize=9
    )
    ax.grid(alpha=0.3)
    label_points(ax, points)
    return fig
