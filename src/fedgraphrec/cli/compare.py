"""``fedgraphrec compare`` and ``fedgraphrec frontier``: methods side by side on one dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fedgraphrec.cli._app import DataDirOpt, app, err, fail, out, use_data_dir, user_errors
from fedgraphrec.cli.train import DatasetOpt, SetOpt

BaseConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="Base TOML configuration.")]
"""The configuration every method of ``compare`` and ``frontier`` starts from."""


@app.command()
def compare(
    methods: Annotated[
        list[str],
        typer.Option("--method", help="protocol[:key=value,...], e.g. central:model=mf (repeatable)."),
    ],
    dataset: DatasetOpt = None,
    config: BaseConfigOpt = None,
    overrides: SetOpt = None,
    seeds: Annotated[
        list[int] | None, typer.Option("--seed", help="Seeds (repeatable; default 2020).")
    ] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for the runs and the table.")] = Path(
        "runs/compare"
    ),
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = False,
    references: Annotated[
        bool, typer.Option(help="Add the popularity and random-ranking rows (same split and masking).")
    ] = True,
    data_dir: DataDirOpt = None,
) -> None:
    """Run several methods on one dataset with the same split, seeds and budget; write a table."""
    use_data_dir(data_dir)
    from fedgraphrec.reproduce.compare import compare as run_compare
    from fedgraphrec.reproduce.compare import parse_method

    base = [*(overrides or []), *([f"dataset={dataset}"] if dataset else [])]
    with user_errors():
        specs = [parse_method(m) for m in methods]
        rows = run_compare(
            specs,
            seeds or [2020],
            out_dir,
            config=config,
            overrides=base,
            progress=progress,
            references=references,
        )
    out.print((out_dir / "compare.md").read_text())
    err.print(f"{len(rows)} methods → {out_dir}/compare.csv, compare.md, compare.json")


@app.command()
def frontier(
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="Dataset name or folder.")],
    config: BaseConfigOpt = None,
    overrides: Annotated[
        list[str] | None, typer.Option("--set", help="Override a config key for every method (repeatable).")
    ] = None,
    seeds: Annotated[list[int] | None, typer.Option("--seed", help="Seeds (repeatable; default 1).")] = None,
    only: Annotated[
        list[str] | None, typer.Option("--only", help="Only these methods by label (repeatable).")
    ] = None,
    attack: Annotated[
        bool, typer.Option(help="Measure the server's inference (short real-crypto runs).")
    ] = True,
    reuse: Annotated[
        list[Path] | None,
        typer.Option(help="`compare` folders (same config) whose methods are not rerun (repeatable)."),
    ] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("runs/frontier"),
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = False,
    data_dir: DataDirOpt = None,
) -> None:
    """Every horizontal method on one dataset: utility, privacy (ε, measured leakage) and bytes."""
    use_data_dir(data_dir)
    from fedgraphrec.reproduce.frontier import HORIZONTAL
    from fedgraphrec.reproduce.frontier import frontier as run_frontier

    methods = [m for m in HORIZONTAL if not only or m.label in only]
    if not methods:
        raise fail(f"--only matches no method; methods: {', '.join(m.label for m in HORIZONTAL)}")
    with user_errors():
        run_frontier(
            dataset, out_dir, methods=methods, seeds=seeds or [1], config=config, overrides=overrides or (),
            attack=attack, reuse=reuse or (), progress=progress,
        )  # fmt: skip
    out.print((out_dir / "frontier.md").read_text())
    err.print(f"→ {out_dir}/frontier.md, frontier.json, frontier.csv, frontier.png")
