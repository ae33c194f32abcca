"""LLM judges as rewards.

* :class:`GroupJudge` — RULER: one call scores a GRPO group's trajectories against each other;
* :class:`RubricJudge` — one call per rollout, against a rubric;
* clients: :class:`OpenAIJudgeClient` (any OpenAI-compatible endpoint),
  :class:`AnthropicJudgeClient`, :class:`EngineJudgeClient` (the run's own engine),
  :class:`ScriptedJudgeClient` (deterministic, for tests);
* :class:`Trajectory` — what a judge is shown, from a rollout's spans or an agent's messages.

Judge calls are recorded as ``agentbolt.judge`` spans and never trained on; a judge that
cannot score raises a :class:`JudgeError` and makes no reward. See docs/tasks-and-rewards.md.
"""

from agentbolt.rewards.judge.anthropic import AnthropicJudgeClient
from agentbolt.rewards.judge.client import JudgeCall, JudgeClient, JudgeReply, Message
from agentbolt.rewards.judge.engine import EngineJudgeClient
from agentbolt.rewards.judge.errors import JudgeCallError, JudgeError, MalformedJudgeAnswerError
from agentbolt.rewards.judge.openai import OpenAIJudgeClient
from agentbolt.rewards.judge.prompt import DEFAULT_GROUP_RUBRIC, DEFAULT_RUBRIC
from agentbolt.rewards.judge.record import Verdict
from agentbolt.rewards.judge.rubric import RubricJudge
from agentbolt.rewards.judge.ruler import GroupJudge
from agentbolt.rewards.judge.scripted import ScriptedJudgeClient
from agentbolt.rewards.judge.trajectory import ToolCall, Trajectory
from agentbolt.rewards.judge.verdict import Score

__all__ = [
    "GroupJudge",
    "RubricJudge",
    "Verdict",
    "Score",
    "Trajectory",
    "ToolCall",
    "JudgeClient",
    "JudgeReply",
    "JudgeCall",
    "Message",
    "OpenAIJudgeClient",
    "AnthropicJudgeClient",
    "EngineJudgeClient",
    "ScriptedJudgeClient",
    "JudgeError",
    "JudgeCallError",
    "MalformedJudgeAnswerError",
    "DEFAULT_GROUP_RUBRIC",
    "DEFAULT_RUBRIC",
]
