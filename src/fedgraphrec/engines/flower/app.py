"""The Flower app of ``deploy/flower``: the ``ServerApp`` runs the server role, SuperNodes host the users.

Components for ``flwr run`` (see ``deploy/flower/pyproject.toml``) and for
:func:`flwr.simulation.run_simulation`:

* :data:`server_app` — with ``run`` in the run config (a training configuration as JSON), any
  registered protocol through ``fedgraphrec train``'s loop
  (:func:`fedgraphrec.engines.flower.party_app.run_from_config`). Otherwise (the older form, kept
  until every protocol runs as party programs) it reads an LP-GCN
  :class:`~fedgraphrec.engines.flower.job.FlowerJob` from the run config and runs LP-GCN's relay
  server (:mod:`fedgraphrec.engines.flower.lpgcn`), writing ``result.json`` and ``embeddings.pt``
  into ``out``;
* :data:`client_app` — :data:`fedgraphrec.engines.flower.client.client_app`, the users' side.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedgraphrec.engines.flower.client import client_app
from fedgraphrec.engines.flower.job import FlowerJob, JobResult
from fedgraphrec.runtime.flower import Traffic

__all__ = ["client_app", "make_server_app", "run_in_process", "server_app", "simulate"]

PROTOCOLS = ("lpgcn",)
LPGCN_ROUND_TIMEOUT_S = 600.0
"""Bound on one LP-GCN round when ``stage-timeout`` is 0 (LP-GCN rounds are never unbounded)."""


def _wait_for_nodes(grid: Grid, n: int, limit_s: float = 120.0) -> list[int]:
    """The ids of at least ``n`` connected SuperNodes, sorted (so the sharding is reproducible)."""
    deadline = time.monotonic() + limit_s
    while True:
        nodes = sorted(grid.get_node_ids())
        if len(nodes) >= n:
            return nodes
        if time.monotonic() > deadline:
            raise TimeoutError(f"min-nodes: only {len(nodes)} of {n} SuperNodes connected in {limit_s:.0f} s")
        time.sleep(0.5)


def _run(grid: Grid, job: FlowerJob) -> JobResult:
    """Run ``job`` over the connected SuperNodes; writes its outputs when ``job.out`` is set."""
    if job.protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {job.protocol!r}")
    return _run_lpgcn(grid, job)


def _run_lpgcn(grid: Grid, job: FlowerJob) -> JobResult:
    """LP-GCN's relay server over the connected SuperNodes (users sharded ``u mod n``)."""
    from fedgraphrec.engines.flower.lpgcn import (
        FlowerTransport,
        flower_summary,
        job_data,
        run_lpgcn_job,
    )

    cfg = job.lpgcn_config()
    nodes = _wait_for_nodes(grid, job.min_nodes)
    data, _, _ = job_data(cfg)
    traffic = Traffic()
    transport = FlowerTransport(grid, job.stage_timeout or LPGCN_ROUND_TIMEOUT_S, job, data.n_items, traffic)
    result = run_lpgcn_job(job, transport, nodes)
    flower_summary(result, traffic, cfg.n_layers, len(nodes))
    if job.out:
        result.save(job.out)
    return result


def run_in_process(job: FlowerJob) -> JobResult:
    """``job`` on the in-process engine (the reference a Flower run must reproduce)."""
    from fedgraphrec.engines.flower.lpgcn import run_lpgcn_in_process

    return run_lpgcn_in_process(job)


def make_server_app(job: FlowerJob | None = None, sink: list[JobResult] | None = None) -> ServerApp:
    """A ``ServerApp`` running ``job`` (``None``: the one in the run config); results go to ``sink``."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        config = dict(context.run_config)
        if job is None and config.pop("run", ""):
            from fedgraphrec.engines.flower.party_app import run_from_config

            run_from_config(grid, context.run_config)
            return
        the_job = job if job is not None else FlowerJob.from_config(config)
        try:
            result = _run(grid, the_job)
        except Exception as exc:  # leave the reason where the submitter looks for the result
            if the_job.out:
                Path(the_job.out).mkdir(parents=True, exist_ok=True)
                (Path(the_job.out) / "error.json").write_text(
                    json.dumps({"error": type(exc).__name__, "message": str(exc)}) + "\n"
                )
            raise
        if sink is not None:
            sink.append(result)

    return app


server_app = make_server_app()


def simulate(job: FlowerJob, supernodes: int, backend: str = "ray") -> JobResult:
    """Flower's simulation runtime: ``supernodes`` virtual SuperNodes in this machine (Ray backend)."""
    from flwr.simulation import run_simulation

    if supernodes < 1:
        raise ValueError(f"supernodes must be at least 1, got {supernodes}")
    sink: list[JobResult] = []
    job = FlowerJob(**{**job.__dict__, "min_nodes": supernodes})
    backend_config = {"client_resources": {"num_cpus": 1, "num_gpus": 0.0}, "init_args": {"num_cpus": 2}}
    run_simulation(make_server_app(job, sink), client_app, supernodes, backend, backend_config)  # type: ignore[arg-type, unused-ignore]
    if not sink:
        raise RuntimeError("the Flower simulation ended without a result (see its log above)")
    return sink[0]
