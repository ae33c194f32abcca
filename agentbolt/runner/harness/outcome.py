"""How a program's run is recorded on its attempt, and how its reward is emitted."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from agentbolt import semconv
from agentbolt.runner.harness.local import ProcessResult
from agentbolt.runner.harness.reward import Reward, RewardFormatError, parse_reward
from agentbolt.runner.harness.sandbox import SandboxSession
from agentbolt.runner.harness.sandbox.events import SandboxEvent, emit_events
from agentbolt.tracing.context import AttemptContext
from agentbolt.tracing.emitters import emit_annotation, emit_reward

__all__ = ["emit_reward_of", "has_reward", "record_run", "stderr_hint", "written_reward"]

log = logging.getLogger("agentbolt.runner.harness")


async def record_run(
    ctx: AttemptContext,
    result: ProcessResult,
    events: list[SandboxEvent],
    box: SandboxSession | None,
    *,
    isolated_run: bool = False,
    startup_s: float | None = None,
    hidden: list[str] | None = None,
    task_hidden: Sequence[str] = (),
) -> None:
    """``box``: the bubblewrap sandbox it ran in; ``isolated_run``: an isolated executor ran
    it (``startup_s``, ``hidden``: what it reported and what the workspace copy left out);
    ``task_hidden``: the task fields the program did not see."""
    isolated = box is not None or isolated_run
    facts: dict[str, Any] = {
        "harness.exit_code": result.exit_code if result.exit_code is not None else -1,
        "harness.duration_s": round(result.duration, 3),
        "harness.timed_out": result.timed_out,
        "harness.stderr_tail": result.stderr_tail,
        "harness.sandboxed": isolated,
    }
    metadata: dict[str, Any] = {"harness": facts}
    if isolated:
        startup = box.startup_s if box is not None else startup_s or 0.0
        facts["harness.sandbox_startup_ms"] = round(startup * 1000, 1)
        report = result.extra.get("sandbox_report")
        if isinstance(report, dict):
            peak = max(int(report.get("peak_data_bytes", 0)), int(report.get("max_rss_bytes", 0)))
            facts["harness.peak_memory_mb"] = round(peak / (1 << 20), 1)
        if isinstance(signal := result.extra.get("signal"), int):
            facts["harness.signal"] = signal  # what ended it, counted as its own exit (128 + signal)
        left_out = box.left_out if box is not None else hidden or []
        metadata["sandbox"] = {"events": [e.as_dict() for e in events], "hidden": left_out}
        emit_events(events)
        for e in events:
            log.info("sandbox of attempt %s: %s (x%d): %s", ctx.attempt_id, e.kind, e.count, e.detail)
    emit_annotation(**facts)
    metadata["harness"] = {**facts, "harness.task_hidden": list(task_hidden)}
    try:
        await ctx.store.update_attempt(ctx.rollout_id, ctx.attempt_id, metadata=metadata)
    except Exception as exc:  # noqa: BLE001 - the span above has it too; metadata is a convenience
        log.debug("could not record harness metadata on attempt %s: %s", ctx.attempt_id, exc)


async def has_reward(ctx: AttemptContext) -> bool:
    await ctx.tracer.flush(ctx.attempt_id)
    spans = await ctx.store.get_spans(ctx.rollout_id, ctx.attempt_id)
    return any(s.name == semconv.REWARD_SPAN for s in spans)


def written_reward(result: ProcessResult, name: str) -> Reward | None:
    """The reward the program wrote to the output file ``name``, read back by its executor;
    ``None`` when it wrote none. A link, a FIFO or an oversized file left there (the
    executor did not read it: :attr:`ProcessResult.unread`) or bad content is a
    :class:`~agentbolt.runner.harness.reward.RewardFormatError`."""
    if name in result.unread:
        raise RewardFormatError(f"reward file: {result.unread[name]}")
    data = result.outputs.get(name)
    return None if data is None else parse_reward(data.decode("utf-8", "replace"), source=f"reward file {name}")


def emit_reward_of(reward: Reward) -> None:
    if list(reward.rewards) == ["reward"]:
        emit_reward(reward.value)
    else:
        emit_reward(reward.rewards, primary=reward.primary)


def stderr_hint(result: ProcessResult) -> str:
    tail = result.stderr_tail.strip()
    if not tail:
        return ""
    lines = tail.splitlines()[-10:]
    return "; stderr ends with:\n" + "\n".join(lines)
