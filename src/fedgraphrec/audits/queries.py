"""Which queried items are positives: the order of one round's queries and the seeded negatives.

Run by ``fedgraphrec audit fedgrec`` (a section of its report) and ``fedgraphrec audit fedncf`` /
``audit fedpergnn`` (their own report). The server reads one round of item queries from its
transcript and names positives twice (:mod:`fedgraphrec.attacks.query_order`): from the order the
items arrive in, and from the negatives it regenerates from the run seed (``config.toml`` is in
every run folder) exactly as the protocol's clients draw them. Each is scored with precision and
recall against the truth and set next to the random guess ``|N_u| / |Q|``: the union is visible by
design, which of its items are positives is not.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from fedgraphrec.attacks.query_order import Ranks, order_attack, seeded_attack
from fedgraphrec.protocols.settings import RoundSampling
from fedgraphrec.runtime.transcript import Transcript
from fedgraphrec.seeding import numpy_rng
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.data import prepare_interactions
from fedgraphrec.training.loading import load_config
from fedgraphrec.training.protocol_learner import ProtocolLearner

__all__ = [
    "audit_queries",
    "fedgrec_ranks",
    "fedncf_ranks",
    "fedpergnn_ranks",
    "query_leaks",
    "query_markdown",
]


def fedgrec_ranks(seed: int, n_items: int, n_negatives: int) -> Ranks:
    """FedGRec's negatives' ranks as a server replays them: one stream per round over the sorted users."""

    def ranks(round_index: int, degrees: Mapping[int, int]) -> dict[int, np.ndarray]:
        rng = numpy_rng(seed, "fedgrec", "negatives", round_index)
        out = {}
        for u in sorted(degrees):
            free = n_items - degrees[u]
            out[u] = rng.choice(free, size=min(n_negatives, free), replace=False)
        return out

    return ranks


def _per_user_ranks(protocol: str, seed: int, n_items: int, n_negatives: int) -> Ranks:
    def ranks(round_index: int, degrees: Mapping[int, int]) -> dict[int, np.ndarray]:
        out = {}
        for u, p in degrees.items():
            free = n_items - p
            rng = numpy_rng(seed, protocol, "sample", round_index, u)
            out[u] = rng.choice(free, size=min(n_negatives, free), replace=False)
        return out

    return ranks


def fedncf_ranks(seed: int, n_items: int, n_negatives: int) -> Ranks:
    """FedNCF's negatives' ranks as a server replays them: one stream per round and user."""
    return _per_user_ranks("fedncf", seed, n_items, n_negatives)


def fedpergnn_ranks(seed: int, n_items: int, n_negatives: int) -> Ranks:
    """FedPerGNN's negatives' ranks as a server replays them (the same per-user streams as FedNCF's)."""
    return _per_user_ranks("fedpergnn", seed, n_items, n_negatives)


RANKS = {
    "fedgrec": fedgrec_ranks,
    "federank": fedgrec_ranks,
    "fcf": fedgrec_ranks,
    "fedncf": fedncf_ranks,
    "fedpergnn": fedpergnn_ranks,
}
"""The seeded draw of each protocol whose negatives a server may try to regenerate."""


def query_leaks(cfg: TrainConfig, transcript: Transcript, train: sp.csr_matrix) -> dict[str, Any]:
    """Both attacks on the first round of queries in ``transcript`` (report section ``query_order``)."""
    n_negatives = cfg.settings_as(RoundSampling).n_negatives
    ranks = RANKS[cfg.protocol](cfg.seed, train.shape[1], n_negatives)
    order = order_attack(transcript, train, n_negatives)
    seeded = seeded_attack(transcript, train, n_negatives, ranks)
    return {"order": order.summary(), "seeded_negatives": seeded.summary()}


def query_markdown(section: Mapping[str, Any]) -> list[str]:
    """The report's lines for :func:`query_leaks`' section."""
    rows = [
        ("the order of the query (its first size − n_negatives items)", section["order"]),
        ("negatives regenerated from the run seed", section["seeded_negatives"]),
    ]
    lines = [
        "## The server separates positives from one round's queries",
        "",
        "| attack | queries | positives named | precision | recall | random-guess precision |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in rows:
        lines.append(
            f"| {name} | {s['queries']} | {s['correct']} of {s['positives']} | {s['precision']:.3f} | "
            f"{s['recall']:.3f} | {s['chance_precision']:.3f} |"
        )
    lines += ["", "The union of a user's query is visible by design; a recall above 0 names positives.", ""]
    return lines


def audit_queries(cfg: TrainConfig, out_dir: str | Path) -> dict[str, Any]:
    """One round of FedNCF or FedPerGNN in ``real`` crypto mode, transcripts on; both attacks; the report."""
    arm = load_config(base=cfg, transcripts=True, crypto="real")
    data = prepare_interactions(arm)
    learner = ProtocolLearner(arm, data)
    learner.train_round(0)
    report: dict[str, Any] = {
        "protocol": cfg.protocol,
        "dataset": cfg.dataset,
        "rounds": 1,
        "query_order": query_leaks(arm, learner.net.transcript, data.train),
    }
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "audit.json").write_text(json.dumps(report, indent=2) + "\n")
    title = f"# Privacy audit: {cfg.protocol} on {cfg.dataset}, 1 round"
    lines = [title, "", *query_markdown(report["query_order"])]
    (out / "audit.md").write_text("\n".join(lines))
    return report
