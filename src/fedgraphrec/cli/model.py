"""``fedgraphrec recommend``, ``export`` and ``evaluate``: use a trained run folder.

Thin wrappers of :class:`fedgraphrec.training.run.Run`: every id is the dataset's original one
(the run folder's ``ids/``), the model is the epoch ``summary.json`` reports unless ``--last``.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from fedgraphrec.cli._app import DataDirOpt, app, err, fail, out, use_data_dir, user_errors

if TYPE_CHECKING:
    from fedgraphrec.training.run import Run

RunArg = Annotated[Path, typer.Argument(help="A run folder written by `fedgraphrec train`.")]
LastOpt = Annotated[
    bool, typer.Option("--last", help="Use the last evaluated epoch's model, not the selected one.")
]


def _open(path: Path, last: bool) -> Run:
    """Load the run; a simulated federated run says on stderr that it holds every client's state."""
    from fedgraphrec.training.run import load_run

    run = load_run(path, "last" if last else "best")
    if run.config.protocol != "central" and not run.on_flower:
        err.print(f"[yellow]note:[/] {escape(run.note)}")
    return run


def _user_list(users: str) -> list[str]:
    """``--users``: a file of ids (one a line, first column; a header ``user…`` skipped) or ``a,b,c``."""
    path = Path(users)
    if path.is_file():
        ids = [line.replace(",", "\t").split("\t")[0].strip() for line in path.read_text().splitlines()]
        ids = [i for i in ids if i]
        return ids[1:] if ids and ids[0].lower() in ("user", "user_id", "userid") else ids
    return [u.strip() for u in users.split(",") if u.strip()]


@app.command()
def recommend(
    run: RunArg,
    users: Annotated[
        str | None,
        typer.Option(
            "--users", "-u", help="User ids: a file (one a line) or a comma-separated list (default: all)."
        ),
    ] = None,
    k: Annotated[int, typer.Option("-k", "--k", help="Items per user.")] = 20,
    out_file: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Write to this .csv or .parquet file (default: stdout, CSV)."),
    ] = None,
    include_seen: Annotated[
        bool, typer.Option("--include-seen", help="Also rank the items users already have in train/valid.")
    ] = False,
    last: LastOpt = False,
    data_dir: DataDirOpt = None,
) -> None:
    """Top-K recommendations (user, rank, item, score) in the dataset's original ids."""
    use_data_dir(data_dir)
    with user_errors():
        loaded = _open(run, last)
        chosen = _user_list(users) if users is not None else None
        if chosen is not None and not chosen:
            raise fail("--users names no user")
        recs = loaded.recommend(chosen, k=k, exclude_seen=not include_seen)
        if out_file is not None:
            recs.write(out_file)
            err.print(f"{len(recs)} recommendations (epoch {loaded.epoch}) written to {out_file}")
            return
    writer = csv.writer(sys.stdout)
    writer.writerow(["user", "rank", "item", "score"])
    for user, rank, item, score in recs.rows():
        writer.writerow([user, rank, item, repr(score)])


@app.command()
def export(
    run: RunArg,
    fmt: Annotated[str, typer.Option("--format", "-f", help="npz or parquet.")] = "npz",
    out_dir: Annotated[Path | None, typer.Option("--out", "-o", help="Folder (default: RUN/export).")] = None,
    last: LastOpt = False,
) -> None:
    """Write the user and item embeddings with their original ids (readable without fedgraphrec)."""
    if fmt not in ("npz", "parquet"):
        raise fail(f"--format must be npz or parquet, got {fmt!r}")
    with user_errors():
        loaded = _open(run, last)
        files = loaded.export(out_dir if out_dir is not None else run / "export", fmt)
    for path in files:
        out.print(str(path), highlight=False)


@app.command()
def evaluate(
    run: RunArg,
    dataset: Annotated[
        str | None,
        typer.Option(
            "--dataset",
            "-d",
            help="Interactions in original ids: a file (user item per line) or a dataset folder "
            "(default: the run's own dataset).",
        ),
    ] = None,
    split: Annotated[str, typer.Option(help="test or valid.")] = "test",
    ks: Annotated[str | None, typer.Option(help="Cut-offs, comma-separated (default: the run's).")] = None,
    last: LastOpt = False,
    data_dir: DataDirOpt = None,
) -> None:
    """Evaluate the run's model on a split of its dataset, or on other interactions."""
    use_data_dir(data_dir)
    if split not in ("test", "valid"):
        raise fail(f"--split must be test or valid, got {split!r}")
    try:
        cutoffs = [int(k) for k in ks.split(",")] if ks else None
    except ValueError:
        raise fail(f"--ks expects comma-separated integers, got {ks!r}") from None
    with user_errors():
        loaded = _open(run, last)
        own = dataset is None or dataset == loaded.config.dataset
        result = loaded.evaluate(split if own else Path(str(dataset)), cutoffs, split=split)
    table = Table(title=f"{run} (epoch {loaded.epoch}) on {split if own else dataset}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in result.items():
        if not name.startswith("rows_"):
            table.add_row(name, f"{value:.4f}")
    out.print(table)
    if "rows_used" in result:
        err.print(
            f"{result['rows_used']} interactions evaluated; dropped {result['rows_unknown']} with a user or "
            f"item the run does not know and {result['rows_seen']} the user already had in train/valid"
        )
