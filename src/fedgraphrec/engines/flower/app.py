"""The Flower app of every protocol: the ``ServerApp`` runs the server program, SuperNodes host the clients.

Components for ``flwr run`` (see ``deploy/flower/pyproject.toml``):

* :data:`server_app` — reads ``run`` (a training configuration as JSON, set by ``fedgraphrec flower
  deploy PROTOCOL``), ``out``, ``min-nodes`` and ``stage-timeout`` from the run config and runs any
  protocol registered as party programs through ``fedgraphrec train``'s loop
  (:func:`fedgraphrec.engines.flower.party_app.run_from_config`), writing the standard run folder into
  ``out`` (or ``out/error.json`` with the reason when it fails);
* :data:`client_app` — :data:`fedgraphrec.engines.flower.client.client_app`, the clients' side.
"""

from __future__ import annotations

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

__all__ = ["server_app"]

server_app = ServerApp()


@server_app.main()
def _main(grid: Grid, context: Context) -> None:
    """The deployed run described by the run config (imported on use: torch only where needed)."""
    if str(context.run_config.get("p4gcn", "")):  # P4GCN: two organisations, not client shards
        from fedgraphrec.engines.flower.p4gcn import run_p4gcn_from_config

        run_p4gcn_from_config(grid, context.run_config)
        return
    from fedgraphrec.engines.flower.party_app import run_from_config

    run_from_config(grid, context.run_config)
