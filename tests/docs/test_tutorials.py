"""The documentation does not lie: tutorials run, and every documented command exists.

* ``test_tutorial_runs``: every code block of every page under ``docs/tutorials/`` runs in order in a
  fresh workspace (``tests/docs/doctools.py`` says how; heavy commands run with the arguments their
  ``<!-- doctest: append=... -->`` marker appends). A page whose dataset is absent skips from that
  block on, with the reason.
* ``test_documented_commands_exist``: every ``fedgraphrec`` command in README.md and docs/ parses
  with the installed CLI (command, options, values, ``--set`` keys) — this never skips, so renaming a
  command or a flag fails here even without datasets.
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from tests.docs.doctools import ROOT, Options, blocks, check_command, check_page, run_page, shell_commands

TUTORIALS = sorted((ROOT / "docs" / "tutorials").glob("*.md"))
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


@pytest.mark.parametrize("page", [p for p in TUTORIALS if p.name != "index.md"], ids=lambda p: p.stem)
def test_tutorial_runs(page: Path, tmp_path: Path) -> None:
    skipped = run_page(page, tmp_path)
    if skipped:
        pytest.skip(f"{page.name}: {skipped}")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_documented_commands_exist(page: Path) -> None:
    failures, landed = check_page(page)
    assert not failures, "documented commands the CLI does not accept:\n" + "\n".join(failures)
    assert not landed, "these commands have landed; drop their pending marker:\n" + "\n".join(landed)


def test_the_checker_catches_a_renamed_flag_and_a_bad_setting() -> None:
    check_command(["train", "lpgcn", "--dataset", "synthetic", "--epochs", "1", "--set", "alpha=2"])
    with pytest.raises(click.UsageError, match="no_such_flag"):
        check_command(["train", "lpgcn", "--no_such_flag", "1"])
    with pytest.raises(click.UsageError, match="no command 'tarin'"):
        check_command(["tarin", "lpgcn"])
    with pytest.raises(ValueError, match="no setting 'alhpa'"):
        check_command(["train", "lpgcn", "--set", "alhpa=2"])
    with pytest.raises(click.BadParameter, match="one"):
        check_command(["train", "lpgcn", "--epochs", "one"])


def test_blocks_markers_and_continuations() -> None:
    text = (
        'Intro.\n\n<!-- doctest: append="--epochs 1" needs=ml-100k -->\n```bash\n'
        "fedgraphrec train lpgcn \\\n    --dataset ml-100k  # comment\nls runs\n```\n"
        "```console\n$ fedgraphrec datasets --format json\n{...}\n```\n"
    )
    found = [b for _, _, b in blocks(text)]
    assert [c.argv for c in found[0].commands] == [
        ["fedgraphrec", "train", "lpgcn", "--dataset", "ml-100k"],
        ["ls", "runs"],
    ]
    assert found[0].options.append == ["--epochs", "1"] and found[0].options.needs == ["ml-100k"]
    assert found[1].options == Options() and found[1].commands[0].expected == "{...}\n"
    assert shell_commands("bash", "# only a comment\n", 1) == []


def test_console_output_matching() -> None:
    from tests.docs.doctools import _matches

    out = "table\nverify: largest relative parameter deviation 1.7e-06\nsent 24.1 KiB / 17.3 KiB; received 9 KiB\n"
    assert _matches("...\nverify: largest ... deviation ...e-0...\nsent ... KiB / ... KiB; received ...", out)
    assert not _matches("...\nverify: smallest ...", out)
    assert not _matches("sent ... MiB", out)
