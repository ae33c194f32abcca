"""``agentbolt migrate PATH``: a diff by default, ``--write`` applies it, unmappable
imports are reported (exit 1), and without libcst it says what to install."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentbolt.cli import app

V03 = "import agentlightning as agl  # keep me\nfrom agentlightning.store import InMemoryLightningStore\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "agent.py").write_text(V03)
    (tmp_path / "pkg" / "plain.py").write_text("import os\n")
    (tmp_path / ".venv" / "lib").mkdir(parents=True)
    (tmp_path / ".venv" / "lib" / "dep.py").write_text("import agentlightning\n")
    return tmp_path


def test_by_default_it_prints_the_diff_and_changes_nothing(project: Path) -> None:
    result = CliRunner().invoke(app, ["migrate", str(project)])
    assert result.exit_code == 0, result.output
    assert "-import agentlightning as agl  # keep me" in result.stdout
    assert "+import agentbolt.compat as agl  # keep me" in result.stdout
    assert "+from agentbolt.compat.store import InMemoryLightningStore" in result.stdout
    assert "1 file(s) to rewrite (run again with --write)" in result.stderr
    assert (project / "pkg" / "agent.py").read_text() == V03
    assert "dep.py" not in result.stdout  # virtual environments are not entered


def test_write_applies_it_and_a_second_run_finds_nothing(project: Path) -> None:
    assert CliRunner().invoke(app, ["migrate", str(project), "--write"]).exit_code == 0
    assert (project / "pkg" / "agent.py").read_text() == (
        "import agentbolt.compat as agl  # keep me\nfrom agentbolt.compat.store import InMemoryLightningStore\n")
    again = CliRunner().invoke(app, ["migrate", str(project / "pkg")])
    assert again.exit_code == 0 and again.stdout == "" and "0 file(s)" in again.stderr


def test_an_unmappable_import_is_reported_with_its_reason(tmp_path: Path) -> None:
    file = tmp_path / "train.py"
    file.write_text("import os\nfrom agentlightning.algorithm import VERL\n")
    result = CliRunner().invoke(app, ["migrate", str(file)])
    assert result.exit_code == 1
    assert f"{file}:2: cannot map `from agentlightning.algorithm import VERL`: " in result.stderr
    assert "agentbolt.algorithms.GRPO" in result.stderr


def test_a_file_that_is_not_python_is_skipped_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("def (:\n")
    result = CliRunner().invoke(app, ["migrate", str(tmp_path)])
    assert result.exit_code == 0 and "broken.py: skipped, not valid Python" in result.stderr


def test_without_libcst_it_says_what_to_install(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "libcst", None)  # `import libcst` raises ImportError
    result = CliRunner().invoke(app, ["migrate", str(project)])
    assert result.exit_code == 2
    assert "pip install 'agentbolt[migrate]'" in result.stderr
