"""The folders are the layers: no module imports a layer above its own (ARCHITECTURE.md).

Every ``import`` in ``src/fedgraphrec`` — at module level or inside a function — is read with
:mod:`ast`; an import of ``fedgraphrec.<top>`` from a module whose own top-level package sits lower
in :data:`LAYERS` fails the test, naming file, line and both layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "fedgraphrec"

LAYERS: list[set[str]] = [
    {"seeding"},
    {"data"},
    {"models"},
    {"evaluation"},
    {"crypto", "privacy"},
    {"runtime"},
    {"protocols"},
    {"attacks"},
    {"training"},
    {"audits", "reproduce", "engines"},
    {"cli"},
]
"""Bottom to top; packages in one set are one layer and may import each other."""

RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _top(module: str) -> str | None:
    """``fedgraphrec.protocols.lpgcn`` → ``protocols``; ``None`` outside the package."""
    parts = module.split(".")
    return parts[1] if parts[0] == "fedgraphrec" and len(parts) > 1 else None


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported fedgraphrec module) of every import statement in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "fedgraphrec":  # from fedgraphrec import training
                out += [(node.lineno, f"fedgraphrec.{alias.name}") for alias in node.names]
            else:
                out.append((node.lineno, node.module))
    return out


def upward_imports(src: Path = SRC) -> list[str]:
    """Every import of a higher layer, as ``file:line: a (layer i) imports b (layer j)``."""
    bad = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src)
        own = rel.parts[0].removesuffix(".py")
        if own == "__init__" or own not in RANK:
            continue
        for line, module in _imports(path):
            target = _top(module)
            if target in RANK and RANK[target] > RANK[own]:
                bad.append(f"{rel}:{line}: {own} (layer {RANK[own]}) imports {module} (layer {RANK[target]})")
    return bad


def test_every_top_level_package_has_a_layer() -> None:
    tops = {
        p.name.removesuffix(".py")
        for p in SRC.iterdir()
        if not p.name.startswith(("_", ".")) and (p.suffix == ".py" or (p / "__init__.py").exists())
    }
    assert tops <= set(RANK), f"packages without a layer: {sorted(tops - set(RANK))}"


def test_no_module_imports_a_layer_above_its_own() -> None:
    bad = upward_imports()
    assert not bad, "upward imports:\n" + "\n".join(bad)


def test_an_upward_import_is_caught(tmp_path: Path) -> None:
    """The check itself works: a data module importing training is reported."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "loader.py").write_text("def f():\n    from fedgraphrec.training import Trainer\n")
    (tmp_path / "training").mkdir()
    (tmp_path / "training" / "loop.py").write_text("from fedgraphrec import data\n")
    bad = upward_imports(tmp_path)
    assert bad == ["data/loader.py:2: data (layer 1) imports fedgraphrec.training (layer 8)"]


@pytest.mark.parametrize("package", sorted(RANK))
def test_each_package_says_what_lives_there(package: str) -> None:
    init = SRC / package / "__init__.py"
    if not init.exists():  # a single module such as seeding.py
        init = SRC / f"{package}.py"
    doc = ast.get_docstring(ast.parse(init.read_text()))
    assert doc and len(doc.split()) >= 8, f"{init.relative_to(SRC)} needs a module docstring"


def test_no_global_random_state() -> None:
    """Every draw goes through ``seeding``'s named generators: nobody seeds a global RNG."""
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "seeding.py":
            continue
        for no, line in enumerate(path.read_text().splitlines(), 1):
            if "manual_seed(" in line or "np.random.seed(" in line or "random.seed(" in line:
                offenders.append(f"{path.relative_to(SRC)}:{no}: {line.strip()}")
    assert not offenders, "global or ad-hoc seeding:\n" + "\n".join(offenders)


def test_one_command_line() -> None:
    """The CLI is typer's (``fedgraphrec.cli``): no argparse entry point hides inside the package."""
    users = [str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if "argparse" in p.read_text()]
    assert not users, f"argparse in {users}; research runners belong in benchmarks/"
