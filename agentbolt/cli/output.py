"""Where CLI output goes: rich renderables for people, JSON lines for scripts.

When stdout is not a terminal (a pipe, a file, a test runner) tables are laid out
wide instead of at 80 columns, so ids are never cut; ``COLUMNS`` still wins when set.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import typer
from pydantic import BaseModel
from rich.console import Console, RenderableType

from agentbolt.cli.render import json_line

__all__ = ["PIPE_WIDTH", "emit_json_lines", "note", "show", "stdout_console"]

PIPE_WIDTH = 200
"""Layout width when stdout is not a terminal and ``COLUMNS`` is not set."""


def stdout_console() -> Console:
    """A console on the current ``sys.stdout`` (created per call: test runners swap it)."""
    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(highlight=False, soft_wrap=False, width=PIPE_WIDTH)
    return console


def show(renderable: RenderableType) -> None:
    stdout_console().print(renderable)


def emit_json_lines(items: Iterable[BaseModel | dict[str, Any]]) -> None:
    """One JSON document per line on stdout."""
    for item in items:
        typer.echo(json_line(item))


def note(message: str) -> None:
    """A hint for people (e.g. the next cursor) on stderr, so stdout stays parseable."""
    typer.echo(message, err=True)
