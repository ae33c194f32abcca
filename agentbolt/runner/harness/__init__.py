"""The harness controller: train unmodified programs (a CLI agent, a script in any
language) by running one per rollout with a rollout-scoped model endpoint.

``Harness`` is an agent the runner and ``Trainer.fit`` accept like any other; programs
run as local subprocesses (:class:`LocalExecutor`), each in its own :class:`Sandbox`
(bubblewrap) unless told otherwise, and another :class:`Executor` (a Kubernetes Job)
can take its place.
"""

from agentbolt.runner.harness.credentials import (
    Credentials,
    attempt_credentials,
    rollout_base_url,
)
from agentbolt.runner.harness.errors import (
    EvaluatorError,
    GatewayRefusedError,
    HarnessConfigError,
    HarnessError,
    HarnessKilledError,
    HarnessStartError,
    HarnessTimeoutError,
    ProgramFailedError,
)
from agentbolt.runner.harness.harness import Harness, render_command
from agentbolt.runner.harness.local import (
    Executor,
    LocalExecutor,
    ProcessResult,
    ProcessSpec,
    ProgramStartError,
)
from agentbolt.runner.harness.reward import Reward, RewardFormatError, parse_reward
from agentbolt.runner.harness.sandbox import Limits, Sandbox, SandboxUnavailableError

__all__ = [
    "Credentials",
    "EvaluatorError",
    "Executor",
    "GatewayRefusedError",
    "Harness",
    "HarnessConfigError",
    "HarnessError",
    "HarnessKilledError",
    "HarnessStartError",
    "HarnessTimeoutError",
    "Limits",
    "LocalExecutor",
    "ProcessResult",
    "ProcessSpec",
    "ProgramFailedError",
    "ProgramStartError",
    "Reward",
    "RewardFormatError",
    "Sandbox",
    "SandboxUnavailableError",
    "attempt_credentials",
    "parse_reward",
    "render_command",
    "rollout_base_url",
]
