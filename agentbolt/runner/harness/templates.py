"""Command templates: a program's argv from ``{placeholders}`` filled with a task's fields."""

from __future__ import annotations

import re
import shlex
import string
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from agentbolt.runner.harness.errors import HarnessConfigError
from agentbolt.tracing.context import AttemptContext

__all__ = ["Command", "placeholders", "render_command", "render_text", "split_command", "template_fields"]

Command = str | Sequence[str]


def split_command(command: Command, what: str) -> list[str]:
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    if not argv:
        raise ValueError(f"the harness {what} is empty: give a command line such as 'python agent.py {{question}}'")
    return argv


def template_fields(template: Sequence[str]) -> set[str]:
    """The task fields a command template names (``{answer}``, ``{case[0]}`` -> ``case``)."""
    names: set[str] = set()
    for arg in template:
        try:
            parsed = list(string.Formatter().parse(arg))
        except ValueError:
            continue  # render_command says what is wrong with it
        for _, name, _, _ in parsed:
            if name:
                names.add(re.split(r"[.\[]", name, maxsplit=1)[0])
    return names - {"task", "rollout_id", "attempt_id"}


def placeholders(task: Any, ctx: AttemptContext) -> dict[str, str]:
    fields: dict[str, str] = {}
    if isinstance(task, Mapping):
        for key, value in task.items():
            fields[str(key)] = value if isinstance(value, str) else orjson.dumps(value).decode()
    fields["task"] = orjson.dumps(task).decode()
    fields["rollout_id"] = ctx.rollout_id
    fields["attempt_id"] = ctx.attempt_id
    return fields


class _Fields(dict):
    hidden: frozenset[str] = frozenset()

    def __missing__(self, key: str) -> str:
        if key in self.hidden:
            raise HarnessConfigError(
                f"the program's command uses {{{key}}}, a task field the program may not see (the evaluator's command "
                f"uses it, or Harness(task_hidden=...) lists it): give the program the field on purpose with "
                f"Harness(task_visible=[..., {key!r}]), or leave it to the evaluator"
            )
        have = ", ".join(sorted(self)) or "none"
        raise HarnessConfigError(
            f"the command template uses {{{key}}} but the task has no field {key!r} (available: {have}); "
            "write {{ and }} for literal braces"
        )


def render_text(template: str, fields: Mapping[str, str]) -> str:
    """Fill ``{placeholders}`` in ``template`` (a task text) from ``fields``."""
    return render_command([template], fields)[0]


def render_command(
    template: Sequence[str], fields: Mapping[str, str], *, hidden: Iterable[str] = ()
) -> list[str]:
    """Fill ``{placeholders}`` in each argument of ``template`` from ``fields``;
    ``hidden`` names fields left out on purpose (a clearer error when one is used)."""
    lookup = _Fields(fields)
    lookup.hidden = frozenset(hidden)
    try:
        return [arg.format_map(lookup) for arg in template]
    except (ValueError, IndexError) as exc:
        raise HarnessConfigError(f"bad command template {list(template)!r}: {exc}") from None
