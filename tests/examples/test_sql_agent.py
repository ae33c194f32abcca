"""The SQL agent: its LangGraph loop (write, run, read the error, rewrite, accept) with each
query a ``run_sql`` operation span, the function-tools protocol, and ``train.py --smoke``
— every rung of the ladder (untrained, APO, SFT from the teacher, GRPO) end to end."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, Request

pytest.importorskip("langgraph")

import agentbolt
from tests.examples.sql_modules import EXAMPLE, load_sql_example

sql = load_sql_example()
solve, sql_agent = sql.agent.solve, sql.agent.sql_agent
build, load_split = sql.data.build, sql.data.load_split

Reply = Callable[[list[dict[str, Any]]], dict[str, Any]]


@contextmanager
def scripted_model(reply: Reply) -> Iterator[str]:
    """An OpenAI-compatible chat server on 127.0.0.1 whose message is ``reply(messages)``."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> dict[str, Any]:
        body = await request.json()
        message = {"role": "assistant", **reply(body["messages"])}
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        return {"id": "chatcmpl-1", "object": "chat.completion", "created": int(time.time()), "model": "scripted",
                "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    data_dir = build(tmp_path_factory.mktemp("sql-data"))
    return next(t for t in load_split("heldout_questions", data_dir=data_dir) if t["level"] == "join")


def test_the_agent_reads_an_error_rewrites_checks_and_every_query_is_a_span(task: dict[str, Any]) -> None:
    def reply(messages: list[dict[str, Any]]) -> dict[str, Any]:
        last = messages[-1]["content"]
        if len(messages) == 1:
            return {"content": "```sql\nSELECT title FROM bookz\n```"}
        if last.startswith("Error:"):
            return {"content": task["gold"] + ";"}
        return {"content": "DONE"}

    store = agentbolt.MemoryStore()
    with scripted_model(reply) as url:
        llm = agentbolt.LLM(endpoint=url, model="scripted")
        trainer = agentbolt.Trainer(algorithm=agentbolt.algorithms.Evaluate("val", show=False, progress=False),
                                    store=store, resources={"llm": llm})
        result = trainer.fit(sql_agent, None, [task])
    assert result.rows[0].reward == 1.0

    async def spans() -> list[Any]:
        page = await store.query_spans(result.rows[0].rollout_id)
        return list(page.items)

    import asyncio

    found = [s for s in asyncio.run(spans()) if s.attributes.get("agentbolt.operation.name") == "run_sql"]
    assert [json.loads(s.attributes["agentbolt.operation.input"]) for s in found] == [
        "SELECT title FROM bookz", task["gold"]]
    first, second = (json.loads(s.attributes["agentbolt.operation.output"]) for s in found)
    assert first == "Error: no such table: bookz" and found[0].attributes["sql.ok"] is False
    assert second.startswith(("1 row", f"{found[1].attributes['sql.rows']} rows")) and found[1].attributes["sql.ok"]

    # the dashboard's trace rows: each query with what came back, readable without a click
    from agentbolt.server.dashboard.waterfall import waterfall

    trace = waterfall(asyncio.run(spans()), attempt_id=None, attempt_start=None, truncated=False)
    rows = [r for r in trace["spans"] if r["attributes_preview"].get("agentbolt.operation.name") == "run_sql"]
    assert rows[0]["summary"] == "SELECT title FROM bookz → Error: no such table: bookz"
    assert f"{task['gold']} → {second}".startswith(rows[1]["summary"].rstrip("…"))  # long ones are clipped


async def test_with_function_tools_the_model_calls_run_sql_and_reads_a_tool_message(task: dict[str, Any]) -> None:
    seen: list[list[dict[str, Any]]] = []

    def reply(messages: list[dict[str, Any]]) -> dict[str, Any]:
        seen.append(messages)
        if messages[-1]["role"] == "user":
            call = {"id": "call_1", "type": "function",
                    "function": {"name": "run_sql", "arguments": json.dumps({"query": task["gold"]})}}
            return {"content": None, "tool_calls": [call]}
        return {"content": "DONE"}

    with scripted_model(reply) as url:
        state = await solve(task, agentbolt.LLM(endpoint=url, model="scripted"), "Tables:\n{schema}\nQuestion: {question}",
                            {"protocol": "tools", "max_turns": 3})
    assert state["queries"] == [task["gold"]] and state["calls"] == 2 and state["done"]
    tool_message = seen[1][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_1"
    assert "run_sql" in seen[0][0]["content"]  # the prompt tells the model about the tool


@pytest.mark.parametrize("protocol", ["text", "tools"])
async def test_the_teacher_solves_training_questions_in_either_protocol(task: dict[str, Any], protocol: str) -> None:
    score, INITIAL_PROMPT, serve_teacher = sql.grader.score, sql.protocol.INITIAL_PROMPT, sql.teacher.serve_teacher

    with serve_teacher([task]) as url:
        state = await solve(task, agentbolt.LLM(endpoint=url, model="sql-teacher"), INITIAL_PROMPT,
                            {"protocol": protocol, "max_turns": 3})
    assert state["queries"] == [task["gold"]] and state["calls"] == 2
    assert state["messages"][-1] == {"role": "assistant", "content": "DONE"}
    assert (state["messages"][2]["role"] == "tool") is (protocol == "tools")
    assert score(task["db_path"], state["queries"][-1], task["gold"]) == 1.0


async def test_turns_are_bounded_and_a_reply_without_sql_is_nudged_once(task: dict[str, Any]) -> None:
    calls: list[int] = []

    def chatty(messages: list[dict[str, Any]]) -> dict[str, Any]:
        calls.append(len(messages))
        return {"content": "I think the answer is in the books table."}

    def stubborn(messages: list[dict[str, Any]]) -> dict[str, Any]:
        return {"content": f"SELECT {len(messages)}"}  # a new query every time, never DONE

    with scripted_model(chatty) as url:
        state = await solve(task, agentbolt.LLM(endpoint=url, model="s"), "{schema} {question}",
                            {"protocol": "text", "max_turns": 3})
    assert state["queries"] == [] and calls == [1, 3]  # asked, nudged, then given up
    with scripted_model(stubborn) as url:
        state = await solve(task, agentbolt.LLM(endpoint=url, model="s"), "{schema} {question}",
                            {"protocol": "text", "max_turns": 3})
    assert state["calls"] == 3 and len(state["queries"]) == 3


pytest.importorskip("torch")
pytest.importorskip("peft")


@pytest.mark.slow
def test_smoke_runs_every_rung_of_the_ladder(tmp_path: Path) -> None:
    run = tmp_path / "run"
    out = subprocess.run([sys.executable, str(EXAMPLE / "train.py"), "--smoke", "--tiny", "--quiet",
                          "--run-dir", str(run)], check=False, capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "teacher: 6 training questions recorded, success 100%" in out.stdout
    ladder = json.loads((run / "ladder.json").read_text())
    assert [st["name"] for st in ladder] == ["untrained", "APO", "SFT", "SFT+GRPO"]
    for st in ladder:
        assert st["scored"] == {"heldout_questions": 2, "heldout_schemas": 2}, st
        assert st["wall_s"] > 0
    assert ladder[2]["details"]["records"] == [12]  # 6 teacher rollouts x 2 calls
    assert [s["step"] for s in ladder[3]["details"]["steps"]] == [1]
    assert ladder[3]["details"]["steps"][0]["time/step_s"] is not None
    for st in ladder:  # successes per split and level, 2 questions per split
        assert sum(int(v.split("/")[1]) for v in st["details"]["levels"].values()) == 4, st
    assert "| SFT+GRPO |" in (run / "ladder.md").read_text()
    assert (run / "apo_best_prompt.txt").read_text().count("{schema}") == 1
    records = [json.loads(line) for line in (run / "sft" / "records" / "iteration-1.jsonl").read_text().splitlines()]
    assert sorted(r["messages"][-1]["content"] == "DONE" for r in records) == [False] * 6 + [True] * 6
