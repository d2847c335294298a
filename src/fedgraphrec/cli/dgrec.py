"""``fedgraphrec dgrec VARIANT``: train DGREC or a variant (decentralised gossip); one JSON per run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from fedgraphrec.cli._app import DataDirOpt, app, err, out, use_data_dir, user_errors


@app.command(name="dgrec", hidden=True, deprecated=True)
def dgrec_cmd(
    variant: Annotated[
        str, typer.Argument(help="dgrec, an ablation (non-*), local-only, dmf or dlgnn.")
    ] = "dgrec",
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="flixster or ciao-10core.")] = "flixster",
    seed: Annotated[int, typer.Option(help="Run seed.")] = 0,
    epochs: Annotated[int, typer.Option(help="Epochs.")] = 5,
    centres: Annotated[int | None, typer.Option(help="Group centres per epoch (default: all users).")] = None,
    public_ratio: Annotated[
        float, typer.Option(help="Fraction of training items each user publicises.")
    ] = 1.0,
    lr: Annotated[float | None, typer.Option(help="SGD learning rate.")] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Result folder.")] = Path("results/dgrec/runs"),
    secure_noise: Annotated[
        bool,
        typer.Option(
            "--secure-noise",
            help="Draw the LDP randomness from the OS CSPRNG (a guarantee; not reproducible).",
        ),
    ] = False,
    data_dir: DataDirOpt = None,
) -> None:
    """Moved to ``fedgraphrec train dgrec --variant VARIANT`` (a standard run folder); writes the old JSON."""
    from fedgraphrec.reproduce.dgrec_runs import run_and_save

    use_data_dir(data_dir)
    err.print(
        "[yellow]note:[/] `fedgraphrec dgrec` moved to `fedgraphrec train dgrec --variant VARIANT` "
        "(a standard run folder; settings by --set); this alias still writes the old one-JSON output"
    )

    with user_errors():
        over: dict[str, Any] = {} if lr is None else {"lr": lr}
        res = run_and_save(
            dataset, variant, seed, epochs, out_dir, centres, public_ratio, secure_noise=secure_noise, **over
        )
    out.print(json.dumps({k: res[k] for k in ("variant", "seed", "metrics", "noise_source", "seconds")}))
