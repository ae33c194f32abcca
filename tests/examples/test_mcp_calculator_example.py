"""``examples/mcp_calculator/train.py --smoke``: an agent whose calculator is our own MCP
server, started per rollout over stdio, trained with GRPO on SmolLM2-135M — one tiny step,
held-out evaluations, export; every tool call is an ``execute_tool`` span of its rollout,
between the rollout's two model calls."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("mcp", reason="needs the MCP SDK (pip install 'agentbolt[mcp]')")

from agentbolt import semconv
from agentbolt.adapters.calls import extract_model_calls
from agentbolt.store.url import open_store

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mcp_calculator" / "train.py"


@pytest.mark.slow
def test_smoke_run_trains_an_agent_whose_tool_is_an_mcp_server(tmp_path: Path) -> None:
    run = tmp_path / "run"
    out = subprocess.run([sys.executable, str(EXAMPLE), "--smoke", "--run-dir", str(run)],
                         check=False, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "held-out success (greedy, 2 problems)" in out.stdout
    assert "calculator over stdio" in out.stdout
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "reward/mean" in r] == [1]
    assert (run / "model" / "config.json").is_file()

    async def tool_calls() -> list[tuple[float, float, float]]:
        """(first model call ends, tool call starts, second model call starts) of each
        training rollout that called the tool."""
        store = open_store(f"sqlite:///{run / 'store.db'}")
        async with store:
            found = []
            for rollout in (await store.query_rollouts(limit=100)).items:
                spans = await store.get_spans(rollout.rollout_id, "latest")
                tools = [s for s in spans if s.attributes.get(semconv.GEN_AI_OPERATION) == semconv.EXECUTE_TOOL]
                calls = extract_model_calls(spans)
                for tool in tools:
                    assert tool.name == "execute_tool evaluate"
                    assert tool.attributes[semconv.MCP_SERVER] == "calculator"
                    assert semconv.GEN_AI_TOOL_CALL_RESULT in tool.attributes
                    assert len(calls) == 2
                    found.append((calls[0].finished_at, tool.start_time, calls[1].start_time))
            return found

    found = asyncio.run(tool_calls())
    assert found, "no rollout called the MCP tool"
    assert all(first <= tool <= second for first, tool, second in found)
