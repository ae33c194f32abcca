"""The answers of the dashboard's read API, as models: the OpenAPI schema at ``/docs``.

The routes build their answers as plain dicts (:mod:`agentbolt.server.dashboard.views`)
and send them without re-validating — these models document them, and the tests check
every answer against them, so the two cannot drift apart.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentbolt.types import Attempt, Rollout

__all__ = [
    "RolloutRow",
    "RolloutTable",
    "AttemptView",
    "RolloutDetail",
    "WaterfallSpan",
    "RewardMark",
    "Waterfall",
    "ToolCallView",
    "MessageView",
    "LogprobsSummary",
    "CallView",
    "CallList",
    "LineageCall",
    "LineageSample",
    "LineageCounts",
    "Lineage",
    "RunView",
    "RunList",
    "MetricSeries",
    "RowStep",
    "RowSteps",
    "ResourceVersion",
    "ResourceVersionPage",
    "TextDiff",
    "ResourceDiff",
    "WorkerView",
    "WorkerList",
    "DashboardSummary",
]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RolloutRow(_Out):
    rollout_id: str
    status: str
    mode: str
    reward: float | None
    created_at: float
    start_time: float | None
    end_time: float | None
    duration: float | None = Field(description="end_time - start_time; null until the rollout has finished.")
    attempt_count: int
    resources_version: int | None = Field(description="Pinned at enqueue, else the one the latest attempt ran with.")
    worker_id: str | None = Field(description="Worker of the latest attempt.")
    input_preview: str = Field(description="The input as one line of compact JSON (or text), at most 120 characters.")


class RolloutTable(_Out):
    items: list[RolloutRow]
    next_cursor: str | None
    total: int = Field(description="Rollouts matching the filters, all pages (at most 10,000 with a search).")
    total_capped: bool = Field(description="True when a search matched more than 10,000 and counting stopped.")


class AttemptView(Attempt):
    duration: float | None = Field(description="end_time - start_time; null while the attempt runs.")


class RolloutDetail(_Out):
    rollout: Rollout
    attempts: list[AttemptView]
    resources_version: int | None


class WaterfallSpan(_Out):
    span_id: str
    parent_id: str | None
    name: str
    kind: Literal["llm", "reward", "tool", "agent", "other"]
    start: float
    end: float | None
    duration: float | None
    status: str
    depth: int = Field(description="0 for a root; a child is one deeper than its parent.")
    placed: Literal["by_time"] | None = Field(
        None,
        description="by_time: the span recorded no parent in this attempt (a model call the gateway recorded) "
        "and is shown under the innermost span enclosing it in time.",
    )
    summary: str = Field(description="One line, at most 160 characters: model and tokens, reward, tool name...")
    attributes_preview: dict[str, Any] = Field(description="Up to 12 attributes, long values clipped.")


class RewardMark(_Out):
    time: float
    value: float
    name: str
    primary: bool
    span_id: str


class Waterfall(_Out):
    attempt_id: str | None = Field(description="The attempt shown; null when the rollout was never claimed.")
    t0: float | None = Field(description="Earliest time of the attempt: subtract it for a time axis.")
    spans: list[WaterfallSpan] = Field(description="Parents before children, siblings by start time.")
    rewards: list[RewardMark]
    truncated: bool = Field(description="The attempt has more than 2,000 spans; only the first are shown.")


class ToolCallView(_Out):
    name: str | None
    arguments: str


class MessageView(_Out):
    role: str
    content: str | None = Field(description="The message text, at most 4,000 characters.")
    tool_calls: list[ToolCallView] | None = None


class LogprobsSummary(_Out):
    mean: float
    min: float
    n: int


class CallView(_Out):
    span_id: str
    agent_name: str | None
    model: str | None
    operation: str
    start: float
    end: float | None
    duration: float | None
    prompt_messages: list[MessageView] | None = Field(description="A chat request's messages.")
    prompt_text: str | None = Field(description="A text completion's prompt.")
    response_text: str | None = Field(description="At most 8,000 characters.")
    response_tool_calls: list[ToolCallView]
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    has_token_ids: bool
    logprobs: LogprobsSummary | None
    policy_version: int | None = Field(description="Version of the weights that answered (gateway calls).")
    failed: bool
    error: str | None


class CallList(_Out):
    attempt_id: str | None
    calls: list[CallView]
    truncated: bool


class LineageCall(_Out):
    span_id: str
    agent_name: str | None = Field(description="The harness's name, else subagent-<hash> off the first conversation.")
    start: int = Field(description="Index of the call's first response token in the sample.")
    length: int
    trained: bool = Field(description="Whether agent_match trains this call.")
    finish_reason: str | None


class LineageSample(_Out):
    index: int
    conversation: int = Field(description="0: the attempt's first; others are its branches (sub-agents, title calls).")
    cause: Literal["first", "new_conversation", "diverged"]
    diverged_at: int | None = Field(description="diverged: first token index that differs from the parent.")
    diverged_from: str | None = Field(description="diverged: span id of the parent sample's first call.")
    parent: int | None = Field(description="diverged: index of the sample it shares its prefix with.")
    agents: list[str]
    tokens: int
    tokens_trained: int
    tokens_context: int
    calls: list[LineageCall]


class LineageCounts(_Out):
    calls: int
    conversations: int
    samples: int
    breaks: dict[str, int]
    tokens_trained: int
    tokens_context: int
    tokens_shared: int = Field(description="Leading tokens shared with an earlier sample: computed once.")


class Lineage(_Out):
    attempt_id: str | None
    agent_match: str | None
    samples: list[LineageSample]
    counts: LineageCounts | None
    skipped_calls: int
    error: str | None = Field(description="Why the calls could not be merged (no token ids).")


class RunView(_Out):
    run_id: str
    first_step: int | None
    last_step: int | None
    n_records: int
    last_time: float | None
    keys: list[str]


class RunList(_Out):
    runs: list[RunView]


class MetricSeries(_Out):
    run_id: str
    series: dict[str, list[tuple[int, float | None]]] = Field(description="[step, value] pairs by step.")
    last_step: int | None = Field(description="Pass back as after_step to get only newer points.")
    more: bool


class RowStep(_Out):
    step: int
    rows_in: int
    rows_trained: int | None
    dropped: dict[str, int] = Field(description="Dropped rollouts by reason (non-zero only).")
    why_nothing_trained: str | None = Field(description="One line, when the step trained no row.")


class RowSteps(_Out):
    run_id: str
    steps: list[RowStep]


class ResourceVersion(_Out):
    version: int
    created_at: float
    names: list[str]
    kinds: dict[str, str]
    metadata: dict[str, Any]
    prompt_templates: dict[str, str]


class ResourceVersionPage(_Out):
    items: list[ResourceVersion]
    next_cursor: str | None


class TextDiff(_Out):
    before: str | None
    after: str | None
    changed: bool
    unified: str


class ResourceDiff(_Out):
    version: int
    against: int | None
    diffs: dict[str, TextDiff]


class WorkerView(_Out):
    worker_id: str
    status: str
    last_heartbeat_time: float
    heartbeat_age: float
    alive: bool = Field(description="Not offline, and heard from in the last 60 s.")
    current_rollout_id: str | None
    current_attempt_id: str | None
    kind: str = Field(description="The worker's metadata.kind (runner, controller...), else unknown.")
    created_at: float
    metadata: dict[str, Any]


class WorkerList(_Out):
    now: float
    workers: list[WorkerView]


class DashboardSummary(_Out):
    health: Literal["ok", "degraded"]
    problems: list[str]
    store: str
    rollouts_by_status: dict[str, int]
    total_rollouts: int
    queue_depth: int
    workers_alive: int
    workers_total: int
    latest_resources_version: int | None
    server_time: float
    version: str
