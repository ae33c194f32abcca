"""Run agents on rollouts: the agent forms (:func:`rollout`, :class:`LitAgent`, plain
functions), hooks, and the :class:`Runner` that claims, runs, heartbeats and reports."""

from agentbolt.runner.agent import AgentAdapter, AgentParameterError, LitAgent, RolloutFunction, as_agent, rollout
from agentbolt.runner.calls import AttemptStopped
from agentbolt.runner.errors import RetryableError
from agentbolt.runner.hooks import Hooks
from agentbolt.runner.loading import AgentLoadError, load_object
from agentbolt.runner.runner import Runner, RunnerStats

__all__ = [
    "rollout",
    "RolloutFunction",
    "LitAgent",
    "as_agent",
    "AgentAdapter",
    "AgentParameterError",
    "Hooks",
    "Runner",
    "RunnerStats",
    "RetryableError",
    "AttemptStopped",
    "AgentLoadError",
    "load_object",
]
