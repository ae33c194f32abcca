"""benchmarks/lineage_merging.py: its old rule and its token counts on a hand-built
attempt, and its figures on the committed recordings against SampleAdapter's own."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from adapters.spans import Attempt

from agentbolt.adapters.calls import extract_model_calls
from agentbolt.adapters.samples import SampleAdapter

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "lineage_merging.py"
EPISODES = {"harness": {"mini-swe-agent", "aider", "openhands", "codex", "claude-code", "opencode"},
            "framework": {"smolagents", "llamaindex-react", "dspy-react"}}


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lineage_merging", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def _call(attempt: Attempt, span_id: str, prompt: list[int], answer: list[int], agent: str = "main") -> None:
    attempt.chat(span_id, [{"role": "user", "content": span_id}], "x", agent=agent, extra={
        "agentbolt.llm.prompt_token_ids": prompt, "agentbolt.llm.response_token_ids": answer,
        "agentbolt.llm.response_logprobs": [-0.5] * len(answer)})


def test_a_sub_agent_and_a_compaction_cost_the_old_rule_two_samples_and_their_prompts() -> None:
    m = list(range(1, 101))  # the main agent's prompt, 100 tokens
    s = [1, 2, 3, *range(301, 341)]  # the sub-agent's: the same 3-token header, then its own
    compacted = [*m[:80], *range(501, 511)]
    attempt = Attempt()
    _call(attempt, "main-1", m, [201, 202])
    _call(attempt, "sub-1", s, [203], agent="sub")
    _call(attempt, "main-2", [*m, 201, 202, *range(401, 406)], [204])  # extends main-1, not the latest call
    _call(attempt, "main-3", compacted, [205])
    row = _bench().measure("harness", "hand-built", attempt.spans)
    # before: main-2 does not extend sub-1, so it starts over (4 samples); after: it extends main-1
    assert (row.calls, row.samples_before, row.samples_after) == (4, 4, 3)
    assert (row.conversations, row.new_conversation, row.diverged) == (2, 1, 1)
    assert row.trained == 5
    assert row.prompt_tokens_before == (102 + 44 + 108 + 91) - 5
    assert row.prompt_tokens_after == (108 + 44 + 91) - 5 - 79  # main-3 shares m[:80], less the row's own token
    assert row.prompt_tokens_distinct == 102 + (44 - 3) + 6 + (91 - 80) - 5
    assert row.once_after == row.prompt_tokens_distinct / row.prompt_tokens_after < 1.0


def test_the_committed_episodes_agree_with_sample_adapter() -> None:
    out = subprocess.run([sys.executable, str(SCRIPT), "--json"], capture_output=True, text=True, timeout=300,
                         check=True)
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert {(r["kind"], r["name"]) for r in rows} == {(k, n) for k, names in EPISODES.items() for n in names}
    bench = _bench()
    for r in rows:
        spans = bench.load(bench.SOURCES[r["kind"]] / f"{r['name']}.jsonl.xz")
        [found] = SampleAdapter().adapt(spans)
        counts = found.counts
        assert r["calls"] == counts.calls == len(extract_model_calls(spans)) >= 2, r
        assert (r["samples_after"], r["conversations"]) == (counts.samples, counts.conversations), r
        assert (r["new_conversation"], r["diverged"]) == (counts.breaks["new_conversation"], counts.breaks["diverged"])
        assert r["trained"] == counts.tokens_trained
        assert r["prompt_tokens_after"] == counts.tokens_context - counts.tokens_shared
        # lineage merges every call the old rule merged, and runs no more tokens
        assert r["samples_after"] <= r["samples_before"] and r["prompt_tokens_after"] <= r["prompt_tokens_before"]
        assert r["prompt_tokens_distinct"] <= r["prompt_tokens_after"]
        if r["samples_before"] == r["samples_after"]:  # the same samples: the old rule runs each in full
            assert r["prompt_tokens_before"] == counts.tokens_context, r
        if r["kind"] == "harness":
            assert r["reward"] == 1.0  # the episode fixed the repo
