"""``fedgraphrec p4gcn``: moved. One run is ``train p4gcn``; the paper tables are ``reproduce p4gcn-*``."""

from __future__ import annotations

import typer

from fedgraphrec.cli._app import app, fail


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True}, hidden=True, deprecated=True
)
def p4gcn(ctx: typer.Context) -> None:
    """Moved: ``train p4gcn`` (one run, a run folder) or ``reproduce p4gcn-t1-DATASET`` (the tables)."""
    raise fail(
        "`fedgraphrec p4gcn` moved: one run with a run folder is "
        "`fedgraphrec train p4gcn --dataset filmtrust --set method=p4gcn` (every setting by --set or "
        "--config); the paper tables are `fedgraphrec reproduce p4gcn-t1-<dataset>` / `p4gcn-t2-filmtrust`"
    )
