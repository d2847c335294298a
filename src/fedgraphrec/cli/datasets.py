"""``fedgraphrec datasets``: every known dataset, where it was found and its statistics."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from fedgraphrec.cli._app import DataDirOpt, app, fail, out


@app.command()
def datasets(
    data_dir: DataDirOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
) -> None:
    """List every known dataset: where it was found and its statistics."""
    from fedgraphrec.data.listing import list_datasets

    listings = list_datasets(data_dir=data_dir)
    rows = [listing.as_dict() for listing in listings]
    if fmt == "json":
        out.print_json(json.dumps(rows))
        return
    if fmt != "table":
        raise fail(f"--format must be 'table' or 'json', got {fmt!r}")
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
