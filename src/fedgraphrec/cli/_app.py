"""The Typer application, the two consoles and the one error handler every command uses.

Data goes to stdout, chatter (progress, notes) to stderr; every user error exits with status 2 and one
line naming the file:line or the parameter at fault.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from fedgraphrec import __version__

__all__ = ["DataDirOpt", "app", "err", "fail", "out", "use_data_dir", "user_errors"]

app = typer.Typer(
    name="fedgraphrec",
    help="Privacy-preserving graph recommendation: federated, vertical and decentralized LightGCN.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)
# Wide when piped, so tables are not truncated in logs and CI output.
out = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, soft_wrap=True)  # never hard-wrap a file:line message

DataDirOpt = Annotated[
    str | None,
    typer.Option("--data-dir", help="Folder of datasets (default: $FEDGRAPHREC_DATA, then the user cache)."),
]


def use_data_dir(data_dir: str | None) -> None:
    """Make ``--data-dir`` the first place every loader searches, in this process and its children.

    Every loader (and the Flower apps this process starts) already searches ``$FEDGRAPHREC_DATA``
    after an explicit folder; setting it here means no code path below the CLI can ignore the option.
    """
    if data_dir:
        os.environ["FEDGRAPHREC_DATA"] = str(Path(data_dir).expanduser().resolve())


def fail(message: str) -> typer.Exit:
    """Print ``error: message`` to stderr; the caller raises the returned exit (status 2)."""
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    return typer.Exit(code=2)


@contextmanager
def user_errors(*, crypto_note: str = "", lookups: bool = False) -> Iterator[None]:
    """Turn a user error raised inside the block into one ``error:`` line and exit status 2.

    User errors are a bad configuration or dataset (:class:`~fedgraphrec.training.ConfigError`,
    :class:`~fedgraphrec.data.DataError`), a bad value (``ValueError``), a missing file, and a crypto
    failure such as secure aggregation losing too many clients (``crypto_note`` is appended to its
    message). ``lookups`` also treats ``KeyError`` (an unknown table name) as one. Anything else is a bug
    and keeps its traceback.
    """
    from fedgraphrec.crypto.errors import CryptoError
    from fedgraphrec.data.errors import DataError
    from fedgraphrec.training.config import ConfigError

    try:
        yield
    except CryptoError as exc:
        raise fail(f"{exc}{crypto_note}") from None
    except (ConfigError, DataError, ValueError, FileNotFoundError) as exc:
        raise fail(str(exc)) from None
    except KeyError as exc:
        if not lookups:
            raise
        raise fail(str(exc.args[0])) from None


@app.command()
def version() -> None:
    """Print the fedgraphrec version."""
    out.print(__version__)
