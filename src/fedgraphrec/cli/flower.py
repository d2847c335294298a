"""``fedgraphrec flower simulate|deploy PROTOCOL``: ``train``'s run on Flower, the same run folder.

Both take ``train``'s options (``--dataset --epochs --seed --crypto --set --config --out --data-dir``)
plus ``--supernodes``. ``simulate`` runs Flower's simulation runtime in this process (Ray backend);
``deploy`` submits the app in ``deploy/flower`` with ``flwr run`` to a running SuperLink. Any protocol
registered with party programs runs (:mod:`fedgraphrec.protocols.registry`), and ``p4gcn``: its two
organisations on two SuperNodes (``--node-config "organisation='recommender'"`` and ``'social'``),
with ``train p4gcn``'s settings (:mod:`fedgraphrec.engines.flower.p4gcn`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fedgraphrec.cli._app import DataDirOpt, app, err, fail, use_data_dir, user_errors
from fedgraphrec.cli.train import (
    ConfigOpt,
    CryptoOpt,
    DatasetOpt,
    EpochsOpt,
    OutOpt,
    OverwriteOpt,
    SeedOpt,
    SetOpt,
    print_summary,
    train_config,
)

if TYPE_CHECKING:
    from fedgraphrec.training.config import TrainConfig

flower_app = typer.Typer(
    help="Run protocols on Flower (needs the Flower extra of fedgraphrec).", no_args_is_help=True
)
app.add_typer(flower_app, name="flower")

ProtocolArg = Annotated[
    str, typer.Argument(help="A protocol that runs as party programs (e.g. lpgcn, gnn4fr).")
]
SupernodesOpt = Annotated[int, typer.Option(help="SuperNodes hosting the clients (u on the u mod n-th).")]
TimeoutOpt = Annotated[float, typer.Option(help="Seconds one round may take before a node counts as lost.")]
NodeOutOpt = Annotated[
    Path | None,
    typer.Option(
        help="Where the simulated SuperNodes write their users' recommendations at the end, one "
        "node-<N>/ folder each (default: the run folder's name + '-supernodes', beside it).",
    ),
]
NodeKOpt = Annotated[int, typer.Option(min=1, help="Length of each user's list the SuperNodes write.")]
NodeEmbeddingsOpt = Annotated[
    bool, typer.Option(help="The simulated SuperNodes also write their users' embeddings (npz).")
]


def _engine() -> None:
    try:
        import flwr  # noqa: F401
    except ImportError as exc:
        raise fail(f"the Flower engine needs: pip install 'fedgraphrec\\[flower]' ({exc})") from None


def _run(
    protocol: str,
    dataset: str | None,
    config: Path | None,
    setting: list[str] | None,
    epochs: int | None,
    seed: int | None,
    crypto: str | None,
    out_dir: Path | None,
    data_dir: str | None,
    overwrite: bool = False,
) -> tuple[TrainConfig, Path]:
    """``train``'s configuration of a Flower run and its run folder (``--out`` or the default).

    Raises:
        ValueError: ``protocol`` does not run as party programs (those are the ones Flower runs), or
            the folder holds a run (without ``overwrite``) or other files
            (:meth:`~fedgraphrec.training.rundir.RunDir.check_free`).
    """
    from fedgraphrec.protocols.registry import REGISTRY
    from fedgraphrec.training.rundir import RunDir, default_run_dir

    if protocol != "p4gcn" and (protocol not in REGISTRY or REGISTRY[protocol].programs is None):
        served = ", ".join([*(n for n, e in REGISTRY.items() if e.programs), "p4gcn"])
        raise ValueError(f"{protocol!r} does not run as party programs yet; on Flower: {served}")
    cfg = train_config(protocol, dataset, config, setting, epochs, seed, crypto, data_dir)
    run_dir = Path(out_dir or default_run_dir(protocol, cfg.dataset))
    RunDir(run_dir).check_free(overwrite)  # before Flower starts: refuse early, touch nothing
    return cfg, run_dir


@contextmanager
def _run_folder(run_dir: Path, overwrite: bool) -> Iterator[None]:
    """Make the run folder (an old run's files removed with ``overwrite``) and say so.

    A run that fails before writing anything leaves no folder it created.
    """
    from fedgraphrec.training.rundir import RunDir

    run, existed = RunDir(run_dir), run_dir.exists()
    run.prepare(overwrite)
    err.print(f"run folder: {run_dir}")
    try:
        yield
    except BaseException:
        if not existed:
            run.discard_if_empty()
        raise


def _p4gcn(deploy_to: str | None, cfg: TrainConfig, run_dir: Path, timeout: float) -> dict[str, object]:
    """``flower simulate|deploy p4gcn``: the two organisations on two SuperNodes; ``train p4gcn``'s folder."""
    from fedgraphrec.protocols.p4gcn.settings import P4GCNSettings

    settings = cfg.protocol_settings
    assert isinstance(settings, P4GCNSettings)
    from fedgraphrec.runtime.network import CryptoMode

    crypto: CryptoMode = "real" if cfg.crypto == "real" else "accounted"
    if deploy_to is None:
        from fedgraphrec.engines.flower.p4gcn import simulate_p4gcn

        return simulate_p4gcn(settings, cfg.dataset, cfg.seed, run_dir, crypto, timeout)
    from fedgraphrec.engines.flower.p4gcn import deploy_p4gcn

    return deploy_p4gcn(settings, cfg.dataset, cfg.seed, run_dir, deploy_to, crypto=crypto, timeout=timeout)


def _report(summary: dict[str, object], run_dir: Path) -> None:
    print_summary(summary)
    flower = summary.get("flower")
    if isinstance(flower, dict):
        traffic, latency = flower["traffic"], flower["round_seconds"]
        err.print(
            f"flower: {flower['nodes']} SuperNodes, {traffic['rounds']} rounds, mean round "
            f"{1000 * latency['mean']:.0f} ms, Flower-serialised bytes sent {traffic['sent_bytes']} / "
            f"received {traffic['received_bytes']}"
        )
    err.print(f"wrote {run_dir}/")


def _report_nodes(summary: dict[str, object], node_out: Path) -> None:
    """Where the simulated SuperNodes wrote their users' lists (the counts are in the summary)."""
    flower = summary.get("flower")
    counts = flower.get("node_recommendations") if isinstance(flower, dict) else None
    if isinstance(counts, dict) and counts.get("nodes_written"):
        err.print(
            f"supernodes: {counts['nodes_written']} wrote their {counts['users']} users' recommendations "
            f"to {node_out}/node-*/ (not part of the run folder: each node's own output)"
        )
    if isinstance(counts, dict) and counts.get("nodes_failed"):
        err.print(
            f"warning: {counts['nodes_failed']} SuperNode(s) could not write to {node_out} (see the log)"
        )


@flower_app.command("simulate")
def flower_simulate(
    protocol: ProtocolArg,
    supernodes: SupernodesOpt = 3,
    dataset: DatasetOpt = None,
    config: ConfigOpt = None,
    setting: SetOpt = None,
    epochs: EpochsOpt = None,
    seed: SeedOpt = None,
    crypto: CryptoOpt = None,
    out_dir: OutOpt = None,
    overwrite: OverwriteOpt = False,
    round_timeout: TimeoutOpt = 600.0,
    data_dir: DataDirOpt = None,
    node_out: NodeOutOpt = None,
    node_k: NodeKOpt = 20,
    node_embeddings: NodeEmbeddingsOpt = False,
) -> None:
    """Train PROTOCOL in Flower's simulation runtime (Ray backend); writes train's run folder.

    At the end each simulated SuperNode writes its own users' top-K recommendations to
    ``--node-out`` (beside the run folder, not in it). For SuperNodes on other machines use
    ``flower deploy`` (each node's operator then sets its own ``out-dir`` in ``--node-config``).
    """
    use_data_dir(data_dir)
    _engine()
    with user_errors():
        cfg, run_dir = _run(
            protocol, dataset, config, setting, epochs, seed, crypto, out_dir, data_dir, overwrite
        )
        base = run_dir if run_dir.name else run_dir.resolve()  # "--out ." has no name to extend
        nodes_dir = node_out or base.with_name(base.name + "-supernodes")
        with _run_folder(run_dir, overwrite):
            if protocol == "p4gcn":
                summary = _p4gcn(None, cfg, run_dir.resolve(), round_timeout)
            else:
                from fedgraphrec.engines.flower.node_output import NodeOutput
                from fedgraphrec.engines.flower.party_app import simulate

                output = NodeOutput(nodes_dir, node_k, node_embeddings)
                summary = simulate(
                    cfg, run_dir, supernodes, timeout=round_timeout, node_output=output
                ).result.summary
    _report(summary, run_dir)
    if protocol != "p4gcn":  # P4GCN's organisations write no per-user output
        _report_nodes(summary, nodes_dir)


@flower_app.command("deploy")
def flower_deploy(
    protocol: Annotated[str, typer.Argument(help="A protocol that runs as party programs.")],
    superlink: Annotated[
        str, typer.Option(help="The SuperLink connection of Flower's config (flwr run's second argument).")
    ],
    supernodes: SupernodesOpt = 3,
    dataset: DatasetOpt = None,
    config: ConfigOpt = None,
    setting: SetOpt = None,
    epochs: EpochsOpt = None,
    seed: SeedOpt = None,
    crypto: CryptoOpt = None,
    out_dir: OutOpt = None,
    overwrite: OverwriteOpt = False,
    round_timeout: TimeoutOpt = 600.0,
    data_dir: DataDirOpt = None,
) -> None:
    """Train PROTOCOL on a running SuperLink (``flwr run deploy/flower``) and wait for its run folder.

    The ServerApp writes the run folder where it runs (the path is made absolute here); every
    SuperNode needs fedgraphrec installed and the dataset (``FEDGRAPHREC_DATA`` or ``--data-dir``).
    """
    use_data_dir(data_dir)
    _engine()
    with user_errors():
        cfg, run_dir = _run(
            protocol, dataset, config, setting, epochs, seed, crypto, out_dir, data_dir, overwrite
        )
        run_dir = run_dir.resolve()
        with _run_folder(run_dir, overwrite):  # an old run's summary must not pass for this one's
            if protocol == "p4gcn":
                summary = _p4gcn(superlink, cfg, run_dir, round_timeout)
            else:
                from fedgraphrec.engines.flower.party_app import deploy

                summary = deploy(cfg, run_dir, supernodes, superlink, timeout=round_timeout)
    _report(summary, run_dir)
