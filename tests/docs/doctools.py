"""Run the documentation's code blocks as tests (Sybil), and check every documented command exists.

A page's ``bash`` and ``console`` blocks are shell commands; ``python`` blocks are Python (plain code
or ``>>>`` examples whose output is compared). A ``fedgraphrec`` command runs in-process (the CLI is
imported once); any other command runs in ``bash`` in the page's workspace (a temporary folder with
``configs/``, ``results/`` and ``deploy/`` of the repository linked in). In ``console`` blocks a line
``$ command`` is followed by the output it must print (``...`` matches anything; whitespace is
collapsed before comparing).

An HTML comment right before a block, invisible on the site, says how the test treats it:

``<!-- doctest: append="--epochs 1" -->``
    the documented budget is too large for the test suite: every ``fedgraphrec`` command of the
    block runs with these arguments appended (a later option wins), so the command and its flags
    are still the documented ones.
``<!-- doctest: needs=ml-100k -->``
    the block needs that dataset under ``FEDGRAPHREC_DATA``; without it the rest of the page is
    skipped with that reason (the command check below still runs).
``<!-- doctest: exit=2 -->``
    the commands must exit with this status (documented errors).
``<!-- doctest: check-only -->``
    not run (a deployment, a multi-hour run): only checked.
``<!-- doctest: pending="reason" -->``
    documents a command that has not landed yet: not run, and the check must *fail* — once the
    command exists the check tells you to drop the marker.
``<!-- doctest: xfail="reason" -->``
    the command exists (and is checked) but cannot work yet (e.g. a protocol not yet ported): it
    runs and must fail — once it succeeds the test tells you to drop the marker.

Independently of running, :func:`check_command` validates every documented ``fedgraphrec``
command against the installed CLI — the command path, every option name, the option values'
types, the ``--set`` keys of ``train``, ``compare``, ``frontier`` and ``audit`` — and checks that
any other program a block calls is installed.
"""

from __future__ import annotations

import dataclasses
import doctest
import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import click
import typer
from sybil import Document, Example, Region, Sybil
from sybil.parsers.markdown import PythonCodeBlockParser

ROOT = Path(__file__).resolve().parents[2]
LINKED = ("configs", "results", "deploy")
FENCE = re.compile(r"^```(bash|console)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
DIRECTIVE = re.compile(r"^<!--\s*doctest:(.*?)-->[ \t]*$", re.MULTILINE)
BUILTINS = {"export", "cd", "echo", "set", "unset", "source", "."}


@dataclass
class Options:
    """How the test treats the next block (module docstring)."""

    append: list[str] = field(default_factory=list)
    needs: list[str] = field(default_factory=list)
    exit: int = 0
    check_only: bool = False
    pending: str = ""
    xfail: str = ""

    @classmethod
    def parse(cls, text: str) -> Options:
        opts = cls()
        for token in shlex.split(text):
            key, _, value = token.partition("=")
            if key == "append":
                opts.append = shlex.split(value)
            elif key == "needs":
                opts.needs = value.split(",")
            elif key == "exit":
                opts.exit = int(value)
            elif key == "check-only":
                opts.check_only = True
            elif key == "pending":
                opts.pending = value
            elif key == "xfail":
                opts.xfail = value
            else:
                raise ValueError(f"unknown doctest option {key!r}")
        return opts


@dataclass
class Command:
    """One shell command of a block, with the output a ``console`` block expects."""

    argv: list[str]
    line: int
    expected: str = ""


@dataclass
class Block:
    """A ``bash``/``console`` block and the directive before it."""

    commands: list[Command]
    options: Options


def shell_commands(kind: str, body: str, first_line: int) -> list[Command]:
    """Split a block into commands (``\\`` continuations joined, ``#`` comments dropped)."""
    commands: list[Command] = []
    pending = ""
    start = first_line
    for offset, raw in enumerate(body.splitlines()):
        line = raw.rstrip()
        if kind == "console":
            if line.startswith("$ "):
                line = line[2:]
            elif not pending:
                if commands:
                    commands[-1].expected += raw + "\n"
                continue
        if not pending:
            start = first_line + offset
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        text = pending + line
        pending = ""
        argv = shlex.split(text, comments=True)
        if argv:
            commands.append(Command(argv, start))
    return commands


def blocks(text: str) -> Iterator[tuple[int, int, Block]]:
    """``(start, end, block)`` for every shell block of a markdown text."""
    directives = {m.end(): Options.parse(m.group(1)) for m in DIRECTIVE.finditer(text)}
    for match in FENCE.finditer(text):
        options = Options()
        for end, opts in directives.items():
            if end <= match.start() and not text[end : match.start()].strip():
                options = opts
        first_line = text.count("\n", 0, match.start(2)) + 1
        yield (
            match.start(),
            match.end(),
            Block(shell_commands(match.group(1), match.group(2), first_line), options),
        )


# ------------------------------------------------------------------------------------ checking
def _cli() -> click.Command:
    from fedgraphrec.cli._app import app

    return typer.main.get_command(app)


def _settings_fields(command: str, protocol: object) -> set[str]:
    """Keys ``--set`` accepts for ``fedgraphrec COMMAND PROTOCOL`` (first dotted part: a table)."""
    from fedgraphrec.protocols.registry import REGISTRY
    from fedgraphrec.protocols.settings import settings_fields
    from fedgraphrec.training.config import EvalSettings, TrainConfig

    keys = {f.name for cls in (TrainConfig, EvalSettings) for f in dataclasses.fields(cls)}
    keys |= {"protocol", "eval", "dataset_options"}
    entries = [REGISTRY[protocol]] if protocol in REGISTRY else list(REGISTRY.values())
    for entry in entries:  # compare, frontier: a base for several protocols
        keys |= {f.name for f in settings_fields(entry.settings)} | set(entry.settings.ALIASES)
    return keys


def check_command(argv: list[str]) -> None:
    """Parse ``fedgraphrec ARGV`` with the installed CLI without running it.

    Raises:
        click.UsageError (or a subclass): an unknown command or option, a bad value or arity.
        ValueError: a ``--set`` key that the command's configuration does not have.
    """
    command = _cli()
    ctx = click.Context(command, info_name="fedgraphrec")
    path: list[str] = []
    rest = list(argv)
    while isinstance(command, click.Group):
        if not rest or rest[0].startswith("-"):
            command.parse_args(ctx, rest)
            return
        name = rest.pop(0)
        sub = command.get_command(ctx, name)
        if sub is None:
            raise click.UsageError(f"no command {' '.join([*path, name])!r}", ctx)
        path.append(name)
        command = sub
        ctx = click.Context(command, info_name=name, parent=ctx)
    if "--help" in rest or "-h" in rest:
        return
    sub_ctx = command.make_context(path[-1], list(rest), parent=ctx.parent)
    if path and path[0] in ("train", "compare", "frontier", "audit"):
        keys = _settings_fields(path[0], sub_ctx.params.get("protocol"))
        for override in sub_ctx.params.get("overrides") or []:
            key = override.split("=", 1)[0].strip().split(".")[0]
            if key not in keys:
                raise ValueError(f"--set {override}: {' '.join(path)} has no setting {key!r}")


@functools.cache
def _help_text(*argv: str) -> str:
    """``ARGV --help`` of an installed program ("" when it has no such help)."""
    proc = subprocess.run([*argv, "--help"], capture_output=True, text=True, timeout=120)
    return proc.stdout + proc.stderr if proc.returncode == 0 else ""


def check_program(argv: list[str]) -> None:
    """A non-``fedgraphrec`` command: its program must be installed (or be a shell builtin).

    For the Flower programs (``flower-*``, ``flwr``) every ``--option`` must also appear in the
    program's (or its sub-command's) ``--help``.

    Raises:
        FileNotFoundError: the program is not on PATH nor in the venv's ``bin/``.
        ValueError: a Flower program does not list an option the page uses.
    """
    program = next((a for a in argv if "=" not in a or a.startswith("-")), argv[0])
    if program in BUILTINS or program.startswith("./"):
        return
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    path = shutil.which(program, path=search)
    if path is None:
        raise FileNotFoundError(f"program {program!r} is not installed")
    if program.startswith("flower-") or program == "flwr":
        words = argv[argv.index(program) :]
        sub = words[1:2] if len(words) > 1 and words[1].isalpha() else []
        text = _help_text(path, *sub) or _help_text(path)
        unknown = [a.split("=")[0] for a in words if a.startswith("--") and a.split("=")[0] not in text]
        if unknown:
            raise ValueError(f"{' '.join([program, *sub])} has no option(s) {', '.join(unknown)}")


def check_page(path: Path) -> tuple[list[str], list[str]]:
    """Check every shell block of a page: ``(failures, pending commands that now pass)``."""
    failures: list[str] = []
    landed: list[str] = []
    text = path.read_text()
    for _, _, block in blocks(text):
        for cmd in block.commands:
            where = f"{path.relative_to(ROOT)}:{cmd.line}: {shlex.join(cmd.argv)}"
            try:
                if cmd.argv[0] == "fedgraphrec":
                    check_command(cmd.argv[1:])
                else:
                    check_program(cmd.argv)
            except ValueError as exc:
                if not block.options.pending and not block.options.exit:  # documented bad settings
                    failures.append(f"{where}\n    {exc}")
            except (click.ClickException, FileNotFoundError) as exc:
                message = exc.format_message() if isinstance(exc, click.ClickException) else str(exc)
                if not block.options.pending:
                    failures.append(f"{where}\n    {message}")
            else:
                if block.options.pending and cmd.argv[0] == "fedgraphrec":
                    landed.append(f"{where} (pending: {block.options.pending})")
    return failures, landed


# ------------------------------------------------------------------------------------- running
class Workspace:
    """Where a page runs: a folder with the repository's configs/results/deploy linked in."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        for name in LINKED:
            if (ROOT / name).exists() and not (folder / name).exists():
                (folder / name).symlink_to(ROOT / name)
        self.env = dict(os.environ)
        self.env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), self.env.get("PATH", "")])
        self.env.setdefault("MPLBACKEND", "Agg")


def dataset_available(name: str) -> bool:
    """Whether ``name`` is a folder under ``$FEDGRAPHREC_DATA``."""
    root = os.environ.get("FEDGRAPHREC_DATA", "")
    return bool(root) and (Path(root) / name).is_dir()


def _matches(expected: str, actual: str) -> bool:
    squash = lambda s: " ".join(s.split())  # noqa: E731
    pattern = ".*?".join(re.escape(part.strip()) for part in squash(expected).split("..."))
    return re.search(pattern, squash(actual), re.DOTALL) is not None


def run_fedgraphrec(argv: list[str], workspace: Workspace) -> tuple[int, str, BaseException | None]:
    """Run ``fedgraphrec ARGV`` in-process; ``(exit code, stdout + stderr, exception)``."""
    from click.testing import CliRunner

    saved = dict(os.environ)
    try:
        result = CliRunner().invoke(_cli(), argv, env={"COLUMNS": "200"}, catch_exceptions=True)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    exc = result.exception if not isinstance(result.exception, SystemExit) else None
    return result.exit_code, result.output, exc


def evaluate_block(example: Example) -> str | None:
    """Sybil evaluator of a shell block: run its commands, return a failure message or ``None``."""
    block: Block = example.parsed
    ns = example.namespace
    workspace: Workspace = ns["__workspace__"]
    opts = block.options
    if opts.check_only or opts.pending:
        return None
    missing = [d for d in opts.needs if not dataset_available(d)]
    if missing:
        ns["__skipped__"] = f"needs dataset(s) {', '.join(missing)} under FEDGRAPHREC_DATA"
        return None
    failure = _run_commands(block, workspace)
    if opts.xfail:
        return None if failure else f"this block now runs: drop its xfail marker ({opts.xfail})"
    return failure


def _run_commands(block: Block, workspace: Workspace) -> str | None:
    """Run a block's commands in order; the first failure's message, or ``None``."""
    opts = block.options
    for cmd in block.commands:
        shown = shlex.join(cmd.argv) + (f"  [+ {shlex.join(opts.append)}]" if opts.append else "")
        if cmd.argv[0] == "fedgraphrec":
            code, output, exc = run_fedgraphrec([*cmd.argv[1:], *opts.append], workspace)
        else:
            proc = subprocess.run(
                ["bash", "-c", shlex.join(cmd.argv) if len(cmd.argv) > 1 else cmd.argv[0]],
                cwd=workspace.folder,
                env=workspace.env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            code, output, exc = proc.returncode, proc.stdout + proc.stderr, None
        if exc is not None:
            import traceback

            tb = "".join(traceback.format_exception(exc))
            return f"line {cmd.line}: {shown}\nraised:\n{tb}\noutput:\n{output}"
        if code != opts.exit:
            return f"line {cmd.line}: {shown}\nexit status {code}, expected {opts.exit}; output:\n{output}"
        if cmd.expected.strip() and not _matches(cmd.expected, output):
            return f"line {cmd.line}: {shown}\nexpected output:\n{cmd.expected}\ngot:\n{output}"
    return None


def shell_parser(document: Document) -> Iterable[Region]:
    """Sybil parser: one region per ``bash``/``console`` block."""
    for start, end, block in blocks(document.text):
        yield Region(start, end, block, evaluate_block)


def parse_page(path: Path) -> Document:
    """The page as a Sybil document: shell blocks and Python blocks."""
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    return Sybil(parsers=[shell_parser, PythonCodeBlockParser(doctest_optionflags=flags)]).parse(path)


def run_page(path: Path, folder: Path) -> str | None:
    """Run every block of a page in order in ``folder``; the skip reason, if the page was cut short."""
    document = parse_page(path)
    document.namespace["__workspace__"] = Workspace(folder)
    cwd = Path.cwd()
    os.chdir(folder)
    try:
        for example in document:
            if document.namespace.get("__skipped__"):
                return str(document.namespace["__skipped__"])
            example.evaluate()
    finally:
        os.chdir(cwd)
    return document.namespace.get("__skipped__")
