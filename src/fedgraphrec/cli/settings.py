"""``fedgraphrec settings PROTOCOL``: a protocol's settings (name, type, default, meaning) as a table or JSON.

The same table ends ``fedgraphrec train PROTOCOL --help``; both come from the protocol's settings
dataclass (:func:`fedgraphrec.protocols.settings.settings_rows`), so they list what the code takes.
"""

from __future__ import annotations

import json
import re
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from fedgraphrec.cli._app import app, fail, out

COLUMNS = ("setting", "type", "default", "meaning")
"""The columns of a settings table (and the keys of its JSON records)."""

_ROLE = re.compile(r":(?:math|class|func|meth|mod|data|attr|obj):`~?([^`]*)`")
_LITERAL = re.compile(r"``([^`]*)``")
_TEX = re.compile(r"\\([A-Za-z]+)")
_SYMBOLS = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε",
    "eta": "η", "lambda": "λ", "mu": "μ", "rho": "ρ", "sigma": "σ", "tau": "τ", "nabla": "∇",
    "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥", "cdot": "·", "times": "×", "infty": "∞", "sqrt": "√",
}  # fmt: skip


def _role(match: re.Match[str]) -> str:
    target = match.group(1)
    return target if match.group(0).startswith(":math:") else target.rsplit(".", 1)[-1]


def plain(text: str) -> str:
    r"""A docstring's reStructuredText as terminal text (the docs site renders it; a terminal cannot).

    A math role becomes its TeX with common symbols as characters (``\lambda`` → λ), a cross-reference
    its target's last name, a literal its text.
    """
    text = _LITERAL.sub(r"\1", _ROLE.sub(_role, text))
    return _TEX.sub(lambda m: _SYMBOLS.get(m.group(1), m.group(1)), text)


def settings_table(name: str) -> Table:
    """The settings of protocol ``name`` (its dataclass: name, type, default, meaning)."""
    from fedgraphrec.protocols.registry import lookup
    from fedgraphrec.protocols.settings import settings_rows

    entry = lookup(name)
    table = Table(title=escape(f"{name} settings ([protocol] table or --set KEY=VALUE): {entry.summary}"))
    for column in COLUMNS:
        table.add_column(column, overflow="fold")
    for row in settings_rows(entry.settings):
        table.add_row(*(escape(plain(cell)) for cell in row))
    return table


@app.command("settings")
def settings_command(
    protocol: Annotated[
        str, typer.Argument(help="A registered protocol (fedgraphrec train --help lists them).")
    ],
    fmt: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
) -> None:
    """Print PROTOCOL's settings: name, type, default and meaning (the [protocol] table of a config)."""
    from fedgraphrec.protocols.registry import lookup, protocol_names
    from fedgraphrec.protocols.settings import settings_rows

    if fmt not in ("table", "json"):
        raise fail(f"unknown --format {fmt!r}; use table or json")
    if protocol not in protocol_names():
        raise fail(f"unknown protocol {protocol!r}; available: {', '.join(protocol_names())}")
    if fmt == "json":
        rows = settings_rows(lookup(protocol).settings)
        records = [dict(zip(COLUMNS, map(plain, row), strict=True)) for row in rows]
        typer.echo(json.dumps(records, indent=2))  # plain: a long meaning must not be wrapped
        return
    out.print(settings_table(protocol))
