"""What a harness profile is: how one real coding agent is pointed at a rollout's gateway.

A profile never changes the program. Per rollout it is given a :class:`RunContext` (the
gateway's URLs as the program reaches them, the scoped token, the program's ``HOME``
and working directory, the task text) and answers with a :class:`Launch`: the command
line, the environment, the files to write into that ``HOME`` (its config) and what goes
on stdin. Statically it declares where it comes from (:class:`Install`), which wire
protocol it speaks and what the sandbox must show it (:meth:`HarnessProfile.mounts`).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal, Protocol

__all__ = [
    "MAX_ARG_BYTES",
    "HarnessProfile",
    "Install",
    "Launch",
    "RunContext",
    "TaskInput",
    "WireProtocol",
]

MAX_ARG_BYTES = 131072 - 1
"""Linux's limit on one argument (``MAX_ARG_STRLEN``, 32 pages, with its NUL): a longer
task text cannot be on a command line, so profiles pass it by file (or stdin)."""

WireProtocol = Literal["openai-chat", "openai-responses", "anthropic-messages"]
"""The gateway API a harness calls: chat completions, Responses, or Anthropic Messages."""


class TaskInput(enum.StrEnum):
    """Where a harness reads its task text."""

    ARGV = "argv"
    FILE = "file"
    STDIN = "stdin"


@dataclass(frozen=True)
class Install:
    """Where a harness comes from: a package of ``registry`` at a pinned ``version``.

    ``executable`` is the command the package installs; ``extra`` more packages of the
    same registry installed with it (pinned too); ``python`` the interpreter a PyPI
    harness's private virtual environment is made with (its minimum version)."""

    registry: Literal["npm", "pypi"]
    package: str
    version: str
    executable: str
    extra: tuple[str, ...] = ()
    python: str | None = None

    @property
    def specs(self) -> list[str]:
        """What the registry's client is asked to install."""
        pin = "@" if self.registry == "npm" else "=="
        return [f"{self.package}{pin}{self.version}", *self.extra]


@dataclass(frozen=True)
class RunContext:
    """One rollout's run, as the program sees it (inside the sandbox when there is one).

    ``openai_base_url`` ends in ``/v1`` (``…/rollout/{id}/attempt/{id}/v1``);
    ``attempt_url`` is the same without ``/v1`` (what Anthropic clients append
    ``/v1/messages`` to); ``api_key`` the token scoped to this attempt."""

    openai_base_url: str
    api_key: str
    home: str
    workdir: str
    task_text: str
    model: str
    executable: str

    @property
    def attempt_url(self) -> str:
        return self.openai_base_url.removesuffix("/v1")

    @property
    def task_fits_argv(self) -> bool:
        """Whether the task text can be one command-line argument on this OS."""
        return len(os.fsencode(self.task_text)) <= MAX_ARG_BYTES and "\0" not in self.task_text

    def in_home(self, relative: str) -> str:
        """The program's path of a file written into its ``HOME``."""
        return f"{self.home.rstrip('/')}/{relative}"


@dataclass(frozen=True)
class Launch:
    """What one run of a harness is: ``argv``, environment on top of the harness's,
    ``files`` written into the program's ``HOME`` before it starts (relative paths), and
    ``stdin``."""

    argv: list[str]
    env: Mapping[str, str] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)
    stdin: bytes | None = None


class HarnessProfile(Protocol):
    """A real harness, pointed at the gateway by its own settings (see the module
    docstring). ``tested_version`` is the version its profile was verified with (the
    one :attr:`install` pins)."""

    name: ClassVar[str]
    tested_version: ClassVar[str]
    install: ClassVar[Install]
    protocol: ClassVar[WireProtocol]
    task_input: ClassVar[TaskInput]
    """Where the task text goes while it fits a command line (longer ones go by file)."""
    memory_mb: ClassVar[int]
    """The data limit (``Limits.memory_mb``) it needs in the sandbox: runtimes that
    reserve large heaps up front (bun, V8) count the reservation."""

    def launch(self, run: RunContext) -> Launch:
        """The command line, environment, ``HOME`` files and stdin of one run."""
        ...

    def mounts(self, executable: Path) -> list[Path]:
        """Host paths the sandbox must show read-only for ``executable`` to run (its
        install, its runtime: node, bun, a Python)."""
        ...
