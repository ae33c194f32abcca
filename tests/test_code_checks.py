"""The code checks CI runs over the ``agentbolt`` package, with the settings in
pyproject.toml: ruff (lint), mypy (types) and import-linter (the floors of
docs/concepts.md — a lower floor never imports a higher one — and no import loop).

Each check runs the tool as a developer would and fails with the tool's own report, so
the fix is in the output. The last tests plant a violation in a copy of the package and
check that the import-layer check catches it: a contract that cannot fail checks nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _run(args: list[str], *, cwd: Path = ROOT, timeout: float = 600,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env, check=False)


def _report(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"


def test_ruff_finds_nothing_in_the_package() -> None:
    done = _run([sys.executable, "-m", "ruff", "check", "--no-cache", "agentbolt"])
    assert done.returncode == 0, _report(done)


@pytest.mark.timeout(900)
def test_mypy_finds_no_type_error_in_the_package() -> None:
    done = _run([sys.executable, "-m", "mypy"], timeout=900)  # [tool.mypy] names the package
    assert done.returncode == 0, _report(done)
    assert "Success: no issues found" in done.stdout, _report(done)


def test_the_import_layers_and_no_loop_contracts_hold() -> None:
    done = _run([str(BIN / "lint-imports"), "--no-cache"])
    assert done.returncode == 0, _report(done)
    assert "Contracts: 2 kept, 0 broken." in done.stdout, _report(done)


def _copy_of_the_package(tmp_path: Path) -> Path:
    """agentbolt's sources and pyproject.toml in ``tmp_path``, importable from there first."""
    shutil.copytree(ROOT / "agentbolt", tmp_path / "agentbolt",
                    ignore=shutil.ignore_patterns("__pycache__", "dist"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _lint_copy(copy: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(copy)}  # the copy, not the installed package
    return _run([str(BIN / "lint-imports"), "--no-cache"], cwd=copy, env=env)


def _plant(copy: Path, module: str, line: str) -> None:
    path = copy / module
    path.write_text(path.read_text() + f"\n{line}  # planted by tests/test_code_checks.py\n")


def test_the_layer_check_fails_on_an_upward_import(tmp_path: Path) -> None:
    copy = _copy_of_the_package(tmp_path)
    _plant(copy, "agentbolt/types.py", "from agentbolt.server import auth")  # the bottom floor reaching up

    done = _lint_copy(copy)

    assert done.returncode != 0, _report(done)
    assert "a lower floor never imports a higher one BROKEN" in done.stdout, _report(done)
    assert "agentbolt.types -> agentbolt.server.auth" in done.stdout, _report(done)


def test_the_loop_check_fails_on_an_import_loop(tmp_path: Path) -> None:
    copy = _copy_of_the_package(tmp_path)
    # a loop inside one floor: the tracer imports the context, the context the tracer
    _plant(copy, "agentbolt/tracing/context.py", "from agentbolt.tracing import tracer")

    done = _lint_copy(copy)

    assert done.returncode != 0, _report(done)
    assert "no import loop among the modules and packages of any one package BROKEN" in done.stdout, _report(done)
    assert "agentbolt.tracing" in done.stdout, _report(done)
