"""The per-rollout sandbox of harnessed programs (bubblewrap + namespaces).

A program run by :class:`~agentbolt.runner.harness.Harness` sees a fresh copy of its task's
workspace (writable, without ``.git`` and the paths marked hidden), the system
directories read-only, and nothing else of the host; it reaches the gateway for its own
attempt and no other address or port; wall time, CPU time, memory, processes and output
are limited, and its whole process tree ends with it. What it tried and was refused is
recorded as sandbox events. See ``docs/harness.md``.
"""

from agentbolt.runner.harness.sandbox.bwrap import SandboxUnavailableError, check_bwrap
from agentbolt.runner.harness.sandbox.config import HIDDEN_MARKER, Limits, Sandbox
from agentbolt.runner.harness.sandbox.events import SandboxEvent
from agentbolt.runner.harness.sandbox.session import SandboxSession

__all__ = [
    "HIDDEN_MARKER",
    "Limits",
    "Sandbox",
    "SandboxEvent",
    "SandboxSession",
    "SandboxUnavailableError",
    "check_bwrap",
]
