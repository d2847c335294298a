"""``fedgraphrec train PROTOCOL``: train a recommender and write a run folder; the summary printer."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from fedgraphrec.cli._app import DataDirOpt, app, err, fail, out, use_data_dir, user_errors


@app.command()
def train(
    protocol: Annotated[
        str,
        typer.Argument(
            help="central, lpgcn, gnn4fr, fedgrec, fedmf, federank, fcf, fedncf, pgcn or fedpergnn."
        ),
    ],
    dataset: Annotated[str | None, typer.Option("--dataset", "-d", help="Dataset name or folder.")] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", "--backbone", "-m", help="mf, lightgcn, lightgcn+, ngcf, ncf or multvae."),
    ] = None,
    config: Annotated[Path | None, typer.Option("--config", "-c", help="TOML configuration file.")] = None,
    overrides: Annotated[
        list[str] | None, typer.Option("--set", help="Override a config key: --set n_layers=2 (repeatable).")
    ] = None,
    epochs: Annotated[int | None, typer.Option(help="Number of epochs.")] = None,
    seed: Annotated[int | None, typer.Option(help="Run seed.")] = None,
    alpha: Annotated[int | None, typer.Option(help="LP-GCN: virtual items per client.")] = None,
    crypto: Annotated[
        str | None, typer.Option(help="real (encrypt for real) or accounted (count bytes).")
    ] = None,
    verify: Annotated[
        bool | None, typer.Option("--verify/--no-verify", help="Run the centralized oracle in lockstep.")
    ] = None,
    data_dir: DataDirOpt = None,
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Run folder (default: runs/<time>-<protocol>-<dataset>).")
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option(help="Resume the run in this folder from its checkpoint (with --epochs: extend it)."),
    ] = None,
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
) -> None:
    """Train a recommender and write a run folder (config, metrics.jsonl, summary.json, curves.png)."""
    from fedgraphrec.training import RunDir, Trainer, default_run_dir, load_config

    use_data_dir(data_dir)
    from fedgraphrec.training.config import PROTOCOLS

    if protocol not in PROTOCOLS:
        raise fail(f"unknown protocol {protocol!r}; available: {', '.join(PROTOCOLS)}")
    with user_errors(crypto_note=" (the run folder keeps the last checkpoint)"):
        if resume is not None:
            if not (resume / "config.toml").exists():
                raise fail(f"{resume}: no config.toml; not a run folder")
            cfg = RunDir(resume).load_config()
            if epochs is not None:  # extend a finished (or interrupted) run to more epochs
                cfg.epochs = epochs
                cfg.validate()
            run_dir = resume
        else:
            cfg = load_config(
                config,
                overrides,
                protocol=protocol,
                dataset=dataset,
                model=model,
                epochs=epochs,
                seed=seed,
                data_dir=data_dir,
                alpha=alpha,
                crypto=crypto,
                verify=verify,
            )
            run_dir = out_dir or default_run_dir(protocol, cfg.dataset)
        err.print(f"run folder: {run_dir}")
        result = Trainer(cfg, run_dir, progress=progress, resume=resume is not None).fit()
    print_summary(result.summary)


def print_summary(summary: dict[str, object]) -> None:
    """The test metrics as a table, then verification, communication, dropouts and notes on stderr."""
    title = f"{summary['protocol']}/{summary['model']} on {summary['dataset']}"
    table = Table(title=f"{title}, epoch {summary['selected_epoch']}")
    table.add_column("metric")
    table.add_column("test", justify="right")
    test = summary.get("test") or {}
    assert isinstance(test, dict)
    for name, value in test.items():
        table.add_row(name, f"{value:.4f}")
    out.print(table)
    if "verify_max_deviation" in summary:
        dev = summary["verify_max_deviation"]
        err.print(f"verify: largest relative parameter deviation from the centralized oracle {dev:.2e}")
    comm = summary.get("communication")
    if isinstance(comm, dict):
        err.print(
            f"communication: {comm['mean_bytes_per_client_per_epoch'] / 1024:.1f} KiB per client per epoch"
        )
    if summary.get("clients_lost") or summary.get("clients_recovered"):
        err.print(
            f"[yellow]dropouts:[/] {summary['clients_lost']} sampled clients were lost before uploading "
            f"(their rounds' work is not in the model); {summary['clients_recovered']} dropped after "
            "uploading and were recovered by secure aggregation"
        )
    if "warning" in summary:
        err.print(f"[yellow]note:[/] {summary['warning']}")
