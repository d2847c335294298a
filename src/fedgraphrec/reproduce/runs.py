"""Paper tables whose rows are not ranking runs: P4GCN (ratings, RMSE/MAE) and DGREC (gossip).

``fedgraphrec reproduce p4gcn-t1-filmtrust`` works like the ranking tables of
:mod:`~fedgraphrec.reproduce.tables` (same report, same verdict rule), but each row is one
method of a dedicated runner — :mod:`~fedgraphrec.reproduce.p4gcn_table` or
:mod:`~fedgraphrec.reproduce.dgrec_runs` — whose per-run JSON files (one per method and seed) are kept
in ``OUT/runs``. A run file already there is not run again, so an interrupted table resumes, and
``reuse=`` names folders of committed run files (``results/p4gcn/table1``) to rebuild the
report without training: the report then states which budget those files were made with.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fedgraphrec.reproduce.p4gcn_summary import PAPER as P4GCN_PAPER
from fedgraphrec.reproduce.pairwise import pairwise
from fedgraphrec.reproduce.papers import paper
from fedgraphrec.reproduce.report import PaperRow, paper_cells, reported, write_report
from fedgraphrec.reproduce.tables import Budget, budget_of, budgets_of, report_head

__all__ = [
    "DGREC_ROW_ARGS",
    "RUN_TABLES",
    "RunTable",
    "reproduce_runs",
    "run_file",
    "train_runner",
]


@dataclass(frozen=True)
class RunTable:
    """A paper table run by a dedicated runner (``kind``: ``"p4gcn"`` or ``"dgrec"``).

    ``row_args``: extra runner arguments of one row under one budget (``{"cpu": {"PMF": (...)}}``),
    for rows the committed runs trained differently (shorter on the larger dataset). ``row_seeds``:
    the seeds of one row under one budget where they are fewer than the budget's (a long run the
    CPU budget affords once).
    """

    name: str
    title: str
    source: str
    dataset: str
    data_note: str
    kind: str
    rows: tuple[PaperRow, ...]
    budgets: dict[str, Budget]
    row_args: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    row_seeds: dict[str, dict[str, tuple[int, ...]]] = field(default_factory=dict)
    pairs: tuple[tuple[str, str], ...] = ()  # rows compared with each other (:mod:`~.pairwise`)


# ---------------------------------------------------------------------------------------------
# P4GCN (spec p4gcn.md §7.6–7.7). Methods are p4gcn_table's names.

_P4GCN_METHOD = {
    "PMF": "pmf", "NeuMF": "neumf", "GCN": "gcn", "LightGCN": "lightgcn", "FeSog-": "fesog-",
    "SeSoRec / S3Rec": "sesorec",
    "P4GCN (DP)": "p4gcn", "P4GCN* (no DP)": "p4gcn*", "P4GCN-PMF (DP)": "p4gcn-pmf",
    "P4GCN-PMF* (no DP)": "p4gcn-pmf*", "P4GCN-GCN (DP)": "p4gcn-gcn", "P4GCN-GCN* (no DP)": "p4gcn-gcn*",
}  # fmt: skip
# The paper's numbers are stored once, in p4gcn_summary.PAPER (by method); these are the rows' labels.
_P4GCN_T1_LABELS = (
    "PMF", "NeuMF", "GCN", "LightGCN", "SeSoRec / S3Rec", "FeSog-", "P4GCN (DP)", "P4GCN* (no DP)",
)  # fmt: skip
_P4GCN_T2_LABELS = (
    "PMF", "P4GCN-PMF (DP)", "P4GCN-PMF* (no DP)", "GCN", "P4GCN-GCN (DP)", "P4GCN-GCN* (no DP)",
)  # fmt: skip
_P4GCN_T1 = {
    ds: {label: P4GCN_PAPER[ds][_P4GCN_METHOD[label]] for label in _P4GCN_T1_LABELS}
    for ds in ("filmtrust", "ciao", "douban", "epinions")
}
_P4GCN_T2_FILMTRUST = {label: P4GCN_PAPER["filmtrust"][_P4GCN_METHOD[label]] for label in _P4GCN_T2_LABELS}
# Budgets (runner arguments, seeds) are data: papers/p4gcn-tables.toml, t12.budgets.
_P4GCN_PLAN = paper("p4gcn-tables").section("t12").section("budgets")
_P4GCN_COMMON = _P4GCN_PLAN.texts("common")
_P4GCN_BUDGETS = {ds: _P4GCN_PLAN.section("cpu").texts(ds) for ds in _P4GCN_PLAN.section("cpu").names()}
_P4GCN_NOTE = {
    "filmtrust": "FilmTrust: seeded 80/10/10 split of the ratings, the trust graph symmetrised (A1)",
    "douban": "Douban (Monti): the fixed split, 10 % of train held out for validation",
    "ciao": "Ciao (Tang's release, 105k items against the paper's 99.7k): seeded 80/10/10 split",
    "epinions": "Epinions (Tang's release, +26.6 % ratings against the paper): seeded 80/10/10 split",
}


def _rating_rows(numbers: dict[str, tuple[float, float]]) -> tuple[PaperRow, ...]:
    return tuple(
        PaperRow(label, _P4GCN_METHOD[label], {"rmse": v[0], "mae": v[1]}) for label, v in numbers.items()
    )


def _p4gcn_row_args(dataset: str) -> dict[str, tuple[str, ...]]:
    """Rows of ``dataset``'s CPU budget the committed runs trained differently (label → arguments)."""
    rows = _P4GCN_PLAN.section("cpu_rows")
    if not rows.has(dataset):
        return {}
    return {label: rows.section(dataset).texts(label) for label in rows.section(dataset).names()}


def _p4gcn_tables() -> list[RunTable]:
    tables = []
    seeds = _P4GCN_PLAN.integers("cpu_seeds")
    for ds, numbers in _P4GCN_T1.items():
        cpu_args = (*_P4GCN_COMMON, *_P4GCN_BUDGETS[ds])
        tables.append(
            RunTable(
                name=f"p4gcn-t1-{ds}",
                title=f"P4GCN Table 1 on {ds}: test RMSE / MAE (DP ε of the paper, δ = 1e-4)",
                source="specs/p4gcn.md §7.6",
                dataset=ds,
                data_note=_P4GCN_NOTE[ds],
                kind="p4gcn",
                rows=_rating_rows(numbers),
                budgets={
                    "cpu": Budget(
                        cpu_args,
                        seeds,
                        "CPU budget: d = 64, Adam, early stopping on validation RMSE; p4gcn_table "
                        f"arguments {' '.join(cpu_args)} (a later one overrides an earlier); "
                        f"{len(seeds)} seeds",
                    ),
                    "full": budget_of(_P4GCN_PLAN.section("full-t1")),
                },
                row_args={"cpu": rows} if (rows := _p4gcn_row_args(ds)) else {},
            )
        )
    t2_args, t2_seeds = (*_P4GCN_COMMON, *_P4GCN_BUDGETS["filmtrust"]), _P4GCN_PLAN.integers("t2_cpu_seeds")
    tables.append(
        RunTable(
            name="p4gcn-t2-filmtrust",
            title="P4GCN Table 2 on FilmTrust: the P4 layer on PMF and GCN backbones (RMSE / MAE)",
            source="specs/p4gcn.md §7.7",
            dataset="filmtrust",
            data_note=_P4GCN_NOTE["filmtrust"],
            kind="p4gcn",
            rows=_rating_rows(_P4GCN_T2_FILMTRUST),
            budgets={
                "cpu": Budget(
                    t2_args,
                    t2_seeds,
                    f"CPU budget: runner arguments {' '.join(t2_args)}; seed {', '.join(map(str, t2_seeds))}",
                ),
                "full": budget_of(_P4GCN_PLAN.section("full-t2")),
            },
        )
    )
    return tables


# ---------------------------------------------------------------------------------------------
# DGREC (spec dgrec.md §8.6, Table 2; ×100 in the paper, fractions here).

# The paper's numbers and our budgets are data: papers/dgrec-tables.toml.
_DG_T2 = paper("dgrec-tables").section("t2")
_DGREC_VARIANT = {
    "DMF": "dmf", "DLGNN": "dlgnn", "DGREC": "dgrec", "DGREC, no noise (clipped mean)": "no-noise",
    "Popularity (train counts)": "popularity", "Random ranking": "random",
}  # fmt: skip
_NO_PAPER = (math.nan, math.nan, 0.0, 0.0)  # our reference rows: the paper has no number for them
_DGREC_PAIRS = tuple(
    (a, b)
    for a, b in (
        ("DGREC", "DMF"), ("DGREC", "DLGNN"), ("DGREC", "DGREC, no noise (clipped mean)"),
        ("DGREC", "Random ranking"), ("DGREC", "Popularity (train counts)"),
        ("DMF", "Popularity (train counts)"), ("DLGNN", "Popularity (train counts)"),
    )
)  # fmt: skip
# DMF/DLGNN under the CPU budget: as many member gradient steps as DGREC's group steps, every user a
# centre each epoch, each method's tuned lr (see the data file and results/dgrec/README.md "Diagnosis").
DGREC_ROW_ARGS: dict[str, tuple[str, ...]] = {
    label: _DG_T2.section("rows").texts(label) for label in _DG_T2.section("rows").names()
}
_DGREC_BUDGETS = budgets_of(_DG_T2.section("budgets"))


def _dgrec_rows(dataset: str) -> tuple[PaperRow, ...]:
    """Table 2's rows on ``dataset`` (the paper's % → fractions) and our reference rows."""
    numbers = _DG_T2.section("paper").section(dataset)
    printed = {label: numbers.numbers(label) for label in numbers.names()}
    return tuple(
        PaperRow(
            label,
            _DGREC_VARIANT[label],
            {"recall@20": v[0] / 100, "ndcg@20": v[1] / 100},
            {"recall@20": v[2] / 100, "ndcg@20": v[3] / 100},
        )
        for label, v in {**printed, **{k: _NO_PAPER for k in list(_DGREC_VARIANT)[3:]}}.items()
    )


def _row_args(dataset: str) -> dict[str, tuple[str, ...]]:
    """Each row's runner arguments on ``dataset``: ``t2.rows-<dataset>`` over ``t2.rows`` (Ciao's)."""
    own = _DG_T2.section(f"rows-{dataset}") if _DG_T2.has(f"rows-{dataset}") else None
    return {**DGREC_ROW_ARGS, **({} if own is None else {k: own.texts(k) for k in own.names()})}


def _row_seeds(dataset: str) -> dict[str, tuple[int, ...]]:
    """Rows run with fewer seeds than their budget on ``dataset`` (``t2.seeds-<dataset>``)."""
    if not _DG_T2.has(f"seeds-{dataset}"):
        return {}
    sec = _DG_T2.section(f"seeds-{dataset}")
    return {label: sec.integers(label) for label in sec.names()}


_WEEPLACES_NOTE = (
    "Weeplaces (GroupIM's copy): every check-in pair, iterated 10-core (6,167 users × 11,678 POIs, "
    "427,236 pairs; the paper's 8,720 × 7,407, 546,781), per-user 80/20 split; no friendships or "
    "categories in the copy: users sharing a GroupIM group are linked, a group's POIs some member "
    "holds in training and none in test form a hyperedge"
)


def _dgrec_tables() -> list[RunTable]:
    def table(name: str, dataset: str, column: str, title: str, note: str, budget: str) -> RunTable:
        return RunTable(
            name=name,
            title=f"DGREC Table 2 on {title}: decentralized methods, Recall@20 / NDCG@20",
            source="specs/dgrec.md §8.6" + ("" if column == dataset else f" ({column.title()} column)"),
            dataset=dataset,
            data_note=note,
            kind="dgrec",
            rows=_dgrec_rows(column),
            budgets={"cpu": _DGREC_BUDGETS[budget], "full": _DGREC_BUDGETS["full"]},
            row_args={"cpu": _row_args(dataset)},
            row_seeds={"cpu": _row_seeds(dataset)},
            pairs=_DGREC_PAIRS,
        )

    return [
        table(
            "dgrec-t2-flixster", "flixster", "flixster", "Flixster",
            "Flixster (Monti's 3,000 × 3,000, fixed split; −45.9 % interactions vs the paper's)",
            "cpu-flixster",
        ),
        table(
            "dgrec-t2-weeplaces", "weeplaces", "weeplaces", "Weeplaces", _WEEPLACES_NOTE, "cpu-weeplaces"
        ),
        table(
            "dgrec-t2-ciao", "ciao-10core", "weeplaces", "Ciao (for Weeplaces)",
            "Ciao iterated 10-core (2,540 users × 3,018 items, 71,646 interactions; the loader's "
            "seeded per-user 80/10/10 split, its validation part unused: the runner carves its own) "
            "standing in for the paper's Weeplaces (8,720 × 7,407, 546,781): trust links as "
            "friendships, 23 categories as tags",
            "cpu-ciao",
        ),
    ]  # fmt: skip


RUN_TABLES: dict[str, RunTable] = {t.name: t for t in (*_p4gcn_tables(), *_dgrec_tables())}


# ---------------------------------------------------------------------------------------------


def run_file(kind: str, dataset: str, method: str, seed: int, ratio: float = 1.0) -> str:
    """The name a runner gives the JSON of one run (``kind``: ``p4gcn`` or ``dgrec``)."""
    if kind == "p4gcn":
        return f"{dataset}_{method.replace('*', '_ideal')}_s{seed}.json"
    return f"{dataset}_{method}_r{float(ratio)}_s{seed}.json"


def train_runner(kind: str, dataset: str, method: str, seed: int, args: Sequence[str], folder: Path) -> None:
    """Run one method and seed with a runner; it writes its JSON (:func:`run_file`) into ``folder``.

    ``args``: ``p4gcn_table`` arguments, or for DGREC ``--epochs``, ``--centres``, ``--lr``,
    ``--public-ratio``, ``--delta``, ``--beta``, ``--hops`` (H), ``--fanout`` (n_u),
    ``--n-interests`` (n_i), ``--d-interest`` (d_i), ``--batch``, ``--l2``, ``--loss-scale``,
    ``--eval-every``. The reference rows (``popularity``, ``random``) ignore the training flags.
    """
    if kind == "p4gcn":
        from fedgraphrec.reproduce import p4gcn_table

        p4gcn_table.run_table(
            dataset, [method], [seed], p4gcn_table.settings_from_flags(args, dataset=dataset), folder
        )
        return
    from fedgraphrec.reproduce import dgrec_runs as dgrec

    opts = dict(zip(args[::2], args[1::2], strict=True))
    unknown = set(opts) - {"--epochs", "--centres", *_DGREC_FLOATS, *_DGREC_INTS, *_DGREC_STRS}
    if unknown:
        raise ValueError(f"unknown DGREC runner arguments {sorted(unknown)}")
    values: dict[str, Any] = {key: float(opts[flag]) for flag, key in _DGREC_FLOATS.items() if flag in opts}
    values.update({key: int(float(opts[flag])) for flag, key in _DGREC_INTS.items() if flag in opts})
    values.update({key: opts[flag] for flag, key in _DGREC_STRS.items() if flag in opts})
    dgrec.run_and_save(
        dataset,
        method,
        seed,
        int(opts.get("--epochs", 0)),
        folder,
        centres=int(opts["--centres"]) if "--centres" in opts else None,
        **values,
    )


# DGREC runner flags → run_and_save keywords
_DGREC_FLOATS = {
    "--lr": "lr",
    "--public-ratio": "public_ratio",
    "--delta": "delta",
    "--beta": "beta",
    "--l2": "l2",
}
_DGREC_INTS = {
    "--hops": "hops",
    "--fanout": "fanout",
    "--n-interests": "n_interests",
    "--d-interest": "d_interest",
    "--batch": "batch",
    "--eval-every": "eval_every",
}
_DGREC_STRS = {"--loss-scale": "loss_scale"}


def _metrics(table: RunTable, run: dict[str, Any]) -> dict[str, float]:
    if table.kind == "p4gcn":
        return {"rmse": float(run["test_rmse"]), "mae": float(run["test_mae"])}
    return {k: float(v) for k, v in reported(run).items()}


def reproduce_runs(
    name: str,
    out_dir: str | Path,
    *,
    budget: str = "cpu",
    rows: Sequence[str] = (),
    reuse: Sequence[str | Path] = (),
) -> dict[str, Any]:
    """Run (or, with ``reuse``, collect) table ``name`` and write the side-by-side report.

    Raises:
        KeyError: unknown table, budget or row label.
        FileNotFoundError: ``reuse`` lacks a run file of a chosen row and seed.
    """
    if name not in RUN_TABLES:
        raise KeyError(f"unknown table {name!r}; available: {', '.join(RUN_TABLES)}")
    table = RUN_TABLES[name]
    if budget not in table.budgets:
        raise KeyError(f"table {name} has budgets {', '.join(table.budgets)}, not {budget!r}")
    missing = set(rows) - {r.label for r in table.rows}
    if missing:
        raise KeyError(f"table {name} has no rows {sorted(missing)}; rows: {[r.label for r in table.rows]}")
    chosen = [r for r in table.rows if not rows or r.label in rows]
    plan = table.budgets[budget]
    out = Path(out_dir)
    folders = [Path(f) for f in reuse] or [out / "runs"]
    folders[0].mkdir(parents=True, exist_ok=True)
    report_rows = []
    seeds_of: dict[str, list[dict[str, float]]] = {}
    for r in chosen:
        per_seed = seeds_of.setdefault(r.label, [])
        for seed in table.row_seeds.get(budget, {}).get(r.label, plan.seeds):
            found = [f / run_file(table.kind, table.dataset, r.method, seed) for f in folders]
            path = next((p for p in found if p.exists()), found[0])
            if not path.exists():
                if reuse:
                    where = ", ".join(map(str, folders))
                    raise FileNotFoundError(f"no run of {r.label} (seed {seed}) to reuse in {where}")
                extra = table.row_args.get(budget, {}).get(r.label, ())
                train_runner(table.kind, table.dataset, r.method, seed, (*plan.overrides, *extra), folders[0])
            per_seed.append(_metrics(table, json.loads(path.read_text())))
        ours = {}
        for metric in r.paper:
            values = np.array([m.get(metric, math.nan) for m in per_seed])
            ours[metric] = (float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else 0.0)
        cells = paper_cells(r, ours)
        report_rows.append({"row": r.label, "method": r.method, "cells": cells, "seeds": len(per_seed)})
    note = plan.note + (f" (run files from {', '.join(map(str, folders))})" if reuse else "")
    report = {
        **report_head(table, budget, note, plan.seeds),
        "overrides": [],
        "rows": report_rows,
        "pairwise": pairwise(
            seeds_of, table.pairs, ("recall@20", "ndcg@20") if table.kind == "dgrec" else ()
        ),
    }
    write_report(report, out)
    return report
