"""``fedgraphrec reproduce TABLE``: our numbers beside a paper's, with a verdict per cell."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fedgraphrec.cli._app import DataDirOpt, app, err, fail, out, use_data_dir, user_errors


@app.command()
def reproduce(
    table: Annotated[str | None, typer.Argument(help="Table name (omit, or --list, to see them).")] = None,
    budget: Annotated[str, typer.Option(help="cpu (a few hours here) or full (the paper's; a GPU).")] = "cpu",
    rows: Annotated[
        list[str] | None, typer.Option("--row", help="Only these rows (repeatable), e.g. --row P-GCN.")
    ] = None,
    overrides: Annotated[
        list[str] | None, typer.Option("--set", help="Override a config key for every row (repeatable).")
    ] = None,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Output folder (default runs/reproduce/TABLE).")
    ] = None,
    list_tables: Annotated[bool, typer.Option("--list", help="List the tables and exit.")] = False,
    reuse: Annotated[
        list[Path] | None,
        typer.Option(
            help="P4GCN/DGREC tables and figures: folders of run files (or a figure's curve files) "
            "to report, not train (repeatable)."
        ),
    ] = None,
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = False,
    data_dir: DataDirOpt = None,
) -> None:
    """Reproduce a paper table: our numbers beside the paper's, with a verdict per cell."""
    use_data_dir(data_dir)
    from fedgraphrec.reproduce.figures import reproduce_figure
    from fedgraphrec.reproduce.formula_tables import COMM_TABLES, FIG13, reproduce_comm, reproduce_fig13
    from fedgraphrec.reproduce.paper_figures import FIGURES
    from fedgraphrec.reproduce.runs import RUN_TABLES, RunTable, reproduce_runs
    from fedgraphrec.reproduce.tables import TABLES, PaperTable
    from fedgraphrec.reproduce.tables import reproduce as run_reproduce

    if table is None or list_tables:
        listed: list[PaperTable | RunTable] = [*TABLES.values(), *RUN_TABLES.values()]
        for t in listed:
            out.print(
                f"[bold]{t.name}[/bold]  {t.title}  ({len(t.rows)} rows; budgets {', '.join(t.budgets)})"
            )
        for name, title in COMM_TABLES.items():
            out.print(f"[bold]{name}[/bold]  {title}  (byte formulas; no training)")
        for fig in FIGURES.values():
            out.print(f"[bold]{fig.name}[/bold]  {fig.title}  ({len(fig.series)} series; figure + claims)")
        for name, (ds, *_, graph) in FIG13.items():
            out.print(
                f"[bold]{name}[/bold]  LP-GCN Fig. 13 on {ds} ({graph} graph): range of k, trends of C, R"
            )
        return
    target = out_dir or Path("runs/reproduce") / table
    with user_errors(lookups=True):
        if table in COMM_TABLES:
            reproduce_comm(table, target, reuse=reuse or ())
            return
        if table in FIG13:
            reproduce_fig13(table, target, reuse=reuse or ())
        elif table in FIGURES:
            if overrides or rows:
                raise fail(f"--set / --row do not apply to {table}: a figure runs all its series")
            reproduce_figure(table, target, budget=budget, reuse=reuse or ())
        elif table in RUN_TABLES:
            if overrides:
                raise fail(f"--set does not apply to {table}: its rows are runner commands, not configs")
            reproduce_runs(table, target, budget=budget, rows=rows or (), reuse=reuse or ())
        elif reuse:
            raise fail(f"--reuse applies to the P4GCN, DGREC and figure tables, not to {table}")
        else:
            run_reproduce(
                table, target, budget=budget, rows=rows or (), overrides=overrides or (), progress=progress
            )
    out.print((target / "reproduce.md").read_text())
    err.print(f"→ {target}/reproduce.md, reproduce.json, reproduce.png")
