"""``agentbolt tasks check DIR``: Harbor tasks, checked on the Docker executor."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from agentbolt.cli.output import emit_json_lines, show

__all__ = ["tasks_app"]

tasks_app = typer.Typer(
    help="Harbor task directories (instruction.md, task.toml, environment/, tests/, solution/).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@tasks_app.command()
def check(
    path: Annotated[Path, typer.Argument(help="A Harbor task directory, or a directory of them.", show_default=False)],
    as_json: bool = typer.Option(False, "--json", help="One JSON line per task instead of a table."),
    concurrency: int = typer.Option(2, min=1, help="Containers at once."),
) -> None:
    """Run each task's solution/solve.sh in its environment (the oracle: must score 1) and
    a program that does nothing (the untouched environment: must score 0), each followed
    by tests/test.sh as the verifier, on the Docker executor. Exits 1 when a task fails
    either check, cannot be built, or no Docker Engine answers."""
    from agentbolt.runner.harness.docker import DockerUnavailableError
    from agentbolt.tasks.harbor import HarborTaskError, load
    from agentbolt.tasks.harbor.check import check_tasks, failures

    try:
        tasks = load(path)
    except HarborTaskError as exc:
        typer.echo(f"not a Harbor task: {exc}", err=True)
        raise typer.Exit(1) from None
    try:
        checks = check_tasks(tasks, concurrency=concurrency)
    except DockerUnavailableError as exc:
        typer.echo(f"cannot check Harbor tasks without Docker: {exc}", err=True)
        raise typer.Exit(1) from None
    if as_json:
        emit_json_lines([{"task": c.task, "oracle": c.oracle, "untouched": c.untouched, "ok": c.ok,
                          "problems": c.problems} for c in checks])
    else:
        table = Table(title=f"Harbor tasks in {path}: oracle must score 1, the untouched environment 0")
        for column in ("task", "oracle", "untouched", "ok"):
            table.add_column(column)
        for c in checks:
            table.add_row(c.task, _score(c.oracle), _score(c.untouched), "yes" if c.ok else "NO")
        show(table)
    problems = failures(checks)
    for line in problems:
        typer.echo(line, err=True)
    bad = sum(not c.ok for c in checks)
    if bad:
        typer.echo(f"{bad} of {len(checks)} task(s) failed the check", err=True)
        raise typer.Exit(1)
    typer.echo(f"all {len(checks)} task(s) pass: the oracle scores 1, the untouched environment 0", err=True)


def _score(value: float | None) -> str:
    return "failed" if value is None else f"{value:g}"
