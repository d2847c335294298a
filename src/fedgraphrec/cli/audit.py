"""``fedgraphrec audit PROTOCOL`` and ``audit integrity PROTOCOL``: what a party learns or can alter."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from fedgraphrec.cli._app import DataDirOpt, app, err, out, use_data_dir, user_errors
from fedgraphrec.cli.train import ConfigOpt, DatasetOpt, SetOpt


@app.command()
def audit(
    protocol: Annotated[
        str,
        typer.Argument(
            help="fedgrec, federank, fcf, fedncf, fedpergnn, lpgcn, gnn4fr, p4gcn, dgrec, or 'integrity'."
        ),
    ],
    target: Annotated[
        str | None,
        typer.Argument(
            help="With 'integrity': the protocol to attack (lpgcn, gnn4fr, fedgrec, fedmf, fedncf, pgcn)."
        ),
    ] = None,
    dataset: DatasetOpt = None,
    config: ConfigOpt = None,
    overrides: SetOpt = None,
    rounds: Annotated[
        int, typer.Option(help="Rounds to run (twice: secure aggregation on and off); dgrec: group steps.")
    ] = 20,
    epochs: Annotated[int, typer.Option(help="p4gcn: training epochs per arm.")] = 1,
    seed: Annotated[
        int | None, typer.Option(help="Run seed (default: the run configuration's, 2020; p4gcn, dgrec: 0).")
    ] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="Report folder.")] = Path("runs/audit"),
    engine: Annotated[
        str,
        typer.Option(
            help="With 'integrity': inprocess, flower (the SuperNode's handler on real records, in process) "
            "or both (reports in OUT/inprocess and OUT/flower)."
        ),
    ] = "inprocess",
    data_dir: DataDirOpt = None,
) -> None:
    """Attack what each party received, with the protocol's protection on and off; write a report.

    ``audit integrity PROTOCOL`` instead runs PROTOCOL in real crypto mode against a lying server
    (altered payloads, forged labels, cross-phase replays, re-run stages, session resets, lowered
    parameters, malformed records) and reports what the nodes caught; it exits with status 1 when
    an attack was accepted or a sealed phase went unattacked (coverage below 100 %).
    """
    from fedgraphrec.audits.report import audit as run_audit

    use_data_dir(data_dir)
    from fedgraphrec.training.loading import load_config

    with user_errors():
        if protocol == "integrity":
            if target is None:
                raise ValueError(
                    "audit integrity: name the protocol to attack "
                    "(lpgcn, gnn4fr, fedgrec, fedmf, fedncf or pgcn)"
                )
            cfg = load_config(
                config, ["dataset_options.n_users=24", "dataset_options.n_items=30", *(overrides or [])],
                protocol=target, dataset=dataset or "synthetic", seed=seed,
                shared=["dim=4", "n_layers=2", "batch_size=32"],  # a small model, where the protocol has one
            )  # fmt: skip
            if not _integrity(cfg, engine, out_dir):
                raise typer.Exit(1)
            return
        if target is not None:
            raise ValueError(f"audit {protocol}: unexpected argument {target!r}")
        if protocol in ("p4gcn", "dgrec"):  # rating/side-information datasets, own settings
            if dataset is None:
                raise ValueError(f"audit {protocol}: --dataset is required")
            if protocol == "p4gcn":
                from fedgraphrec.audits.p4gcn import audit_p4gcn

                audit_p4gcn(dataset, out_dir, epochs=epochs, seed=seed or 0)
            else:
                from fedgraphrec.audits.dgrec import audit_dgrec

                audit_dgrec(dataset, out_dir, steps=rounds, seed=seed or 0)
        else:
            cfg = load_config(config, overrides, protocol=protocol, dataset=dataset, seed=seed)
            run_audit(cfg, rounds, out_dir)
    out.print((out_dir / "audit.md").read_text())
    err.print(f"report → {out_dir}/audit.md, audit.json and plot")


def _integrity(cfg: Any, engine: str, out_dir: Path) -> bool:
    """``audit integrity`` on one engine or both; whether every report passed."""
    from fedgraphrec.audits.integrity import audit_integrity

    engines = ["inprocess", "flower"] if engine == "both" else [engine]
    if any(e not in ("inprocess", "flower") for e in engines):
        raise ValueError(f"audit integrity: --engine must be inprocess, flower or both, got {engine!r}")
    passed = True
    for name in engines:
        folder = out_dir / name if engine == "both" else out_dir
        factory: Any = None
        if name == "flower":
            from fedgraphrec.engines.flower.loopback import loopback_learner

            factory = loopback_learner
        report = audit_integrity(cfg, folder, engine=name, factory=factory)  # type: ignore[arg-type]
        out.print((folder / "integrity.md").read_text())
        err.print(f"report → {folder}/integrity.md, integrity.json")
        passed = passed and bool(report["passed"])
    return passed
