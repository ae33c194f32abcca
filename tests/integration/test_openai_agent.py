"""Acceptance: a plain `openai` (sync) agent, 32 rollouts at once in one process —
in-process on a MemoryStore, and over HTTP on a server with a SqliteStore."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import openai
from fakes.openai_server import FakeOpenAI

from agentbolt.adapters import MessagesAdapter, TripletAdapter, require_token_ids
from agentbolt.runner import rollout
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.http import HttpStore
from agentbolt.store.memory import MemoryStore
from agentbolt.store.sqlite import SqliteStore
from agentbolt.tracing import emit_reward
from agentbolt.types import LLM

from .checks import (
    N_ROLLOUTS,
    check_attribution,
    check_tokens,
    run_rollouts,
    server_requests,
    task_ids,
)


def make_agent(barrier: threading.Barrier) -> Any:
    """Two chat calls per task; an intermediate reward after the first; the final
    reward returned. All 32 agents wait for each other between their two calls, so
    every one of them has spans open while the others record theirs."""

    @rollout
    def two_turn_chat(task: dict[str, Any], llm: LLM) -> float:
        tag = f"[{task['id']}]"
        with openai.OpenAI(base_url=llm.endpoint, api_key=llm.api_key, max_retries=0) as client:
            history: list[dict[str, Any]] = [{"role": "user", "content": f"{tag} first question"}]
            first = client.chat.completions.create(model=llm.model, messages=history, logprobs=True, temperature=0.5)
            emit_reward(task["n"] / 100)
            barrier.wait()
            history += [
                {"role": "assistant", "content": first.choices[0].message.content},
                {"role": "user", "content": f"{tag} second question"},
            ]
            second = client.chat.completions.create(model=llm.model, messages=history, logprobs=True)
        return 1.0 if second.choices[0].message.content == f"echo: {tag} second question" else 0.0

    return two_turn_chat


async def run_and_check(store: Any, fake_openai: FakeOpenAI, prefix: str) -> None:
    inputs = [{"id": tid, "n": n} for n, tid in enumerate(task_ids(prefix))]
    rollouts = await run_rollouts(make_agent(threading.Barrier(N_ROLLOUTS, timeout=30)), store, fake_openai, inputs)
    recorded = await check_attribution(store, rollouts, calls_per_rollout=2)
    assert len(server_requests(fake_openai, prefix)) == 2 * N_ROLLOUTS  # one span per request, none lost

    for rec in recorded:
        n = rec.rollout.input["n"]
        assert rec.rollout.reward == 1.0
        first, second = rec.calls
        assert first.messages == [{"role": "user", "content": f"[{rec.task_id}] first question"}]
        assert first.response_text == f"echo: [{rec.task_id}] first question"
        assert first.attributes["gen_ai.request.temperature"] == 0.5
        for call in rec.calls:
            check_tokens(fake_openai, call)

        preceding = require_token_ids(TripletAdapter(reward_rule="preceding").adapt(rec.spans))
        assert [(t.span_id, t.reward) for t in preceding] == [(first.span_id, n / 100), (second.span_id, 1.0)]
        final = TripletAdapter(reward_rule="final").adapt(rec.spans)
        assert [t.reward for t in final] == [1.0, 1.0]
        for t, call in zip(final, rec.calls, strict=True):
            assert t.prompt.token_ids == call.prompt_token_ids and t.response.token_ids == call.response_token_ids
            assert t.logprobs == call.response_logprobs and t.rollout_id == rec.rollout.rollout_id

        (_, last) = MessagesAdapter().adapt(rec.spans)
        assert last["messages"][-1] == {"role": "assistant", "content": f"echo: [{rec.task_id}] second question"}


async def test_openai_agent_in_process(store: MemoryStore, fake_openai: FakeOpenAI) -> None:
    await run_and_check(store, fake_openai, "oa")


async def test_openai_agent_over_http_with_sqlite(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    with serve_in_thread(SqliteStore(str(tmp_path / "store.db")), admin_token="admin-token") as url:
        store = HttpStore(url, token="admin-token")
        await store.start()
        try:
            await run_and_check(store, fake_openai, "ht")
        finally:
            await store.close()
