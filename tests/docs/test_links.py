"""A broken link fails the build, and the documentation has none.

* ``make docs`` is ``mkdocs build --strict`` with the project's ``validation:`` levels, and nothing
  (no ``-q``) hides its warnings: a tiny site built with the same settings (the heavy mkdocstrings
  plugin left out, so it takes seconds) fails on a link to a missing page, a missing anchor, a
  link to a missing repository report and an unrecognized link, and passes without them.
* Every relative link of the site's pages and of ``README.md`` resolves, and every repository path
  a page names in a code span exists (``tests/docs/links.py``: pure Python, no build).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.docs.links import ROOT, check_code_paths, check_links, code_paths, links, load_hook

GOOD = "[Guide](guide.md), [its part](guide.md#a-section), [results](results/README.md)"


def _tiny_site(folder: Path, index: str) -> Path:
    """A two-page site with the project's strictness, validation and theme; its ``mkdocs.yml``."""
    project: dict[str, Any] = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    docs = folder / "docs"
    (docs / "results").mkdir(parents=True)
    (docs / "index.md").write_text(f"# Home\n\n{index}\n")
    (docs / "guide.md").write_text("# Guide\n\n## A section\n\nText.\n")
    (docs / "results" / "README.md").write_text("# Results\n")
    config = {
        "site_name": "tiny",
        "docs_dir": str(docs),
        "site_dir": str(folder / "site"),
        "strict": project.get("strict", False),
        "validation": project["validation"],
        "theme": project["theme"],
        "markdown_extensions": project.get("markdown_extensions", []),
        "plugins": [],
    }
    path = folder / "mkdocs.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def _build(config: Path) -> subprocess.CompletedProcess[str]:
    """``make docs``'s command line on ``config``."""
    recipe = _make_docs_recipe()
    flags = [f for f in recipe.split() if f.startswith("--") and f != "--site-dir"]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", *flags, "-f", str(config)]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=config.parent, timeout=120)


def _make_docs_recipe() -> str:
    """The command of the Makefile's ``docs`` target."""
    text = (ROOT / "Makefile").read_text()
    match = re.search(r"^docs:.*\n\t(.+)$", text, re.MULTILINE)
    assert match, "the Makefile has no docs target"
    return match.group(1)


def test_make_docs_is_strict_and_nothing_hides_its_warnings() -> None:
    recipe = _make_docs_recipe()
    assert "mkdocs build" in recipe and "--strict" in recipe.split()
    assert not {"-q", "--quiet"} & set(recipe.split())
    ci = (ROOT / ".ci" / "run").read_text()
    docs_lines = [ln for ln in ci.splitlines() if re.match(r"\s*make\b.*\bdocs\b", ln)]
    assert docs_lines, ".ci/run does not build the documentation"
    for line in docs_lines:
        assert "-q" not in line.split("#")[0] and "MKDOCS_FLAGS" not in line, line


def test_the_tiny_site_builds_when_its_links_resolve(tmp_path: Path) -> None:
    result = _build(_tiny_site(tmp_path, GOOD))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "index.html").exists()


@pytest.mark.parametrize(
    ("link", "reported"),
    [
        ("[gone](missing.md)", "missing.md"),
        ("[a report](results/lpgcn-f10/reproduce.md)", "results/lpgcn-f10/reproduce.md"),
        ("[section](guide.md#no-such-section)", "no-such-section"),
        ("[folder](nowhere)", "nowhere"),
    ],
    ids=["missing-page", "missing-report", "missing-anchor", "unrecognized"],
)
def test_a_broken_link_fails_the_build_naming_it(tmp_path: Path, link: str, reported: str) -> None:
    result = _build(_tiny_site(tmp_path, f"{GOOD}\n\n{link}"))
    assert result.returncode != 0, f"mkdocs build passed with {link}:\n{result.stderr}"
    assert reported in result.stderr and "index.md" in result.stderr


def test_every_documentation_link_resolves() -> None:
    failures = check_links()
    assert not failures, "broken links:\n" + "\n".join(failures)


def test_every_repository_path_the_docs_name_exists() -> None:
    failures = check_code_paths()
    assert not failures, "paths that do not exist:\n" + "\n".join(failures)


def _repo(tmp_path: Path, pages: dict[str, str]) -> Path:
    for name, text in pages.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "results").mkdir(exist_ok=True)
    return tmp_path


def test_the_link_check_finds_a_broken_link_where_mkdocs_would(tmp_path: Path) -> None:
    root = _repo(
        tmp_path,
        {
            "README.md": "[docs](docs/index.md) [gone](docs/gone.md)\n",
            "docs/index.md": "# Home\n\n[ok](tutorials/a.md)\n",
            "docs/tutorials/a.md": (
                "[report](../results/x/reproduce.md) [up](../index.md) [web](https://x.org)\n"
                "`[not a link](nowhere.md)`\n\n```bash\n[nor this](nowhere.md)\n```\n"
            ),
            "results/x/README.md": "# x\n",
        },
    )
    failures = check_links(root)
    assert failures == [
        "docs/tutorials/a.md:1: link '../results/x/reproduce.md': no site page or file 'results/x/reproduce.md'",
        "README.md:1: link 'docs/gone.md': no file 'docs/gone.md'",
    ]
    (root / "results" / "x" / "reproduce.md").write_text("# report\n")  # the hook now brings it in
    (root / "docs" / "gone.md").write_text("# back\n")
    assert check_links(root) == []


def test_the_path_check_finds_a_renamed_test_file(tmp_path: Path) -> None:
    root = _repo(
        tmp_path,
        {
            "docs/index.md": "as `tests/engines/test_flower.py` does; `results/**/README.md`; `runs/x`\n",
            "tests/engines/test_flower_lpgcn.py": "",
        },
    )
    assert check_code_paths(root) == ["docs/index.md:1: `tests/engines/test_flower.py` does not exist"]
    (root / "docs" / "index.md").write_text("as `tests/engines/test_flower_lpgcn.py` does\n")
    assert check_code_paths(root) == []


def test_the_path_check_reads_the_results_pages_the_site_publishes(tmp_path: Path) -> None:
    root = _repo(
        tmp_path,
        {
            "docs/index.md": "home\n",
            "results/flower/README.md": "# Flower\n\nmade by `benchmarks/flower_gone.py`\n",
            "SECURITY.md": "see `src/fedgraphrec/gone.py`\n",
        },
    )
    assert sorted(check_code_paths(root)) == [
        "SECURITY.md:1: `src/fedgraphrec/gone.py` does not exist",
        "results/flower/README.md:3: `benchmarks/flower_gone.py` does not exist",
    ]


def test_links_and_paths_are_read_outside_code_only() -> None:
    text = (
        "a [x](y.md)\n\n```md\n[z](w.md) `src/a.py`\n```\n<!-- [c](d.md) -->\n`src/b.py` and ``[e](f.md)``\n"
    )
    assert list(links(text)) == [(1, "y.md")]
    assert list(code_paths(text)) == [(7, "src/b.py")]


def test_rst_roles_render_as_math_and_code() -> None:
    hook = load_hook()
    html = (
        "<td>:math:<code>\\lambda</code> of :math:<code>\\alpha &gt; 0</code>; "
        ":func:<code>~fedgraphrec.seeding.secure_draws</code>, :class:<code>EvalSettings</code></td>"
    )
    assert hook.rst_roles(html) == (
        '<td><span class="arithmatex">\\(\\lambda\\)</span> of '
        '<span class="arithmatex">\\(\\alpha &gt; 0\\)</span>; '
        "<code>secure_draws</code>, <code>EvalSettings</code></td>"
    )


def test_the_settings_tables_show_the_code_defaults_and_every_setting() -> None:
    from fedgraphrec.protocols.registry import lookup
    from fedgraphrec.protocols.settings import settings_fields
    from fedgraphrec.training.config import TrainConfig

    hook = load_hook()
    table = hook.settings_table("protocol lpgcn")
    for name in (f.name for f in settings_fields(lookup("lpgcn").settings)):
        assert f"| `{name}` |" in table
    assert "| `secure_init` |" in table and "| `alpha` |" in table
    run = hook.settings_table("fedgraphrec.training.config:TrainConfig")
    assert f"| `seed` | `int` | `{TrainConfig().seed}` |" in run
    assert "| `eval` | `EvalSettings` | `EvalSettings()` (its own defaults) |" in run
