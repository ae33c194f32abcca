"""Run agents on rollouts: the agent forms (:func:`rollout`, :class:`LitAgent`, plain
functions), hooks, and the :class:`Runner` that claims, runs, heartbeats and reports."""

from agentbolt.runner.agent import (
    AgentParameterError,
    LitAgent,
    RolloutFunction,
    RunnableAgent,
    as_agent,
    rollout,
)
from agentbolt.runner.calls import AttemptStopped
from agentbolt.runner.errors import RetryableError
from agentbolt.runner.gateway_llm import (
    GATEWAY_ENDPOINT,
    GatewayUnavailableError,
    gateway_llm,
)
from agentbolt.runner.hooks import Hooks
from agentbolt.runner.job import RunnerStats
from agentbolt.runner.loading import AgentLoadError, load_object
from agentbolt.runner.runner import Runner

__all__ = [
    "GATEWAY_ENDPOINT",
    "AgentLoadError",
    "AgentParameterError",
    "AttemptStopped",
    "GatewayUnavailableError",
    "Hooks",
    "LitAgent",
    "RetryableError",
    "RolloutFunction",
    "RunnableAgent",
    "Runner",
    "RunnerStats",
    "as_agent",
    "gateway_llm",
    "load_object",
    "rollout",
]
