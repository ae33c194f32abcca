"""``agentbolt migrate PATH``: rewrite a program's Agent Lightning v0.3 imports to
``agentbolt.compat`` (see :mod:`agentbolt.compat.migrate`)::

    agentbolt migrate my_project/            # show the diff, change nothing
    agentbolt migrate my_project/ --write    # apply it

Each import agentbolt cannot map is reported with the reason and what to use instead.
Exit status: 0, or 1 when an import cannot be mapped (so CI can catch it).
Needs libcst: ``pip install 'agentbolt[migrate]'``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from agentbolt.cli.failures import USAGE_ERROR, fail
from agentbolt.compat.migrate import INSTALL_HINT

__all__ = ["SKIPPED_DIRS", "migrate", "python_files"]

SKIPPED_DIRS = frozenset({".git", ".hg", ".venv", "venv", "__pycache__", "node_modules", "site-packages", ".tox"})
"""Directories never entered: version control, virtual environments, caches."""


def python_files(path: Path) -> Iterator[Path]:
    """``path`` itself if it is a file, else every ``*.py`` below it (sorted)."""
    if path.is_file():
        yield path
        return
    for child in sorted(path.rglob("*.py")):
        if not SKIPPED_DIRS.intersection(child.relative_to(path).parts[:-1]):
            yield child


def migrate(
    path: Annotated[Path, typer.Argument(help="A Python file, or a directory (every *.py below it).",
                                         exists=True, resolve_path=False)],
    write: Annotated[bool, typer.Option("--write", help="Rewrite the files (default: print the diff only).")]
    = False,
) -> None:
    """Rewrite `agentlightning` imports to `agentbolt.compat`, keeping formatting and comments."""
    try:
        import libcst
    except ImportError:
        fail(f"agentbolt migrate needs libcst: {INSTALL_HINT}", USAGE_ERROR)
    from agentbolt.compat.migrate import migrate_source

    changed = unmapped = 0
    for file in python_files(path):
        source = file.read_text(encoding="utf-8")
        try:
            result = migrate_source(source)
        except libcst.ParserSyntaxError as exc:
            typer.echo(f"{file}: skipped, not valid Python ({exc.message} at line {exc.raw_line})", err=True)
            continue
        for finding in result.findings:
            unmapped += 1
            typer.echo(f"{file}:{finding.line}: cannot map `{finding.statement}`: {finding.reason}", err=True)
        if not result.changed:
            continue
        changed += 1
        if write:
            file.write_text(result.migrated, encoding="utf-8")
        else:
            typer.echo("".join(difflib.unified_diff(
                source.splitlines(keepends=True), result.migrated.splitlines(keepends=True),
                fromfile=f"a/{file}", tofile=f"b/{file}",
            )), nl=False)
    verb = "rewritten" if write else "to rewrite (run again with --write)"
    typer.echo(f"{changed} file(s) {verb}; {unmapped} import(s) cannot be mapped", err=True)
    if unmapped:
        raise typer.Exit(1)
