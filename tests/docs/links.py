"""Check the documentation's relative links and repository paths without building the site.

The site is what ``mkdocs build`` would publish: every file under ``docs/`` (``_hooks/`` excluded)
at its path there, plus the repository files the docs hook brings in from outside ``docs/``
(``ARCHITECTURE.md``, ``SECURITY.md``, ``results/**/README.md`` and ``reproduce.md``, the figures
they show: ``site_sources`` of ``docs/_hooks/fedgraphrec_docs.py``, the hook the build itself runs).
A link on a site page must name another site file, relative to the page's *site* path (so
``docs/tutorials/x.md`` reaches ``results/frontier/README.md`` as ``../results/frontier/README.md``).
``README.md`` is read on GitHub, not on the site: its links are relative to the repository root.

Repository paths named in code spans (`` `tests/engines/test_flower_lpgcn.py` ``) must exist too, so a
page cannot send a reader to a file that has been renamed. Code blocks and HTML comments are not
read; anchors are left to ``mkdocs build --strict``.
"""

from __future__ import annotations

import importlib.util
import posixpath
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[2]
HOOK = ROOT / "docs" / "_hooks" / "fedgraphrec_docs.py"
LINK = re.compile(r"!?\[(?:[^\[\]\n]|\[[^\]\n]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCED = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n.*?^[ \t]*\1[ \t]*$", re.MULTILINE | re.DOTALL)
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.DOTALL)
REPO_PATH = re.compile(r"^(?:src|tests|configs|deploy|benchmarks|results|docs|\.ci)/[\w./-]*$")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def load_hook() -> ModuleType:
    """The docs hook module (it lives outside the package, so it is loaded from its file)."""
    spec = importlib.util.spec_from_file_location("fedgraphrec_docs_hook", HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def site_files(root: Path = ROOT) -> dict[str, Path]:
    """``site path -> repository file`` of every file the build publishes."""
    docs = root / "docs"
    site = {
        p.relative_to(docs).as_posix(): p
        for p in sorted(docs.rglob("*"))
        if p.is_file() and p.relative_to(docs).parts[0] != "_hooks"
    }
    for source, uri in load_hook().site_sources(root).items():
        site[uri] = root / source
    return site


def _blank(match: re.Match[str]) -> str:
    """The matched text with every character but newlines blanked, so line numbers survive."""
    return re.sub(r"[^\n]", " ", match.group(0))


def prose(text: str) -> str:
    """``text`` with code blocks and HTML comments blanked (line numbers kept)."""
    return COMMENT.sub(_blank, FENCED.sub(_blank, text))


def links(text: str) -> Iterator[tuple[int, str]]:
    """``(line, target)`` of every markdown link and image outside code."""
    text = CODE_SPAN.sub(_blank, prose(text))
    for match in LINK.finditer(text):
        yield text.count("\n", 0, match.start()) + 1, match.group(1)


def code_paths(text: str) -> Iterator[tuple[int, str]]:
    """``(line, path)`` of every repository path written as a code span (globs left out)."""
    text = prose(text)
    for match in CODE_SPAN.finditer(text):
        value = match.group(2).strip()
        if REPO_PATH.match(value) and "*" not in value:
            yield text.count("\n", 0, match.start()) + 1, value


def _target(base: str, target: str) -> str | None:
    """The path a relative link points at, from ``base`` (a folder); ``None``: not a file link."""
    if SCHEME.match(target) or target.startswith("#"):
        return None
    path = unquote(re.split(r"[#?]", target, maxsplit=1)[0])
    return posixpath.normpath(posixpath.join(base, path))


def check_links(root: Path = ROOT) -> list[str]:
    """Every broken relative link of the site's pages and of ``README.md``, as ``file:line: message``."""
    site = site_files(root)
    failures = []
    for uri, source in site.items():
        if not uri.endswith(".md"):
            continue
        where = source.relative_to(root).as_posix()
        for line, target in links(source.read_text()):
            if target.startswith("/"):
                failures.append(f"{where}:{line}: absolute link {target!r} (the site has no root)")
                continue
            resolved = _target(posixpath.dirname(uri), target)
            if resolved is not None and resolved not in site:
                failures.append(f"{where}:{line}: link {target!r}: no site page or file {resolved!r}")
    readme = root / "README.md"
    if readme.exists():
        for line, target in links(readme.read_text()):
            resolved = _target("", target)
            if resolved is not None and not (root / resolved).exists():
                failures.append(f"README.md:{line}: link {target!r}: no file {resolved!r}")
    return failures


def check_code_paths(root: Path = ROOT) -> list[str]:
    """Every repository path named in a code span of the docs that does not exist.

    The docs are ``README.md`` and every page the site publishes: ``docs/`` and the pages the docs
    hook brings in (``ARCHITECTURE.md``, ``SECURITY.md``, the results' ``README.md`` and
    ``reproduce.md`` files), so a results page cannot name a script or module that is gone.
    """
    pages = [root / "README.md"]
    pages += [p for p in sorted((root / "docs").rglob("*.md")) if "_hooks" not in p.parts]
    pages += [root / source for source in load_hook().site_sources(root) if source.endswith(".md")]
    failures = []
    for page in (p for p in pages if p.exists()):
        for line, path in code_paths(page.read_text()):
            if not (root / path).exists():
                failures.append(f"{page.relative_to(root).as_posix()}:{line}: `{path}` does not exist")
    return failures
