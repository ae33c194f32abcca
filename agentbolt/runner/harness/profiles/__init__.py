"""Harness profiles: real coding agents, unmodified, pointed at the rollout's gateway.

::

    harness = Harness.for_("mini-swe-agent", task="{problem_statement}", evaluator="pytest -q ...",
                           sandbox=Sandbox(task_workspace_field="repo"))

A profile (:class:`HarnessProfile`) knows one harness's settings — its environment
variables, the config file it reads from ``HOME`` (written per rollout into a fresh
home), its flags for a non-interactive run, what the sandbox must show it (its install,
node or a Python 3.12) and where it reads the task text. :data:`PROFILES` has one per
harness; :func:`get_profile` finds one by name. They come from their registries,
pinned, through :func:`~agentbolt.runner.harness.profiles.install.install`
(``scripts/install_harnesses``). See ``docs/harnesses.md``.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentbolt.runner.harness.errors import HarnessConfigError
from agentbolt.runner.harness.profiles.aider import Aider
from agentbolt.runner.harness.profiles.base import (
    MAX_ARG_BYTES,
    HarnessProfile,
    Install,
    Launch,
    RunContext,
    TaskInput,
    WireProtocol,
)
from agentbolt.runner.harness.profiles.claude_code import ClaudeCode
from agentbolt.runner.harness.profiles.codex import Codex
from agentbolt.runner.harness.profiles.install import (
    HarnessInstallError,
    HarnessNotInstalledError,
    default_cache,
    install,
    installed_executable,
)
from agentbolt.runner.harness.profiles.mini_swe_agent import MiniSweAgent
from agentbolt.runner.harness.profiles.opencode import OpenCode
from agentbolt.runner.harness.profiles.openhands import OpenHands

__all__ = [
    "MAX_ARG_BYTES",
    "PROFILES",
    "Aider",
    "ClaudeCode",
    "Codex",
    "HarnessInstallError",
    "HarnessNotInstalledError",
    "HarnessProfile",
    "Install",
    "Launch",
    "MiniSweAgent",
    "OpenCode",
    "OpenHands",
    "ProfileRun",
    "RunContext",
    "TaskInput",
    "WireProtocol",
    "default_cache",
    "get_profile",
    "install",
    "installed_executable",
]

PROFILES: dict[str, type[HarnessProfile]] = {
    p.name: p for p in (ClaudeCode, Codex, MiniSweAgent, OpenCode, Aider, OpenHands)
}
"""Every profile by name, each with its default settings."""


def get_profile(name: str) -> HarnessProfile:
    """The profile called ``name`` with its default settings (construct the class for others)."""
    try:
        return PROFILES[name]()
    except KeyError:
        raise HarnessConfigError(
            f"no harness profile {name!r}: the profiles are {', '.join(sorted(PROFILES))}; for another program "
            "give Harness its command line"
        ) from None


@dataclass(frozen=True)
class ProfileRun:
    """What a :class:`~agentbolt.runner.harness.Harness` made by ``Harness.for_`` runs:
    ``profile`` with ``executable``, the task text rendered from ``task`` (a template of
    the task's fields, like a command's arguments), asking for ``model``."""

    profile: HarnessProfile
    executable: str
    task: str
    model: str
