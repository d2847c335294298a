"""The ``fedgraphrec`` command line: one small module per command, no logic beyond parsing and printing.

Commands: ``datasets``, ``train`` (every method, including ``p4gcn`` and ``dgrec``), ``settings``,
``recommend``, ``export``, ``evaluate`` (use a trained run), ``compare``, ``frontier``, ``reproduce``,
``audit``, ``flower``, ``demo``, ``version``. They parse options, call the layer that does the work
(:mod:`fedgraphrec.training`, :mod:`fedgraphrec.reproduce`, :mod:`fedgraphrec.audits`,
:mod:`fedgraphrec.engines`) and print; errors go through :func:`~fedgraphrec.cli._app.user_errors`.
The top layer: it may import every other, and nothing imports it.
"""

from __future__ import annotations

from fedgraphrec.cli import audit, compare, datasets, demo, flower, model, reproduce, settings, train
from fedgraphrec.cli._app import app

__all__ = ["main"]

# registered on import
_COMMANDS = (audit, compare, datasets, demo, flower, model, reproduce, settings, train)


def main() -> None:
    """Entry point of the ``fedgraphrec`` script."""
    app()
