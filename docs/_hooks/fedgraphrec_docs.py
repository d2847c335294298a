"""MkDocs hook: the parts of the site generated from the code and the repository, so they cannot drift.

* Pages kept outside ``docs/`` join the site unchanged: ``ARCHITECTURE.md`` (``architecture.md``),
  ``SECURITY.md`` (``security.md``), every ``results/**/README.md`` and ``results/**/reproduce.md``
  (a paper table's report) and every ``results/**.png`` a page or report shows (same paths), so the
  guide can link to the committed results and a broken link fails ``mkdocs build --strict``.
* ``<!-- settings: protocol NAME -->`` becomes the table of the settings of protocol NAME, read from
  its dataclass in the registry (``fedgraphrec.protocols.registry``): every key of its ``[protocol]``
  table, with type, default and the description from the ``Attributes:`` sections of the class and
  the groups it inherits (``fedgraphrec.protocols.settings.settings_rows``, the same rows as
  ``fedgraphrec train NAME --help``).
* ``<!-- settings: MODULE[:CLASS] -->`` becomes a table of a settings dataclass: key, type,
  default (read from the dataclass) and the description from its docstring's ``Attributes:``
  section. Without ``:CLASS`` every ``*Settings`` dataclass defined in MODULE is shown. A module or
  class that does not exist fails the build, naming the page.
* ``<!-- api: PACKAGE [PACKAGE ...] -->`` becomes one mkdocstrings ``:::`` block per public module
  found under each package in ``src/`` (modules and packages whose name starts with ``_`` are
  internal), so the reference follows files as they move.
* ``<!-- cli: COMMAND ... -->`` becomes the usage and the options of ``fedgraphrec COMMAND ...``,
  read from the Typer application itself.
* The reStructuredText roles of the docstrings (``:math:`...```, ``:class:`...```) are rendered, in
  the settings tables and the API reference alike (:func:`rst_roles`), never shown raw.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EXTERNAL = {"ARCHITECTURE.md": "architecture.md", "SECURITY.md": "security.md"}
DIRECTIVE = re.compile(r"<!--\s*(settings|cli|api):\s*(.*?)\s*-->")
MATH_ROLE = re.compile(r":math:<code>(.*?)</code>", re.DOTALL)
REF_ROLE = re.compile(r":(class|func|meth|mod|attr|data|obj|exc|const|py:\w+):<code>(.*?)</code>", re.DOTALL)


def site_sources(root: Path = ROOT) -> dict[str, str]:
    """``repository path -> site path`` of every file that joins the site from outside ``docs/``.

    Pure Python (no MkDocs), so the link check of the test suite (``tests/docs/test_links.py``)
    sees the same site as the build.
    """
    pages = {source: uri for source, uri in EXTERNAL.items() if (root / source).exists()}
    for name in ("README.md", "reproduce.md"):  # result pages and the paper-table reports they cite
        for readme in sorted((root / "results").rglob(name)):
            rel = readme.relative_to(root).as_posix()
            pages[rel] = rel
    for page in sorted((root / "docs").rglob("*.md")):  # figures the pages show from results/
        for figure in re.findall(r"\((?:\.\./)+(results/[^)\s]+\.png)\)", page.read_text()):
            if (root / figure).exists():
                pages[figure] = figure
    for report in sorted((root / "results").rglob("reproduce.md")):  # figures a report shows
        for figure in re.findall(r"\]\(([^)\s:]+\.png)\)", report.read_text()):
            rel = (report.parent / figure).resolve().relative_to(root.resolve()).as_posix()
            if (root / rel).exists():
                pages[rel] = rel
    return pages


def on_files(files: Any, config: Any) -> Any:
    """Add the repository pages that live outside ``docs/``."""
    from mkdocs.structure.files import File

    for source, uri in site_sources().items():
        files.append(File.generated(config, uri, abs_src_path=str(ROOT / source)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Expand the ``settings`` and ``cli`` directives."""

    def expand(match: re.Match[str]) -> str:
        kind, args = match.group(1), match.group(2)
        where = f"{page.file.src_uri}: <!-- {kind}: {args} -->"
        try:
            if kind == "api":
                return api_section(args.split())
            return settings_table(args) if kind == "settings" else cli_section(args.split())
        except Exception as exc:  # a bad directive must fail the build, naming the page
            raise RuntimeError(f"{where}: {exc}") from exc

    markdown = DIRECTIVE.sub(expand, markdown)
    if page.file.src_uri == "results/README.md":
        markdown += "\n\n## Result pages\n\n" + "\n".join(
            f"- [`results/{uri[len('results/') : -len('README.md')]}`]({uri[len('results/') :]})"
            for uri in sorted(f.src_uri for f in files)
            if uri.startswith("results/") and uri.endswith("/README.md") and uri.count("/") > 1
        )
    return markdown


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """Render the reStructuredText roles the docstrings use (``:math:``, ``:class:``, ...)."""
    return rst_roles(html)


def rst_roles(html: str) -> str:
    r"""Turn the RST roles left in rendered HTML into what they mean.

    Markdown renders ``:math:`\alpha``` as the text ``:math:`` before a code span. Math becomes an
    ``arithmatex`` span (typeset by MathJax, as ``pymdownx.arithmatex`` marks it); a cross-reference
    role (``:class:``, ``:func:``, ...) becomes the code span alone, ``~`` keeping the last dotted part
    as Sphinx does.
    """

    def math(match: re.Match[str]) -> str:
        return f'<span class="arithmatex">\\({match.group(1)}\\)</span>'

    def ref(match: re.Match[str]) -> str:
        target = match.group(2).lstrip("!")
        if target.startswith("~"):
            target = target[1:].rsplit(".", 1)[-1]
        return f"<code>{target}</code>"

    html = MATH_ROLE.sub(math, html)
    return REF_ROLE.sub(ref, html)


# ---------------------------------------------------------------------------------------- settings
def attribute_docs(cls: type) -> dict[str, str]:
    """``name -> description`` from a Google-style ``Attributes:`` section of ``cls``'s docstring."""
    doc = inspect.getdoc(cls) or ""
    out: dict[str, str] = {}
    section = False
    current = ""
    for line in doc.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            section = line.strip() == "Attributes:"
            continue
        if not section:
            continue
        entry = re.match(r"^ {4}(\w+(?:, \w+)*)(?: \(.*?\))?: ?(.*)$", line)
        if entry:  # "lr, delta, beta: ..." documents three fields at once
            current = entry.group(1)
            out[current] = entry.group(2).strip()
        elif current:
            out[current] += " " + line.strip()
    for names in [k for k in out if ", " in k]:
        for name in names.split(", "):
            out.setdefault(name, out[names])
    return out


def _default(f: dataclasses.Field[Any]) -> str:
    if f.default is not dataclasses.MISSING:
        value: Any = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "required"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if dataclasses.is_dataclass(value) and not isinstance(value, type) and value == type(value)():
        return f"`{type(value).__name__}()` (its own defaults)"  # a nested table, listed on its own
    return f"`{value!r}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def dataclass_table(cls: type, keys: list[str] | None = None, docs: dict[str, str] | None = None) -> str:
    """A markdown table of the fields of ``cls`` (all, or ``keys`` in that order)."""
    docs = attribute_docs(cls) if docs is None else docs
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    names = keys if keys is not None else list(fields)
    missing = [k for k in names if k not in fields]
    if missing:
        raise KeyError(f"{cls.__qualname__} has no field(s) {', '.join(missing)}")
    rows = ["| key | type | default | what it sets |", "|---|---|---|---|"]
    for name in names:
        f = fields[name]
        kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        kind = str(kind).replace(" | ", " or ")  # a "|" inside a code span would show its escape
        rows.append(f"| `{name}` | `{kind}` | {_cell(_default(f))} | {_cell(docs.get(name, ''))} |")
    return "\n".join(rows)


def settings_table(args: str) -> str:
    """Expand ``settings: protocol NAME`` or ``settings: MODULE[:CLASS]``."""
    target, *options = args.split()
    if target == "protocol":
        from fedgraphrec.protocols.registry import lookup
        from fedgraphrec.protocols.settings import settings_docs, settings_fields

        cls = lookup(options[0]).settings
        aliases = {v: k for k, v in cls.ALIASES.items()}
        docs = {
            name: text + (f" Alias: `{aliases[name]}`." if name in aliases else "")
            for name, text in settings_docs(cls).items()
        }
        keys = [f.name for f in settings_fields(cls)]
        return f"Settings of `{options[0]}` (`{cls.__module__}.{cls.__qualname__}`):\n\n" + dataclass_table(
            cls, keys, docs
        )
    if options:
        raise ValueError(f"unknown options {' '.join(options)!r} (the form is MODULE[:CLASS])")
    module_name, _, class_name = target.partition(":")
    module = importlib.import_module(module_name)
    if class_name:
        classes = [getattr(module, class_name)]
    else:
        classes = [
            obj
            for name, obj in vars(module).items()
            if inspect.isclass(obj)
            and dataclasses.is_dataclass(obj)
            and obj.__module__ == module.__name__
            and name.endswith("Settings")
        ]
    if not classes:
        raise LookupError(f"no *Settings dataclass in {module_name}")
    parts = []
    for cls in classes:
        title = f"`{cls.__module__}.{cls.__qualname__}`"
        parts.append((f"{title}\n\n" if len(classes) > 1 or not class_name else "") + dataclass_table(cls))
    return "\n\n".join(parts)


# --------------------------------------------------------------------------------------------- api
def public_modules(package: str) -> list[str]:
    """Dotted names of ``package`` and its public modules, from the files under ``src/``."""
    base = ROOT / "src" / Path(*package.split("."))
    if base.with_suffix(".py").is_file():
        return [package]
    if not (base / "__init__.py").is_file():
        raise LookupError(f"no package {package} under src/")
    names = [package]
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(base).with_suffix("")
        parts = [p for p in rel.parts if p != "__init__"]
        if not parts or any(p.startswith("_") for p in parts):
            continue
        if not all((base / Path(*rel.parts[:i]) / "__init__.py").is_file() for i in range(1, len(rel.parts))):
            continue
        names.append(".".join([package, *parts]))
    return names


def api_section(packages: list[str]) -> str:
    """One ``:::`` block per public module of ``packages``."""
    blocks = []
    for package in packages:
        for module in public_modules(package):
            blocks.append(f"::: {module}\n    options:\n      show_submodules: false\n")
    return "\n".join(blocks)


# --------------------------------------------------------------------------------------------- cli
def cli_section(path: list[str]) -> str:
    """Usage and options of ``fedgraphrec PATH...`` from the Typer application."""
    import click
    import typer

    from fedgraphrec.cli._app import app

    command: click.Command = typer.main.get_command(app)
    ctx = click.Context(command, info_name="fedgraphrec")
    for name in path:
        if not isinstance(command, click.Group):
            raise LookupError(f"{ctx.command_path} has no sub-commands")
        sub = command.get_command(ctx, name)
        if sub is None:
            raise LookupError(f"{ctx.command_path} has no command {name!r}")
        command = sub
        ctx = click.Context(command, info_name=name, parent=ctx)
    usage = " ".join(command.collect_usage_pieces(ctx))
    lines = [f"```text\n{ctx.command_path} {usage}\n```", ""]
    help_text = inspect.cleandoc(command.help or "").split("\n\n")[0]
    if help_text:
        lines += [help_text.replace("\n", " "), ""]
    if isinstance(command, click.Group):
        lines += ["| command | what it does |", "|---|---|"]
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                lines.append(f"| `{name}` | {_cell(sub.get_short_help_str(120))} |")
        return "\n".join(lines)
    lines += ["| argument / option | default | help |", "|---|---|---|"]
    for param in command.params:
        if getattr(param, "hidden", False):
            continue
        if isinstance(param, click.Option):
            names = ", ".join(f"`{n}`" for n in [*param.opts, *param.secondary_opts])
            default = (
                ""
                if param.default in (None, (), []) or (param.is_flag and not param.default)
                else param.default
            )
            if param.is_flag and param.secondary_opts:
                default = param.opts[0] if param.default else param.secondary_opts[0]
            shown = f"`{default}`" if default != "" else ""
            lines.append(f"| {names} | {_cell(str(shown))} | {_cell(param.help or '')} |")
        else:
            arg_help = getattr(param, "help", "") or ""
            lines.append(f"| `{(param.name or '').upper()}` | | {_cell(arg_help)} |")
    return "\n".join(lines)
