"""Any registered protocol on Flower: the ServerApp runs ``fedgraphrec train``'s loop, SuperNodes the clients.

One generic ServerApp for every :class:`~fedgraphrec.protocols.base.ProtocolSpec`: it waits for
``supernodes`` SuperNodes, builds a :class:`~.learner.FlowerLearner` (the in-process learner with a
:class:`~fedgraphrec.runtime.flower.transport.FlowerTransport` and federated evaluation) and runs the
same :class:`~fedgraphrec.training.Trainer` as ``fedgraphrec train``, which writes the same run folder
(``config.toml``, ``metrics.jsonl``, ``summary.json``, ``curves.png``, the ledger, ``transcripts/``
with ``transcripts=true`` — here: what the ServerApp process sent and received). ``summary.json``
adds ``engine = "flower"`` and Flower's measured traffic and per-round latency under ``"flower"``;
``flower.json``, written last, has every round's latency and Flower-counted bytes. After the last
epoch every SuperNode writes its own users' recommendations on its own disk, where its operator
configured (:mod:`.node_output`); the run folder gets the nodes' counts only.

* :func:`simulate` — Flower's simulation runtime in this process (``run_simulation``, Ray backend):
  the ServerApp runs in a thread here, the SuperNodes' ClientApps in Ray actors;
* :func:`run_from_config` — the ServerApp of ``deploy/flower`` when its run config has ``run`` (a
  :class:`~fedgraphrec.training.TrainConfig` as JSON), for ``flwr run`` against a SuperLink;
  :func:`deploy` submits one and waits for its run folder.

The SuperNodes' side is :mod:`.node`; its docstring lists the simulation shortcuts that remain.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedgraphrec.data.types import Interactions
from fedgraphrec.engines.flower.learner import FlowerLearner
from fedgraphrec.engines.flower.node import make_client_app
from fedgraphrec.engines.flower.node_output import NodeOutput
from fedgraphrec.runtime.flower.transport import ROUND_TIMEOUT_S
from fedgraphrec.training.config import TrainConfig
from fedgraphrec.training.loading import config_from_dict
from fedgraphrec.training.trainer import RunResult, Trainer

__all__ = [
    "PartyRun",
    "deploy",
    "make_server_app",
    "run_from_config",
    "run_on_grid",
    "run_on_nodes",
    "simulate",
    "submit",
]

TRACE = "flower.json"
"""Every Flower round's latency and bytes; the last file a Flower run writes."""


@dataclass
class PartyRun:
    """A finished Flower run: the loop's result, and (tests only) the exported representations."""

    result: RunResult
    embeddings: tuple[torch.Tensor, torch.Tensor] | None = None
    learner: FlowerLearner | None = field(default=None, repr=False)


def wait_for_nodes(grid: Grid, n: int, limit_s: float = 120.0) -> list[int]:
    """The ids of at least ``n`` connected SuperNodes, sorted (so the sharding is reproducible)."""
    deadline = time.monotonic() + limit_s
    while True:
        nodes = sorted(grid.get_node_ids())
        if len(nodes) >= n:
            return nodes
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"supernodes: only {len(nodes)} of {n} SuperNodes connected in {limit_s:.0f} s"
            )
        time.sleep(0.2)


def run_on_nodes(
    cfg: TrainConfig,
    out: str | Path,
    make_learner: Callable[[TrainConfig, Interactions], FlowerLearner],
    export: bool = False,
) -> PartyRun:
    """``fedgraphrec train``'s loop with ``make_learner``'s nodes, then the nodes' own recommendations.

    After the last epoch (its evaluation ran the prediction stages) the ServerApp asks every node to
    write its users' recommendations (:meth:`FlowerLearner.recommend_on_nodes`), inside the loop so
    the run folder's ledger and transcripts include that round; ``summary.json`` gets the nodes'
    counts. ``export`` (tests only) first fetches the clients' final representations in the clear;
    the nodes must allow it.
    """
    made: list[FlowerLearner] = []
    exported: list[tuple[torch.Tensor, torch.Tensor]] = []

    def learner(c: TrainConfig, data: Interactions) -> FlowerLearner:
        made.append(make_learner(c, data))
        return made[0]

    def at_epoch_end(epoch: int) -> None:
        if epoch == cfg.epochs or trainer.state.stopped_early:  # the run's last epoch
            if export:
                exported.append(made[0].embeddings())
            made[0].recommend_on_nodes()

    trainer = Trainer(cfg, out, progress=False, learner=learner, on_epoch_end=at_epoch_end)
    result = trainer.fit()
    return PartyRun(result, exported[0] if exported else None, made[0])


def run_on_grid(
    grid: Grid,
    cfg: TrainConfig,
    out: str | Path,
    supernodes: int,
    timeout: float = ROUND_TIMEOUT_S,
    export: bool = False,
) -> PartyRun:
    """Train ``cfg`` over ``supernodes`` SuperNodes of ``grid`` and write the run folder ``out``.

    The nodes write their own users' recommendations at the end (:func:`run_on_nodes`).
    ``export`` (tests only) fetches the clients' final representations in the clear; the nodes must
    allow it.
    """
    cfg.validate()
    nodes = wait_for_nodes(grid, supernodes)
    run = run_on_nodes(cfg, out, lambda c, data: FlowerLearner(c, data, grid, nodes, timeout), export)
    assert run.learner is not None
    trace = [vars(r) for r in run.learner.traffic.rounds]
    (Path(out) / TRACE).write_text(
        json.dumps({"nodes": run.learner.node_ids, "rounds": trace}, indent=1) + "\n"
    )
    return run


def make_server_app(
    cfg: TrainConfig,
    out: str | Path,
    supernodes: int,
    sink: list[PartyRun],
    timeout: float = ROUND_TIMEOUT_S,
    export: bool = False,
) -> ServerApp:
    """A ServerApp running :func:`run_on_grid` (for the simulation runtime); the result goes to ``sink``."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        sink.append(run_on_grid(grid, cfg, out, supernodes, timeout, export))

    return app


def simulate(
    cfg: TrainConfig,
    out: str | Path,
    supernodes: int,
    *,
    specs: Mapping[str, str] | None = None,
    export: bool = False,
    timeout: float = ROUND_TIMEOUT_S,
    node_output: NodeOutput | None = None,
) -> PartyRun:
    """``cfg`` in Flower's simulation runtime with ``supernodes`` virtual SuperNodes (Ray backend).

    The virtual SuperNodes serve the protocols registered in this process
    (:mod:`fedgraphrec.protocols.registry`, plus ``specs``: ``name -> "module:attr"`` of an entry);
    ``export`` (tests only) lets them hand over their clients' final representations.
    ``node_output``: where the simulated nodes write their users' recommendations at the end, each
    in ``node-<partition id>/`` (``None``: they write nothing). Flower's simulation gives its
    virtual nodes no ``--node-config`` of their own, so this is the ClientApp's default.
    """
    from flwr.simulation import run_simulation

    if supernodes < 1:
        raise ValueError(f"supernodes must be at least 1, got {supernodes}")
    sink: list[PartyRun] = []
    server = make_server_app(cfg, out, supernodes, sink, timeout, export)
    if node_output is not None:  # the Ray actors' working folder may differ from this process's
        node_output = replace(node_output, out_dir=node_output.out_dir.resolve())
    client = make_client_app(specs, allow_export=export, output=node_output)
    backend = {"client_resources": {"num_cpus": 1, "num_gpus": 0.0}, "init_args": {"num_cpus": 2}}
    run_simulation(server, client, supernodes, "ray", backend)  # type: ignore[arg-type, unused-ignore]
    if not sink:
        raise RuntimeError("the Flower simulation ended without a result (see its log above)")
    return sink[0]


def run_from_config(grid: Grid, run_config: Mapping[str, Any]) -> PartyRun:
    """The deployed ServerApp's run: ``run`` (TrainConfig JSON), ``out``, ``min-nodes``, ``stage-timeout``.

    On failure, ``out/error.json`` says why (where :func:`deploy` looks for the result).
    """
    out = Path(str(run_config.get("out") or "runs/flower"))
    try:
        cfg = config_from_dict(json.loads(str(run_config["run"])))
        timeout = float(run_config.get("stage-timeout", 0.0)) or ROUND_TIMEOUT_S
        return run_on_grid(grid, cfg, out, int(run_config.get("min-nodes", 1)), timeout)
    except Exception as exc:
        out.mkdir(parents=True, exist_ok=True)
        (out / "error.json").write_text(json.dumps({"error": type(exc).__name__, "message": str(exc)}) + "\n")
        raise


def deploy(
    cfg: TrainConfig,
    out: str | Path,
    supernodes: int,
    connection: str,
    *,
    app_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = ROUND_TIMEOUT_S,
    limit_s: float = 3600.0,
) -> dict[str, Any]:
    """Submit ``cfg`` with ``flwr run`` to the SuperLink ``connection`` and wait for its run folder.

    The ServerApp writes the run folder ``out`` on the machine it runs on (give an absolute path).
    Returns ``summary.json``.

    Raises:
        RuntimeError: the ServerApp failed (its reason, from ``error.json``).
        TimeoutError: no finished run folder within ``limit_s`` seconds.
    """
    out = Path(out).resolve()
    overrides = {
        "run": json.dumps(cfg.to_dict(), sort_keys=True),
        "out": str(out),
        "min-nodes": supernodes,
        "stage-timeout": float(timeout),
    }
    return submit(overrides, out, connection, app_dir=app_dir, env=env, limit_s=limit_s)


def submit(
    overrides: Mapping[str, Any],
    out: Path,
    connection: str,
    *,
    app_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    limit_s: float = 3600.0,
) -> dict[str, Any]:
    """``flwr run`` the app with the run config ``overrides``; wait for the run folder ``out``'s summary.

    Raises:
        RuntimeError: the ServerApp failed (its reason, from ``error.json``).
        TimeoutError: no finished run folder within ``limit_s`` seconds.
    """
    from fedgraphrec.engines.flower.local import APP_DIR

    with tempfile.TemporaryDirectory() as tmp:  # a TOML file: flwr's inline form cannot quote JSON
        path = Path(tmp) / "run.toml"
        path.write_text("".join(f"{k} = {json.dumps(v)}\n" for k, v in overrides.items()))
        command = ["flwr", "run", str(app_dir or APP_DIR), connection, "--run-config", str(path)]
        environ = None if env is None else dict(env)
        done = subprocess.run(command, env=environ, timeout=120, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"flwr run failed: {(done.stdout + done.stderr).strip()[-1500:]}")
    deadline = time.monotonic() + limit_s
    while not (out / TRACE).exists():
        if (out / "error.json").exists():
            reason = json.loads((out / "error.json").read_text())
            raise RuntimeError(f"the Flower run failed: {reason['error']}: {reason['message']}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"no finished run folder {out} within {limit_s:.0f} s")
        time.sleep(0.5)
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return summary
