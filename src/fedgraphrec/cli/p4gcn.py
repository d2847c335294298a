"""``fedgraphrec p4gcn``: the P4GCN rating table (Table 1/2) runner."""

from __future__ import annotations

import typer

from fedgraphrec.cli._app import DataDirOpt, app, use_data_dir, user_errors


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def p4gcn(ctx: typer.Context, data_dir: DataDirOpt = None) -> None:
    """P4GCN rating table (Table 1/2): ``fedgraphrec p4gcn --dataset filmtrust --seeds 0 --out DIR``.

    Other options are those of ``python -m fedgraphrec.reproduce.p4gcn_table --help``.
    """
    from fedgraphrec.reproduce.p4gcn_table import main as p4gcn_main

    use_data_dir(data_dir)
    with user_errors():
        p4gcn_main(list(ctx.args))
