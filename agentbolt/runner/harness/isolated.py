"""Executors that are the program's sandbox themselves: a container, a pod.

:class:`~agentbolt.runner.harness.Harness` wraps a plain :class:`Executor` in its
bubblewrap :class:`~agentbolt.runner.harness.sandbox.Sandbox`; an :class:`IsolatedExecutor`
it does not wrap. It hands one a :class:`~agentbolt.runner.harness.local.ProcessSpec` with
everything the program needs and nothing of this machine:

* in: argv, the environment (with :meth:`IsolatedExecutor.program_server_url` as the
  server's URL), stdin, the ``workspace`` (a fresh copy, hidden paths left out),
  ``gateway`` (the only routes the program may reach);
* out: stdout and the exit code, ``outputs`` (the reward file at
  :attr:`IsolatedExecutor.program_reward_file`), the workspace after the run
  (``ProcessResult.workspace``, for an evaluator run here), sandbox ``events``;
* optionally the ``evaluator``, run where the program ran after it ended (executors with
  ``evaluates_inside``), with ``evaluator_files`` (the tests) copied in only then.

Rewards a program posts go over HTTP to the attempt's reward route like any other.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from agentbolt.runner.harness.local import ProcessResult, ProcessSpec

__all__ = ["IsolatedExecutor"]


class IsolatedExecutor(ABC):
    """Runs each program in its own isolated world (see the module docstring)."""

    evaluates_inside: ClassVar[bool] = False
    """Whether :meth:`run` runs ``spec.evaluator`` in the program's environment."""
    program_workspace: ClassVar[str] = "/workspace"
    """The workspace's path as the program sees it (its working directory)."""
    program_reward_file: ClassVar[str] = "/run/agentbolt/out/reward"
    """Where the program may write its reward (``$AGENTBOLT_REWARD_FILE``); the harness
    lists it in ``spec.outputs``."""
    program_tests: ClassVar[str] = "/tests"
    """Where an evaluator run inside finds the tests."""

    @abstractmethod
    def program_server_url(self, server_url: str) -> str:
        """The server's URL as the program must write it (``server_url`` as this machine
        reaches it)."""

    @abstractmethod
    async def run(self, spec: ProcessSpec) -> ProcessResult:
        """Run the program (and ``spec.evaluator`` if :attr:`evaluates_inside`); leave
        nothing behind, also when cancelled."""

    async def prepare(self, task: Any) -> None:  # noqa: B027 - optional hook, nothing to do by default
        """Before the first run for ``task``: raise :class:`HarnessConfigError` with the fix
        when it cannot run here (a missing image, say)."""
