"""An MCP server's tools for an agent, through the official ``mcp`` package: stdio (a
server started per connection, so per rollout) and streamable HTTP; inside a rollout each
call is an ``execute_tool`` span that the dashboard's waterfall shows as a tool span and a
judge's trajectory reads back."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

pytest.importorskip("mcp")

import agentbolt
from agentbolt import semconv
from agentbolt.mcp import MCPToolError, StdioServer, UnknownToolError, connect, serve_http
from agentbolt.rewards.judge import Trajectory
from agentbolt.server.dashboard.waterfall import span_kind, waterfall
from agentbolt.store.memory import MemoryStore

KV = Path(__file__).with_name("kv_server.py")
STDIO = StdioServer(sys.executable, [str(KV)])


async def test_stdio_server_lists_its_tools_and_answers_calls() -> None:
    async with connect(STDIO) as tools:
        assert tools.server_name == "kv" and tools.names() == ["put", "get"]
        (put, _get) = tools.openai_tools()
        assert put["function"]["parameters"]["required"] == ["key", "value"]
        assert (await tools.call("put", {"key": "a", "value": "1"})).text == "ok"
        assert (await tools.call("get", {"key": "a"})).text == "1"
        missing = await tools.call("get", {"key": "b"})  # the tool's own failure: a result, not an exception
        assert missing.is_error and "no key 'b'" in missing.text
        with pytest.raises(UnknownToolError, match="has no tool 'delete'; it has put, get"):
            await tools.call("delete", {"key": "a"})


async def test_each_connection_starts_its_own_stdio_server() -> None:
    async with connect(STDIO) as first:
        await first.call("put", {"key": "a", "value": "1"})
    async with connect(STDIO) as second:
        assert (await second.call("get", {"key": "a"})).is_error  # a fresh process: a fresh store


async def test_streamable_http_server_started_for_a_block() -> None:
    async with serve_http([sys.executable, str(KV), "--http", "--port", "{port}"]) as server:
        assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/mcp")
        async with connect(server) as tools:
            assert tools.spec.transport == "streamable-http"
            await tools.call("put", {"key": "k", "value": "v"})
            assert (await tools.call("get", {"key": "k"})).text == "v"


async def test_a_server_that_does_not_start_says_so() -> None:
    with pytest.raises(MCPToolError, match="could not connect to the MCP server"):
        async with connect(StdioServer(sys.executable, ["-c", "import sys; sys.exit(3)"]), timeout=10):
            pass
    with pytest.raises(MCPToolError, match="exited with code 3 before listening"):
        async with serve_http([sys.executable, "-c", "import sys; sys.exit(3)"]):
            pass


async def test_inside_a_rollout_tool_calls_are_execute_tool_spans_in_the_waterfall_and_the_trajectory() -> None:
    @agentbolt.rollout
    async def agent(task: dict[str, Any]) -> float:
        async with connect(STDIO) as tools:
            await tools.call("put", {"key": "x", "value": task["value"]})
            message = await tools.call_openai({"id": "call_1", "type": "function",
                                               "function": {"name": "get", "arguments": '{"key": "x"}'}})
            assert message == {"role": "tool", "tool_call_id": "call_1", "content": task["value"]}
            await tools.call("get", {"key": "nope"})
        return 1.0

    store = MemoryStore()
    rollout = await store.enqueue_rollout({"value": "42"})
    await agentbolt.Runner(agent, store=store).run(stop_when_idle=True)

    spans = await store.get_spans(rollout.rollout_id, "latest")
    calls = sorted((s for s in spans if s.name.startswith("execute_tool ")), key=lambda s: s.start_time)
    assert [s.name for s in calls] == ["execute_tool put", "execute_tool get", "execute_tool get"]
    assert [span_kind(s) for s in calls] == ["tool"] * 3
    put, got, failed = calls
    assert orjson.loads(put.attributes[semconv.GEN_AI_TOOL_CALL_ARGUMENTS]) == {"key": "x", "value": "42"}
    assert orjson.loads(got.attributes[semconv.GEN_AI_TOOL_CALL_RESULT])["text"] == "42"
    assert got.attributes[semconv.GEN_AI_TOOL_CALL_ID] == "call_1"
    assert got.attributes[semconv.MCP_SERVER] == "kv" and got.attributes[semconv.MCP_TRANSPORT] == "stdio"
    assert failed.status == "error" and failed.attributes[semconv.MCP_IS_ERROR] is True
    root = next(s for s in spans if s.name == semconv.ROLLOUT_SPAN)
    assert {s.parent_id for s in calls} == {root.span_id}
    # the dashboard's waterfall: three tool rows under the rollout, named by their tool, the failed one saying so
    rows = [r for r in waterfall(spans, attempt_id=root.attempt_id, attempt_start=None, truncated=False)["spans"]
            if r["kind"] == "tool"]
    assert [(r["summary"].split(" · ")[0], r["depth"]) for r in rows] == [("put", 1), ("get", 1), ("get", 1)]
    assert rows[2]["status"] == "error" and "error" in rows[2]["summary"]
    # a judge reads what the tool really returned
    tools = Trajectory.from_spans(rollout.rollout_id, spans).tool_calls
    assert [(t.name, t.arguments, t.error) for t in tools] == [
        ("put", {"key": "x", "value": "42"}, False), ("get", {"key": "x"}, False), ("get", {"key": "nope"}, True)]
    assert [t.result["text"] for t in tools[:2]] == ["ok", "42"] and "no key 'nope'" in tools[2].result["text"]
