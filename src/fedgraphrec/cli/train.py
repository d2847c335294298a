"""``fedgraphrec train PROTOCOL``: train a recommender and write a run folder; the summary printer."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import click
import typer
from rich.table import Table
from typer.core import TyperCommand

from fedgraphrec.cli._app import DataDirOpt, app, err, fail, out, use_data_dir, user_errors
from fedgraphrec.cli.settings import settings_table

if TYPE_CHECKING:
    from fedgraphrec.training.config import TrainConfig


DatasetOpt = Annotated[str | None, typer.Option("--dataset", "-d", help="Dataset name or folder.")]
ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="TOML configuration file.")]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Override a config key (repeatable): --set protocol.alpha=5, --set eval.ks=[5,20]; a bare key "
        "that belongs to one place is a shorthand (--set alpha=5, --set ks=[5,20]).",
    ),
]
EpochsOpt = Annotated[
    int | None,
    typer.Option(help="Number of epochs (at least 1; with --resume: extend the run to this many)."),
]
SeedOpt = Annotated[int | None, typer.Option(help="Run seed.")]
CryptoOpt = Annotated[str | None, typer.Option(help="real (encrypt for real) or accounted (count bytes).")]
OutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        help="Run folder (default: runs/<time>-<protocol>-<dataset>); a folder holding a run needs "
        "--overwrite.",
    ),
]
OverwriteOpt = Annotated[
    bool,
    typer.Option(
        "--overwrite",
        help="Replace the run in --out: its old files are removed first (a non-empty folder that holds no "
        "run is never touched).",
    ),
]
"""The options every command that trains takes (``train``, ``flower simulate``, ``flower deploy``)."""


def train_config(
    protocol: str,
    dataset: str | None,
    config: Path | None,
    overrides: list[str] | None,
    epochs: int | None,
    seed: int | None,
    crypto: str | None,
    data_dir: str | None,
    **options: Any,
) -> TrainConfig:
    """The run's configuration: defaults < ``--config`` TOML < named options < ``--set``."""
    from fedgraphrec.training.loading import load_config

    return load_config(
        config,
        overrides,
        protocol=protocol,
        dataset=dataset,
        epochs=epochs,
        seed=seed,
        data_dir=data_dir,
        crypto=crypto,
        **options,
    )


def resumed_config(
    run: Path,
    protocol: str,
    dataset: str | None,
    config: Path | None,
    overrides: list[str] | None,
    epochs: int | None,
    **options: Any,
) -> TrainConfig:
    """The configuration ``--resume RUN`` continues: ``RUN/config.toml`` with the options on top.

    Resuming continues the same run, so every option (named, ``--set``, ``--config``) may only repeat
    the run's own values; only ``epochs`` may differ (a larger value extends the run, the checkpoint
    refuses a smaller one).

    Raises:
        ValueError: ``RUN`` is no run folder, or the options differ from its config (named, dotted).
    """
    from fedgraphrec.training.config import config_differences
    from fedgraphrec.training.loading import load_config

    stored = run / "config.toml"
    if not stored.exists():
        raise ValueError(f"{run}: no config.toml; not a run folder")
    saved = load_config(stored)
    advice = "only --epochs may differ (a new run: --out DIR)"
    if protocol != saved.protocol:
        raise ValueError(
            f"{stored}: --resume with protocol {protocol}, but the run was trained with protocol "
            f"{saved.protocol}; {advice}"
        )
    asked = load_config(config, overrides, base=saved, protocol=protocol, dataset=dataset, epochs=epochs,
                        **options)  # fmt: skip
    differ = [d for d in config_differences(asked.to_dict(), saved.to_dict()) if d[0] != "epochs"]
    if differ:

        def shown(value: Any) -> str:
            return "unset" if value is None else repr(value)

        ours = ", ".join(f"{key}={shown(value)}" for key, value, _ in differ)
        theirs = ", ".join(f"{key}={shown(value)}" for key, _, value in differ)
        raise ValueError(f"{stored}: --resume with {ours}, but the run was trained with {theirs}; {advice}")
    return asked


class TrainCommand(TyperCommand):
    """``train``'s help: with a protocol (``train lpgcn --help``) it ends with that protocol's settings."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Note the protocol named before ``--help`` is handled (the help option exits the parse)."""
        try:
            opts, _, _ = self.make_parser(ctx).parse_args(args=list(args))
        except click.UsageError:
            opts = {}
        ctx.meta["train.protocol"] = opts.get("protocol")
        return super().parse_args(ctx, args)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command's help, then the named protocol's settings or the list of protocols."""
        super().format_help(ctx, formatter)
        from fedgraphrec.protocols.registry import REGISTRY

        name = ctx.meta.get("train.protocol")
        if name in REGISTRY:
            out.print(settings_table(name))
        else:
            listing = Table(title="protocols (fedgraphrec train PROTOCOL --help lists its settings)")
            listing.add_column("protocol")
            listing.add_column("kind")
            listing.add_column("summary")
            for entry in REGISTRY.values():
                listing.add_row(entry.name, entry.kind, entry.summary)
            out.print(listing)


@app.command(cls=TrainCommand)
def train(
    protocol: Annotated[
        str,
        typer.Argument(
            help="A registered protocol (listed below; `train PROTOCOL --help` shows its settings), "
            "p4gcn (and its rating baselines: --set method=...) or dgrec (and its variants: --variant)."
        ),
    ],
    dataset: DatasetOpt = None,
    model: Annotated[
        str | None,
        typer.Option("--model", "--backbone", "-m", help="mf, lightgcn, lightgcn+, ngcf, ncf or multvae."),
    ] = None,
    config: ConfigOpt = None,
    overrides: SetOpt = None,
    epochs: EpochsOpt = None,
    seed: SeedOpt = None,
    alpha: Annotated[int | None, typer.Option(help="LP-GCN: virtual items per client.")] = None,
    crypto: CryptoOpt = None,
    verify: Annotated[
        bool | None, typer.Option("--verify/--no-verify", help="Run the centralized oracle in lockstep.")
    ] = None,
    data_dir: DataDirOpt = None,
    out_dir: OutOpt = None,
    overwrite: OverwriteOpt = False,
    resume: Annotated[
        Path | None,
        typer.Option(
            help="Resume the run in this folder from its checkpoint; with --epochs: extend it (every other "
            "option must match the run's config.toml)."
        ),
    ] = None,
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
    variant: Annotated[str | None, typer.Option(help="dgrec: the variant (dgrec, dmf, dlgnn, …).")] = None,
) -> None:
    """Train a recommender and write a run folder (config, metrics.jsonl, summary.json, curves.png)."""
    from fedgraphrec.training.rundir import RunDir, default_run_dir
    from fedgraphrec.training.trainer import Trainer

    use_data_dir(data_dir)
    from fedgraphrec.protocols.registry import protocol_names

    if variant is not None:
        if protocol != "dgrec":
            raise fail("--variant applies to dgrec only")
        overrides = [f"protocol.variant={variant!r}", *(overrides or [])]
    if protocol not in protocol_names():
        raise fail(f"unknown protocol {protocol!r}; available: {', '.join(protocol_names())}")
    if resume is not None and (overwrite or (out_dir is not None and out_dir.resolve() != resume.resolve())):
        raise fail(
            f"--resume {resume} continues the run in its own folder; --out and --overwrite do not apply"
        )
    options: dict[str, Any] = {"seed": seed, "crypto": crypto, "data_dir": data_dir}
    options.update(model=model, alpha=alpha, verify=verify)
    with user_errors(crypto_note=" (the run folder keeps the last checkpoint)"):
        if resume is not None:
            cfg = resumed_config(resume, protocol, dataset, config, overrides, epochs, **options)
            run_dir = resume
        else:
            cfg = train_config(protocol, dataset, config, overrides, epochs, **options)
            run_dir = out_dir or default_run_dir(protocol, cfg.dataset)
            RunDir(run_dir).check_free(overwrite)  # before the data load: refuse early, touch nothing
        trainer = Trainer(cfg, run_dir, progress=progress, resume=resume is not None)  # loads the data
        if resume is None:
            RunDir(run_dir).prepare(overwrite)  # the start succeeded: now the old run's files go
        err.print(f"run folder: {run_dir}")
        result = trainer.fit()
    print_summary(result.summary)


def _size(n_bytes: float) -> str:
    """``1536`` → ``1.5 KiB``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n_bytes < 1024 or unit == "GiB":
            return f"{n_bytes:.0f} {unit}" if unit == "B" else f"{n_bytes:.1f} {unit}"
        n_bytes /= 1024
    return f"{n_bytes:.1f} GiB"


def _print_devices(device: object) -> None:
    """The ``device_profile`` line: the replayed per-device cost (one AEAD per message), if measured."""
    if not isinstance(device, dict) or not device.get("devices"):
        return
    secs, total = device["seconds"]["total"], device["bytes"]["total"]
    keys = ("p50", "p99", "max")
    err.print(
        f"{device['label']} per epoch, {device['devices']} devices (p50 / p99 / max): "
        + " / ".join(f"{1000 * secs[k]:.2f} ms" for k in keys)
        + "; bytes "
        + " / ".join(_size(total[k]) for k in keys)
    )


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
        cost = comm.get("per_client_per_epoch", {})
        if isinstance(cost, dict) and "sent" in cost:
            sent, recv = cost["sent"], cost["received"]
            err.print(
                "per client per epoch (mean / p50 / p99 / max): sent "
                + " / ".join(_size(sent[k]) for k in ("mean", "p50", "p99", "max"))
                + "; received "
                + " / ".join(_size(recv[k]) for k in ("mean", "p50", "p99", "max"))
            )
            crypto = cost.get("crypto_seconds", {})
            if crypto.get("max", 0.0) > 0:
                err.print(
                    "crypto CPU per client (batched, in-process) per epoch (mean / p50 / p99 / max): "
                    + " / ".join(f"{1000 * crypto[k]:.2f} ms" for k in ("mean", "p50", "p99", "max"))
                )
        _print_devices(comm.get("per_device"))
    if summary.get("clients_lost") or summary.get("clients_recovered"):
        err.print(
            f"[yellow]dropouts:[/] {summary['clients_lost']} sampled clients were lost before uploading "
            f"(their rounds' work is not in the model); {summary['clients_recovered']} dropped after "
            "uploading and were recovered by secure aggregation"
        )
    if "warning" in summary:
        err.print(f"[yellow]note:[/] {summary['warning']}")
