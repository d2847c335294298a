"""No import circles between the modules of ``src/fedgraphrec`` — inside one folder or across folders.

:mod:`tests.test_layers` stops a module importing a *higher* folder; it cannot see two modules of one
folder (or of one layer) importing each other. Such a circle works only by luck of import order, and a
deferred import inside a function merely hides it, so this test reads every import with :mod:`ast`,
builds the module graph and fails on each strongly connected component, printed as a chain
``a → b → a`` with the file and line of every edge.

What counts as an edge ``a → b``:

- every ``import`` / ``from … import`` of a ``fedgraphrec`` module anywhere in ``a`` — at module
  level, inside functions and methods (deferred imports are circles too), inside ``try`` and
  under ``if TYPE_CHECKING:`` — and every ``import_module("fedgraphrec.…")`` with a literal name;
- relative imports are resolved against ``a``'s package (``from . import x``, ``from ..runtime import y``);
- ``from pkg import name`` is an edge to ``pkg.name`` when ``name`` is a submodule, otherwise to the
  package ``pkg`` itself (its ``__init__`` runs and defines or re-exports ``name``), and a package's
  ``__init__`` has the edges of its own imports;
- importing ``a.b.c`` is *not* counted as an edge to the parents ``a`` and ``a.b``: Python runs
  their ``__init__`` first, but every module below a package would otherwise "circle" through a
  package that re-exports it, which is the normal layout and harmless.

Imports under ``if TYPE_CHECKING:`` count although they never run: such an import closing a circle
says that two modules know each other (GNN4FR's paper-literal backward annotated with the client
that calls it), which is the design knot this test is about; the way out is a type the lower module
owns (a :class:`typing.Protocol` of what it reads) or the shared piece moved where it belongs.
"""

from __future__ import annotations

import ast
from collections import deque
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "fedgraphrec"


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` at ``line`` of ``source``'s file."""

    source: str
    target: str
    line: int


def module_names(src: Path) -> dict[str, Path]:
    """Dotted name (``fedgraphrec.runtime.local``; a package is its ``__init__``) → file."""
    names = {}
    for path in sorted(src.rglob("*.py")):
        parts = (src.name, *path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def _executed_imports(tree: ast.AST) -> list[tuple[int, list[str], str, int]]:
    """Every import in ``tree`` as (line, names, module, level) — ``import_module("…")`` included."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.append((node.lineno, [alias.name for alias in node.names], "", 0))
        elif isinstance(node, ast.ImportFrom):
            found.append((node.lineno, [alias.name for alias in node.names], node.module or "", node.level))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name | ast.Attribute)
            and (node.func.id if isinstance(node.func, ast.Name) else node.func.attr) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, [node.args[0].value], "", 0))
    return found


def _package_of(name: str, path: Path) -> str:
    """The package a relative import in module ``name`` is resolved against."""
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def import_edges(src: Path = SRC) -> list[Edge]:
    """Every executed import between two modules of the package under ``src``."""
    modules = module_names(src)
    edges = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for line, names, module, level in _executed_imports(tree):
            targets: list[str] = []
            if not module and not level:  # import a.b.c, import_module("a.b.c")
                targets = names
            else:
                origin = module
                if level:
                    base = _package_of(name, path).split(".")
                    base = base[: len(base) - (level - 1)]
                    origin = ".".join(base + ([module] if module else []))
                for alias in names:
                    sub = f"{origin}.{alias}"
                    targets.append(sub if sub in modules else origin)
            for target in targets:
                # ``import a.b.c`` names a module; anything else that is not one is outside the package
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.append(Edge(name, target, line))
    return edges


def strongly_connected(nodes: set[str], adjacent: dict[str, list[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative: the components with more than one module, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components = []
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(adjacent.get(root, [])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(adjacent.get(child, []))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def _short(module: str) -> str:
    return module.partition(".")[2] or module


def circles(src: Path = SRC) -> list[tuple[frozenset[str], str]]:
    """Each import circle as (its modules, a readable chain with the line of every import)."""
    edges = import_edges(src)
    adjacent: dict[str, list[str]] = {}
    lines: dict[tuple[str, str], list[int]] = {}
    for edge in edges:
        if edge.target not in adjacent.setdefault(edge.source, []):
            adjacent[edge.source].append(edge.target)
        lines.setdefault((edge.source, edge.target), []).append(edge.line)
    found = []
    for component in strongly_connected({e.source for e in edges} | {e.target for e in edges}, adjacent):
        members = set(component)
        start = component[0]
        # shortest way back to ``start`` inside the component: one readable chain
        previous: dict[str, str] = {}
        queue = deque([start])
        while queue:
            node = queue.popleft()
            for child in adjacent.get(node, []):
                if child in members and child not in previous:
                    previous[child] = node
                    queue.append(child)
            if start in previous:
                break
        chain = [start]
        node = previous[start]
        while node != start:
            chain.append(node)
            node = previous[node]
        chain.append(start)
        chain.reverse()
        steps = [_short(chain[0])]
        for source, target in pairwise(chain):
            at = ",".join(str(n) for n in sorted(set(lines[(source, target)])))
            steps.append(f"→ {_short(target)} (line {at} of {_short(source)})")
        others = sorted(_short(m) for m in members - set(chain))
        text = " ".join(steps) + (f"  [also in this circle: {', '.join(others)}]" if others else "")
        found.append((frozenset(_short(m) for m in members), text))
    return found


def test_no_import_circles() -> None:
    found = [text for _, text in circles()]
    assert not found, "import circles:\n" + "\n".join(found)


def _package(root: Path, files: dict[str, str]) -> Path:
    src = root / "fedgraphrec"
    for rel, text in files.items():
        path = src / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return src


def test_a_circle_inside_one_folder_is_caught_even_when_deferred(tmp_path: Path) -> None:
    """Two modules of one folder, one importing the other only inside a function: still a circle."""
    src = _package(
        tmp_path,
        {
            "__init__.py": "",
            "runtime/__init__.py": "",
            "runtime/local.py": "from .transport import Transport\n",
            "runtime/transport.py": "class Transport:\n    def f(self):\n        from fedgraphrec.runtime import local\n",
        },
    )
    assert [text for _, text in circles(src)] == [
        "runtime.local → runtime.transport (line 1 of runtime.local) "
        "→ runtime.local (line 3 of runtime.transport)"
    ]


def test_a_circle_through_a_package_init_is_caught(tmp_path: Path) -> None:
    """``from fedgraphrec.protocols import x`` runs the package ``__init__``, which imports back."""
    src = _package(
        tmp_path,
        {
            "__init__.py": "",
            "protocols/__init__.py": "from .client import Client\n",
            "protocols/client.py": "from fedgraphrec.protocols import paper\nclass Client: ...\n",
            "protocols/paper.py": "def g():\n    from fedgraphrec.protocols import Client\n",
        },
    )
    [(members, _)] = circles(src)
    assert members == {"protocols", "protocols.client", "protocols.paper"}


def test_type_checking_and_import_module_close_circles_too(tmp_path: Path) -> None:
    """An import only for annotations, and one by ``import_module``, still tie two modules together."""
    src = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fedgraphrec.b import B\n",
            "b.py": "from fedgraphrec.a import *\nclass B: ...\n",
            "c.py": "from importlib import import_module\nD = import_module('fedgraphrec.d')\n",
            "d.py": "import fedgraphrec.c\n",
        },
    )
    assert {members for members, _ in circles(src)} == {frozenset("ab"), frozenset("cd")}
