"""Hooks with v0.3's signatures — keyword-only ``agent``, ``runner``, ``tracer``,
``rollout`` (and ``spans``) — are called, by agentbolt's Trainer and by LitAgentRunner."""

from __future__ import annotations

from typing import Any

import agentbolt as agl


@agl.rollout
def scorer(task: str) -> float:
    agl.emit_message(f"scoring {task}")
    return 0.5


class Recorder(agl.Hook):
    def __init__(self) -> None:
        self.seen: list[tuple[str, Any, Any, Any, Any]] = []

    async def on_rollout_start(self, *, agent: Any, runner: Any, rollout: agl.Rollout) -> None:
        self.seen.append(("rollout_start", agent, runner, None, rollout.input))

    async def on_trace_start(self, *, agent: Any, runner: Any, tracer: Any, rollout: agl.Rollout) -> None:
        self.seen.append(("trace_start", agent, runner, tracer, rollout.input))

    async def on_trace_end(self, *, agent: Any, runner: Any, tracer: Any, rollout: agl.Rollout) -> None:
        agl.emit_reward(1.0)  # still inside the trace: it becomes the final reward
        self.seen.append(("trace_end", agent, runner, tracer, rollout.input))

    async def on_rollout_end(self, *, agent: Any, runner: Any, rollout: agl.Rollout, spans: Any) -> None:
        self.seen.append(("rollout_end", agent, runner, [s.name for s in spans], rollout.status))


def test_trainer_calls_v03_hooks_with_their_keyword_arguments() -> None:
    hook = Recorder()
    result = agl.Trainer(n_workers=1, hooks=[hook]).fit(scorer, ["t1"])
    assert [s[0] for s in hook.seen] == ["rollout_start", "trace_start", "trace_end", "rollout_end"]
    assert all(s[1] is scorer and isinstance(s[2], agl.Runner) for s in hook.seen)
    assert hook.seen[1][4] == "t1"
    assert hook.seen[3][4] == "succeeded" and "agentbolt.message" in hook.seen[3][3]
    assert result.rows[0].reward == 1.0  # the hook's reward came last


async def test_lit_agent_runner_passes_itself_and_its_v03_tracer() -> None:
    hook = Recorder()
    tracer = agl.OtelTracer()
    runner = agl.LitAgentRunner[str](tracer)
    store = agl.InMemoryLightningStore()
    with runner.run_context(agent=scorer, store=store, hooks=[hook]):
        rollout = await runner.step("t2")
    assert [s[0] for s in hook.seen] == ["rollout_start", "trace_start", "trace_end", "rollout_end"]
    assert all(s[2] is runner and s[1] is scorer for s in hook.seen)
    assert hook.seen[1][3] is tracer and hook.seen[2][3] is tracer
    assert agl.find_final_reward(await store.query_spans(rollout.rollout_id)) == 1.0


async def test_get_last_trace_in_on_trace_end_holds_the_spans_so_far() -> None:
    names: list[list[str]] = []

    class Peek(agl.Hook):
        async def on_trace_end(self, *, agent: Any, runner: Any, tracer: Any, rollout: Any) -> None:
            names.append([span.name for span in tracer.get_last_trace()])

    runner = agl.LitAgentRunner[str](agl.AgentOpsTracer())
    with runner.run_context(agent=scorer, store=agl.InMemoryLightningStore(), hooks=[Peek()]):
        await runner.step("t3")
    assert "agentbolt.message" in names[0] and "agentbolt.reward" in names[0]


def test_trainer_hands_v03_hooks_the_v03_tracer_given_to_it() -> None:
    names: list[list[str]] = []
    tracers: list[Any] = []

    class Peek(agl.Hook):
        async def on_trace_end(self, *, agent: Any, runner: Any, tracer: Any, rollout: Any) -> None:
            tracers.append(tracer)
            names.append([span.name for span in tracer.get_last_trace()])

    tracer = agl.AgentOpsTracer()
    agl.Trainer(n_workers=1, hooks=[Peek()], tracer=tracer).fit(scorer, ["t4", "t5"])
    assert tracers == [tracer, tracer]
    assert all("agentbolt.message" in n for n in names)
