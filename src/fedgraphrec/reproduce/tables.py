"""Paper tables, reproduced side by side: ``fedgraphrec reproduce TABLE``.

A :class:`PaperTable` names the dataset copy, the shared settings, the paper's rows (each a
:func:`~fedgraphrec.reproduce.compare.compare` method with the paper's numbers) and two budgets:
``cpu`` (fits a few hours on the 2-core development machine; the numbers are those of an
under-trained model where the paper trains for 1,000 epochs) and ``full`` (the paper's epochs and
seeds, for a GPU). :func:`reproduce` runs every row through the ordinary training loop and writes
``reproduce.md`` / ``.json`` / ``.csv`` and a bar chart: ours (mean ± std over seeds) beside the
paper, the difference, and a one-word verdict per cell:

* ``matches``: within 5 % of the paper's value (relative);
* ``within noise``: within two standard deviations (ours or the paper's, whichever is larger);
* ``deviates``: neither; the table's note says what differs (budget, dataset copy, …).

Round-based methods (FedGRec's family, FedNCF, FedPerGNN) count rounds as epochs; each table states
how many rounds its budget gives them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedgraphrec.reproduce.compare import MethodSpec, compare, parse_method
from fedgraphrec.reproduce.papers import PaperDataError, Section, paper
from fedgraphrec.reproduce.report import PaperRow, paper_cells, write_report

__all__ = [
    "TABLES",
    "Budget",
    "PaperTable",
    "budget_of",
    "budgets_of",
    "paper_rows",
    "report_head",
    "reproduce",
]


@dataclass(frozen=True)
class Budget:
    """Overrides and seeds of one budget, and what it means for the numbers."""

    overrides: tuple[str, ...]
    seeds: tuple[int, ...]
    note: str
    round_overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class PaperTable:
    """A paper table we can run."""

    name: str
    title: str
    source: str
    dataset: str
    data_note: str
    base: tuple[str, ...]
    rows: tuple[PaperRow, ...]
    budgets: dict[str, Budget]


# ---------------------------------------------------------------------------------------------
# The tables. The papers' numbers, the method of each row and the budgets are data
# (``papers/<paper>.toml``, :mod:`~fedgraphrec.reproduce.papers`); here, what each table is.


def budget_of(sec: Section) -> Budget:
    """A :class:`Budget` from a data file's budget table (``overrides``, ``seeds``, ``note``)."""
    rounds = sec.texts("round_overrides") if sec.has("round_overrides") else ()
    return Budget(sec.texts("overrides"), sec.integers("seeds"), sec.text("note"), rounds)


def budgets_of(sec: Section) -> dict[str, Budget]:
    """Every budget of a data file's ``budgets`` table, by name (``cpu``, ``full``)."""
    return {name: budget_of(sec.section(name)) for name in sec.names()}


def paper_rows(table: Section, dataset: str) -> tuple[PaperRow, ...]:
    """The rows of a paper table on ``dataset``: label, method, the paper's numbers (and stds).

    ``table.paper.<dataset>`` maps each label to its metrics' values in ``table.metrics``' order,
    then optionally their standard deviations; ``table.methods`` gives each label's method.
    """
    metrics, methods, rounds = table.texts("metrics"), table.section("methods"), set(table.texts("rounds"))
    numbers = table.section("paper").section(dataset)
    rows = []
    for label in numbers.names():
        values = numbers.numbers(label)
        if len(values) not in (len(metrics), 2 * len(metrics)):
            raise PaperDataError(
                f"{numbers.where}.{label}: expected {len(metrics)} or {2 * len(metrics)} numbers"
            )
        printed = dict(zip(metrics, values[: len(metrics)], strict=True))
        std = dict(zip(metrics, values[len(metrics) :], strict=True)) if len(values) > len(metrics) else {}
        rows.append(PaperRow(label, methods.text(label), printed, std, rounds=label in rounds))
    return tuple(rows)


def _table(name: str, title: str, section: Section, dataset: str, data_note: str) -> PaperTable:
    """The table a paper data file's ``section`` prints for ``dataset``: its source, base, rows, budgets."""
    return PaperTable(
        name=name,
        title=title,
        source=section.text("source"),
        dataset=dataset,
        data_note=data_note,
        base=section.texts("base"),
        rows=paper_rows(section, dataset),
        budgets=budgets_of(section.section("budgets")),
    )


def _tables() -> dict[str, PaperTable]:
    tables = [
        _table(
            "gnn4fr-t1",
            "GNN4FR Table 1: LightGCN and GNN4FR on MovieLens-100K (u1, ratings ≥ 4)",
            paper("gnn4fr").section("t1"),
            "ml-100k",
            "ML-100K u1.base/u1.test, ratings ≥ 4, ids compacted over train (942 × 1,408)",
        )
    ]
    t4, t1 = paper("lpgcn").section("t4"), paper("fedgrec").section("t1")
    for ds in ("gowalla", "yelp2018"):
        tables.append(
            _table(
                f"lpgcn-t4-{ds}",
                f"LP-GCN Table 4 on {ds}: Recall@20 / NDCG@20 of centralized and federated methods",
                t4,
                ds,
                f"{ds}: the LightGCN release's train/test split (the paper re-splits 80/10/10)",
            )
        )
        tables.append(
            _table(
                f"fedgrec-t1-{ds}",
                f"FedGRec Table 1 on {ds}: Recall@20 / NDCG@20",
                t1,
                ds,
                f"{ds}: the LightGCN release's train/test split, as the paper",
            )
        )
    return {t.name: t for t in tables}


TABLES = _tables()


def reproduce(
    name: str,
    out_dir: str | Path,
    *,
    budget: str = "cpu",
    rows: Sequence[str] = (),
    overrides: Sequence[str] = (),
    progress: bool = False,
) -> dict[str, Any]:
    """Run table ``name`` at ``budget`` (only ``rows`` when given) and write the side-by-side report.

    Raises:
        KeyError: unknown table, budget or row label.
    """
    if name not in TABLES:
        raise KeyError(f"unknown table {name!r}; available: {', '.join(TABLES)}")
    table = TABLES[name]
    if budget not in table.budgets:
        raise KeyError(f"table {name} has budgets {', '.join(table.budgets)}, not {budget!r}")
    chosen = [r for r in table.rows if not rows or r.label in rows]
    missing = set(rows) - {r.label for r in table.rows}
    if missing:
        raise KeyError(f"table {name} has no rows {sorted(missing)}; rows: {[r.label for r in table.rows]}")
    plan = table.budgets[budget]
    methods = []
    for r in chosen:  # the caller's overrides come last: they win over the row's and the budget's
        spec = parse_method(r.method)
        extra = (*(plan.round_overrides if r.rounds else ()), *overrides)
        methods.append(MethodSpec(label=r.label, protocol=spec.protocol, overrides=(*spec.overrides, *extra)))
    out = Path(out_dir)
    results = compare(
        methods,
        plan.seeds,
        out / "runs",
        overrides=[f"dataset={table.dataset}", *table.base, *plan.overrides],
        progress=progress,
    )
    by_label = {row["method"]: row for row in results}
    report_rows = []
    for r in chosen:
        ours = by_label[r.label]
        cells = paper_cells(
            r, {m: (ours.get(f"{m}_mean", math.nan), ours.get(f"{m}_std", math.nan)) for m in r.paper}
        )
        report_rows.append(
            {
                "row": r.label,
                "method": r.method,
                "cells": cells,
                "bytes_per_client_per_epoch": ours["bytes_per_client_per_epoch"],
                "epochs": ours["epochs"],
            }
        )
    report = {
        **report_head(table, budget, plan.note, plan.seeds),
        "overrides": list(overrides),
        "rows": report_rows,
    }
    write_report(report, out)
    return report


def report_head(table: Any, budget: str, note: str, seeds: Sequence[int]) -> dict[str, Any]:
    """The entries every paper-table report starts with: the table, its data and the budget run."""
    return {
        "table": table.name,
        "title": table.title,
        "source": table.source,
        "data": table.data_note,
        "budget": budget,
        "budget_note": note,
        "seeds": list(seeds),
    }
