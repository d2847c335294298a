"""The ``fedgraphrec`` command line: datasets, train, demo.

Data goes to stdout, chatter (progress, notes) to stderr; every user error exits with status 2 and
one line naming the file:line or the parameter at fault.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from fedgraphrec import __version__

app = typer.Typer(
    name="fedgraphrec",
    help="Privacy-preserving graph recommendation: federated, vertical and decentralized LightGCN.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)
# Wide when piped, so tables are not truncated in logs and CI output.
out = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, soft_wrap=True)  # never hard-wrap a file:line message


DataDirOpt = Annotated[
    str | None,
    typer.Option("--data-dir", help="Folder of datasets (default: $FEDGRAPHREC_DATA, then the user cache)."),
]


def _fail(message: str) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code=2)


@app.command()
def version() -> None:
    """Print the fedgraphrec version."""
    out.print(__version__)


@app.command()
def datasets(
    data_dir: DataDirOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
) -> None:
    """List every known dataset: where it was found and its statistics."""
    from fedgraphrec.data import list_datasets

    listings = list_datasets(data_dir=data_dir)
    rows = [listing.as_dict() for listing in listings]
    if fmt == "json":
        out.print_json(json.dumps(rows))
        return
    if fmt != "table":
        raise _fail(f"--format must be 'table' or 'json', got {fmt!r}")
    table = Table(title="fedgraphrec datasets")
    for r in rows:
        parts = [r.get(k) for k in ("train", "valid", "test")]
        r["interactions"] = sum(int(p) for p in parts if isinstance(p, int)) if r.get("users") else None
    columns = [
        "name",
        "status",
        "users",
        "items",
        "interactions",
        "train",
        "valid",
        "test",
        "links",
        "tags",
        "path",
    ]
    for c in columns:
        table.add_column(
            c,
            justify="left" if c in ("name", "status", "path") else "right",
        )
    for r in rows:
        table.add_row(*[_cell(r.get(c)) for c in columns])
    out.print(table)


def _cell(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


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
    from fedgraphrec.crypto import CryptoError
    from fedgraphrec.data import DataError
    from fedgraphrec.training import ConfigError, RunDir, Trainer, default_run_dir, load_config
    from fedgraphrec.training.config import PROTOCOLS

    if protocol not in PROTOCOLS:
        raise _fail(f"unknown protocol {protocol!r}; available: {', '.join(PROTOCOLS)}")
    try:
        if resume is not None:
            if not (resume / "config.toml").exists():
                raise _fail(f"{resume}: no config.toml; not a run folder")
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
    except (ConfigError, DataError) as exc:
        raise _fail(str(exc)) from None
    except ValueError as exc:  # e.g. an unsupported protocol/backbone combination
        raise _fail(str(exc)) from None
    except CryptoError as exc:  # e.g. secure aggregation lost too many clients
        raise _fail(f"{exc} (the run folder keeps the last checkpoint)") from None
    _print_summary(result.summary)


def _print_summary(summary: dict[str, object]) -> None:
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


@app.command()
def compare(
    methods: Annotated[
        list[str],
        typer.Option("--method", help="protocol[:key=value,...], e.g. central:model=mf (repeatable)."),
    ],
    dataset: Annotated[str | None, typer.Option("--dataset", "-d", help="Dataset name or folder.")] = None,
    config: Annotated[Path | None, typer.Option("--config", "-c", help="Base TOML configuration.")] = None,
    overrides: Annotated[
        list[str] | None, typer.Option("--set", help="Override a base config key (repeatable).")
    ] = None,
    seeds: Annotated[
        list[int] | None, typer.Option("--seed", help="Seeds (repeatable; default 2020).")
    ] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for the runs and the table.")] = Path(
        "runs/compare"
    ),
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = False,
) -> None:
    """Run several methods on one dataset with the same split, seeds and budget; write a table."""
    from fedgraphrec.crypto import CryptoError
    from fedgraphrec.data import DataError
    from fedgraphrec.reproduce.compare import compare as run_compare
    from fedgraphrec.reproduce.compare import parse_method
    from fedgraphrec.training import ConfigError

    base = [*(overrides or []), *([f"dataset={dataset}"] if dataset else [])]
    try:
        specs = [parse_method(m) for m in methods]
        rows = run_compare(specs, seeds or [2020], out_dir, config=config, overrides=base, progress=progress)
    except (ConfigError, DataError, ValueError, CryptoError) as exc:
        raise _fail(str(exc)) from None
    out.print((out_dir / "compare.md").read_text())
    err.print(f"{len(rows)} methods → {out_dir}/compare.csv, compare.md, compare.json")


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
) -> None:
    """Reproduce a paper table: our numbers beside the paper's, with a verdict per cell."""
    from fedgraphrec.crypto import CryptoError
    from fedgraphrec.data import DataError
    from fedgraphrec.reproduce.figures import FIGURES, reproduce_figure
    from fedgraphrec.reproduce.runs import (
        COMM_TABLES,
        FIG13,
        RUN_TABLES,
        RunTable,
        reproduce_comm,
        reproduce_fig13,
        reproduce_runs,
    )
    from fedgraphrec.reproduce.tables import TABLES, PaperTable
    from fedgraphrec.reproduce.tables import reproduce as run_reproduce
    from fedgraphrec.training import ConfigError

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
    try:
        if table in COMM_TABLES:
            reproduce_comm(table, target, reuse=reuse or ())
            return
        if table in FIG13:
            reproduce_fig13(table, target, reuse=reuse or ())
        elif table in FIGURES:
            if overrides or rows:
                raise _fail(f"--set / --row do not apply to {table}: a figure runs all its series")
            reproduce_figure(table, target, budget=budget, reuse=reuse or ())
        elif table in RUN_TABLES:
            if overrides:
                raise _fail(f"--set does not apply to {table}: its rows are runner commands, not configs")
            reproduce_runs(table, target, budget=budget, rows=rows or (), reuse=reuse or ())
        elif reuse:
            raise _fail(f"--reuse applies to the P4GCN, DGREC and figure tables, not to {table}")
        else:
            run_reproduce(
                table, target, budget=budget, rows=rows or (), overrides=overrides or (), progress=progress
            )
    except KeyError as exc:
        raise _fail(str(exc.args[0])) from None
    except (ConfigError, DataError, ValueError, CryptoError, FileNotFoundError) as exc:
        raise _fail(str(exc)) from None
    out.print((target / "reproduce.md").read_text())
    err.print(f"→ {target}/reproduce.md, reproduce.json, reproduce.png")


@app.command()
def frontier(
    dataset: Annotated[str, typer.Option("--dataset", "-d", help="Dataset name or folder.")],
    config: Annotated[Path | None, typer.Option("--config", "-c", help="Base TOML configuration.")] = None,
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
) -> None:
    """Every horizontal method on one dataset: utility, privacy (ε, measured leakage) and bytes."""
    from fedgraphrec.crypto import CryptoError
    from fedgraphrec.data import DataError
    from fedgraphrec.reproduce.frontier import HORIZONTAL
    from fedgraphrec.reproduce.frontier import frontier as run_frontier
    from fedgraphrec.training import ConfigError

    methods = [m for m in HORIZONTAL if not only or m.label in only]
    if not methods:
        raise _fail(f"--only matches no method; methods: {', '.join(m.label for m in HORIZONTAL)}")
    try:
        run_frontier(
            dataset, out_dir, methods=methods, seeds=seeds or [1], config=config, overrides=overrides or (),
            attack=attack, reuse=reuse or (), progress=progress,
        )  # fmt: skip
    except (ConfigError, DataError, ValueError, CryptoError) as exc:
        raise _fail(str(exc)) from None
    out.print((out_dir / "frontier.md").read_text())
    err.print(f"→ {out_dir}/frontier.md, frontier.json, frontier.csv, frontier.png")


@app.command()
def audit(
    protocol: Annotated[
        str, typer.Argument(help="fedgrec, federank, fcf, lpgcn, gnn4fr, p4gcn, dgrec, or 'integrity'.")
    ],
    target: Annotated[
        str | None,
        typer.Argument(
            help="With 'integrity': the protocol to attack (lpgcn, gnn4fr, fedgrec, fedmf, fedncf, pgcn)."
        ),
    ] = None,
    dataset: Annotated[str | None, typer.Option("--dataset", "-d", help="Dataset name or folder.")] = None,
    config: Annotated[Path | None, typer.Option("--config", "-c", help="TOML configuration file.")] = None,
    overrides: Annotated[
        list[str] | None, typer.Option("--set", help="Override a config key (repeatable).")
    ] = None,
    rounds: Annotated[
        int, typer.Option(help="Rounds to run (twice: secure aggregation on and off); dgrec: group steps.")
    ] = 20,
    epochs: Annotated[int, typer.Option(help="p4gcn: training epochs per arm.")] = 1,
    seed: Annotated[int, typer.Option(help="p4gcn, dgrec: run seed.")] = 0,
    out_dir: Annotated[Path, typer.Option("--out", help="Report folder.")] = Path("runs/audit"),
) -> None:
    """Attack what each party received, with the protocol's protection on and off; write a report.

    ``audit integrity PROTOCOL`` instead runs PROTOCOL in real crypto mode against an active server
    that flips, replays, swaps and drops relayed messages, and reports what the receivers caught.
    """
    from fedgraphrec.audits.report import audit as run_audit
    from fedgraphrec.crypto import CryptoError
    from fedgraphrec.data import DataError
    from fedgraphrec.training import ConfigError, load_config

    try:
        if protocol == "integrity":
            from fedgraphrec.audits.integrity import audit_integrity

            if target is None:
                raise ValueError(
                    "audit integrity: name the protocol to attack "
                    "(lpgcn, gnn4fr, fedgrec, fedmf, fedncf or pgcn)"
                )
            cfg = load_config(
                config, ["dataset_options.n_users=40", "dataset_options.n_items=60", *(overrides or [])],
                protocol=target, dataset=dataset or "synthetic", dim=8, n_layers=2, batch_size=64, seed=seed,
            )  # fmt: skip
            report = audit_integrity(cfg, out_dir)
            out.print((out_dir / "integrity.md").read_text())
            err.print(f"report → {out_dir}/integrity.md, integrity.json")
            if any(s["accepted"] for s in report["summary"].values()):
                raise typer.Exit(1)
            return
        if target is not None:
            raise ValueError(f"audit {protocol}: unexpected argument {target!r}")
        if protocol in ("p4gcn", "dgrec"):  # rating/side-information datasets, own settings
            if dataset is None:
                raise ValueError(f"audit {protocol}: --dataset is required")
            if protocol == "p4gcn":
                from fedgraphrec.audits.p4gcn import audit_p4gcn

                audit_p4gcn(dataset, out_dir, epochs=epochs, seed=seed)
            else:
                from fedgraphrec.audits.dgrec import audit_dgrec

                audit_dgrec(dataset, out_dir, steps=rounds, seed=seed)
        else:
            cfg = load_config(config, overrides, protocol=protocol, dataset=dataset)
            run_audit(cfg, rounds, out_dir)
    except (ConfigError, DataError, ValueError, CryptoError) as exc:
        raise _fail(str(exc)) from None
    out.print((out_dir / "audit.md").read_text())
    err.print(f"report → {out_dir}/audit.md, audit.json and plot")


@app.command(name="dgrec")
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
) -> None:
    """Train DGREC (decentralised, one-bit LDP gradient flooding) or a variant; write one JSON."""
    from fedgraphrec.data import DataError
    from fedgraphrec.reproduce.dgrec_runs import run_and_save

    try:
        res = run_and_save(
            dataset, variant, seed, epochs, out_dir, centres, public_ratio, lr, secure_noise=secure_noise
        )
    except (DataError, ValueError) as exc:
        raise _fail(str(exc)) from None
    out.print(json.dumps({k: res[k] for k in ("variant", "seed", "metrics", "noise_source", "seconds")}))


@app.command()
def demo(
    out_dir: Annotated[
        Path | None, typer.Option("--out", help="Run folder (default: runs/<time>-demo-synthetic).")
    ] = None,
    epochs: Annotated[int, typer.Option(help="Number of epochs.")] = 15,
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
) -> None:
    """A complete federated run on built-in synthetic data.

    LP-GCN with real cryptography (X25519 key wrapping, HMAC item tokens, AES-GCM embeddings) and
    5 virtual items per client, verified in lockstep against centralized LightGCN.
    """
    from fedgraphrec.training import Trainer, default_run_dir, load_config

    cfg = load_config(
        None,
        [
            "dataset_options.n_users=300",
            "dataset_options.n_items=400",
            "dataset_options.seed=7",
            "ks=[10, 20]",
            "lr=0.005",
            "batch_size=1024",
            "valid_fraction=0.1",
        ],
        protocol="lpgcn",
        dataset="synthetic",
        model="lightgcn",
        epochs=epochs,
        alpha=5,
        crypto="real",
        verify=True,
    )
    run_dir = out_dir or default_run_dir("demo", "synthetic")
    err.print(f"demo: LP-GCN (real crypto, α=5, verified against centralized LightGCN) → {run_dir}")
    result = Trainer(cfg, run_dir, progress=progress).fit()
    _print_summary(result.summary)
    err.print(f"wrote {run_dir}/: summary.json, metrics.jsonl, curves.png, ledger.csv, communication.png")


flower_app = typer.Typer(
    help="Run protocols on Flower (needs the Flower extra of fedgraphrec).", no_args_is_help=True
)
app.add_typer(flower_app, name="flower")


@flower_app.command("simulate")
def flower_simulate(
    supernodes: Annotated[int, typer.Option(help="Virtual SuperNodes (users are sharded over them).")] = 4,
    setting: Annotated[
        list[str] | None,
        typer.Option(
            "--set", help="FlowerJob field as key=value (e.g. --set dataset=ml-100k --set rounds=5)."
        ),
    ] = None,
    compare: Annotated[bool, typer.Option(help="Also run the in-process engine and compare.")] = True,
) -> None:
    """FedGRec (secure aggregation) or LP-GCN in Flower's simulation runtime (Ray backend).

    ``--set protocol=lpgcn`` runs LP-GCN (e.g. ``--set train-config=configs/ml100k-lightgcn.toml
    --set train-set=alpha=5 --set batches=4``). For deployment across machines use ``flwr run
    deploy/flower <superlink>`` (README, "Running on Flower"); both run the same ServerApp and ClientApp.
    """
    try:
        from fedgraphrec.engines.flower.app import run_in_process, simulate
        from fedgraphrec.engines.flower.job import FlowerJob
    except ImportError as exc:
        raise _fail(f"the Flower engine needs: pip install 'fedgraphrec\\[flower]' ({exc})") from None
    try:
        pairs = dict(kv.split("=", 1) for kv in setting or [])
        job = FlowerJob.from_config(pairs)
    except ValueError as exc:
        raise _fail(f"--set: {exc}") from None
    result = simulate(job, supernodes)
    report: dict[str, object] = {"flower": {"metrics": result.metrics, **result.extra}}
    if compare:
        ref = run_in_process(job)
        diff = float((result.item_emb - ref.item_emb).norm() / ref.item_emb.norm())
        report["in_process"] = {"metrics": ref.metrics, "item_rel_diff": diff}
        if job.protocol == "fedgrec":  # LP-GCN's Flower run keeps no ledger (see benchmarks/flower_lpgcn.py)
            report["same_ledger"] = ref.ledger == result.ledger
    out.print_json(json.dumps(report, default=str))


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def p4gcn(ctx: typer.Context) -> None:
    """P4GCN rating table (Table 1/2): ``fedgraphrec p4gcn --dataset filmtrust --seeds 0 --out DIR``.

    Options are those of ``python -m fedgraphrec.reproduce.p4gcn_table --help``.
    """
    from fedgraphrec.reproduce.p4gcn_table import main as p4gcn_main

    p4gcn_main(list(ctx.args))


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
