"""``fedgraphrec flower simulate``: a protocol in Flower's simulation runtime, compared in-process."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from fedgraphrec.cli._app import DataDirOpt, app, fail, out, use_data_dir

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
    data_dir: DataDirOpt = None,
) -> None:
    """FedGRec (secure aggregation) or LP-GCN in Flower's simulation runtime (Ray backend).

    ``--set protocol=lpgcn`` runs LP-GCN (e.g. ``--set train-config=configs/ml100k-lightgcn.toml
    --set train-set=alpha=5 --set batches=4``). For deployment across machines use ``flwr run
    deploy/flower <superlink>`` (README, "Running on Flower"); both run the same ServerApp and ClientApp.
    """
    use_data_dir(data_dir)
    try:
        from fedgraphrec.engines.flower.app import run_in_process, simulate
        from fedgraphrec.engines.flower.job import FlowerJob
    except ImportError as exc:
        raise fail(f"the Flower engine needs: pip install 'fedgraphrec\\[flower]' ({exc})") from None
    try:
        pairs = dict(kv.split("=", 1) for kv in setting or [])
        job = FlowerJob.from_config(pairs)
    except ValueError as exc:
        raise fail(f"--set: {exc}") from None
    result = simulate(job, supernodes)
    report: dict[str, object] = {"flower": {"metrics": result.metrics, **result.extra}}
    if compare:
        ref = run_in_process(job)
        diff = float((result.item_emb - ref.item_emb).norm() / ref.item_emb.norm())
        report["in_process"] = {"metrics": ref.metrics, "item_rel_diff": diff}
        if job.protocol == "fedgrec":  # LP-GCN's Flower run keeps no ledger (see benchmarks/flower_lpgcn.py)
            report["same_ledger"] = ref.ledger == result.ledger
    out.print_json(json.dumps(report, default=str))
