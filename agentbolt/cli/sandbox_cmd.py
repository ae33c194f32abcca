"""``agentbolt sandbox check``: what the harness sandbox enforces on this machine."""

from __future__ import annotations

import asyncio

import typer
from rich.table import Table

from agentbolt.cli.output import emit_json_lines, show

__all__ = ["sandbox_app"]

sandbox_app = typer.Typer(
    help="The sandbox harnessed programs run in (bubblewrap).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@sandbox_app.command()
def check(
    as_json: bool = typer.Option(False, "--json", help="One JSON document instead of a table."),
) -> None:
    """Build a sandbox as a harness would and print what it enforces here: namespaces,
    privileges, read-only and masked paths, network, environment, limits. Exits 1 when a
    guarantee of docs/harness.md does not hold on this machine (known limits are shown,
    marked 'limit')."""
    from agentbolt.runner.harness.sandbox import SandboxUnavailableError
    from agentbolt.runner.harness.sandbox.check import check_sandbox

    try:
        result = asyncio.run(check_sandbox())
    except SandboxUnavailableError as exc:
        typer.echo(f"no sandbox on this machine: {exc}", err=True)
        raise typer.Exit(1) from None
    if as_json:
        emit_json_lines([result.as_dict()])
    else:
        table = Table(title=f"agentbolt sandbox on this machine (bubblewrap {result.bwrap_version}, {result.bwrap})")
        for column in ("area", "what", "here", "detail"):
            table.add_column(column)
        for f in result.findings:
            mark = ("yes" if f.holds else "NO") if f.guarantee else ("yes" if f.holds else "limit")
            table.add_row(f.area, f.item, mark, f.detail)
        show(table)
        broken = [f.item for f in result.findings if f.guarantee and not f.holds]
        typer.echo("every guarantee holds" if not broken else f"NOT enforced here: {', '.join(broken)}")
    if not result.ok:
        raise typer.Exit(1)
