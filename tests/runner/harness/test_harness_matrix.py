"""The harness matrix: each real coding agent, unmodified and sandboxed, fixes one tiny repo.

The repo's test fails (``add`` subtracts). A scripted model (:class:`PlaybookEngine`:
real token ids and logprobs through the gateway's chat templating and tool-call parsing)
makes each harness do the right edit through its *own* tools — mini-swe-agent's bash
tool, aider's SEARCH/REPLACE blocks, opencode's edit tool, ... Per harness it checks:
the program ran sandboxed, every model call was recorded with token ids, samples were
built (the merge rate is printed and written to the report), and the evaluator (the
repo's tests, run outside the sandbox) scored 1.0.

Part of the default suite: ``scripts/test`` installs the harnesses
(``scripts/install_harnesses``: about 3.2 GB, 4.5 minutes the first time, cached after);
the six take 75 s on a quiet 2-core machine, 7-18 s each, most of it the harnesses' own
start-up. A harness that is not in the cache is installed; one that cannot be installed
fails with the reason (never a skip). ``AGENTBOLT_HARNESS_MATRIX=0`` switches the matrix
off (a skip that says so); ``AGENTBOLT_HARNESS_MATRIX_REPORT=path`` writes one JSON line
per harness.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="the gateway's chat templating needs a tokenizer (transformers)")

from agentbolt import semconv
from agentbolt.adapters.calls import extract_model_calls
from agentbolt.adapters.samples import SampleAdapter
from agentbolt.runner.harness.profiles import Aider, ClaudeCode, Codex, MiniSweAgent, OpenCode, OpenHands
from agentbolt.types import RolloutStatus
from runner.harness.fix_repo import REPO, Case, run_case, tool

pytestmark = [
    pytest.mark.skipif(os.environ.get("AGENTBOLT_HARNESS_MATRIX") == "0",
                       reason="the harness matrix is switched off (AGENTBOLT_HARNESS_MATRIX=0)"),
    pytest.mark.skipif(shutil.which("bwrap") is None,
                       reason="bubblewrap is not installed (apt-get install bubblewrap)"),
]

CASES: dict[str, Case] = {
    "mini-swe-agent": Case(MiniSweAgent(step_limit=6, command_timeout=30), [
        "The sum is computed with a minus. I fix it.\n"
        + tool("bash", command="sed -i 's/a - b/a + b/' calc.py && cat calc.py"),
        "Fixed; submitting.\n" + tool("bash", command="echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"),
    ]),
    # one call: aider applies the block itself and, with --message, ends (its system prompt holds example
    # assistant turns, so the turn count would not tell a second call anyway)
    "aider": Case(Aider(files=("calc.py",)), [
        "calc.py\n```python\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n>>>>>>> REPLACE\n```\n",
    ]),
    "openhands": Case(OpenHands(max_steps=6), [
        tool("terminal", command="sed -i 's/a - b/a + b/' calc.py && cat calc.py", security_risk="LOW"),
        tool("finish", message="Fixed calc.py: add() now returns a + b."),
    ]),
    # a byte per token: its 30k-character prompt is 30k tokens, past a context it would compact
    "codex": Case(Codex(), [
        tool("exec_command", cmd="sed -i 's/a - b/a + b/' calc.py && cat calc.py"),
        "Fixed calc.py: add() now returns a + b.",
    ], dropped={"web_search"}),
    "claude-code": Case(ClaudeCode(), [
        tool("Bash", command="sed -i 's/a - b/a + b/' calc.py && cat calc.py", description="Fix add in calc.py"),
        "Fixed calc.py: add() now returns a + b.",
    ]),
    "opencode": Case(OpenCode(context_window=200_000), [
        tool("edit", filePath="/workspace/calc.py", oldString="return a - b", newString="return a + b"),
        "Fixed: add() now returns a + b.",
    ], side={"You are a title generator": "Fix add in calc.py"}),
}


def _report(line: dict[str, object]) -> None:
    print(json.dumps(line))
    path = os.environ.get("AGENTBOLT_HARNESS_MATRIX_REPORT")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps(line) + "\n")


@pytest.mark.parametrize("name", list(CASES))
async def test_the_harness_fixes_the_repo_through_its_own_tools(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    ran = await run_case(case, tmp_path, task_id=name)
    rollout, attempt, spans, engine = ran.rollout, ran.attempt, ran.spans, ran.engine
    facts = attempt.metadata.get("harness", {})
    assert rollout.status == RolloutStatus.SUCCEEDED, (attempt.error, facts.get("harness.stderr_tail"))
    calls = extract_model_calls(spans)
    [samples] = SampleAdapter().adapt(spans)
    dropped = {json.dumps(s.attributes.get(semconv.LLM_DROPPED_TOOLS)) for s in spans} - {"null"}
    _report({"harness": name, "version": case.profile.tested_version, "reward": rollout.reward,
             "calls": len(calls), "samples": len(samples.samples), "merge_rate": round(samples.merge_rate, 3),
             "conversations": samples.counts.conversations, "breaks": dict(samples.counts.breaks),
             "tokens_shared": samples.counts.tokens_shared, "wall_s": round(ran.wall_s, 1),
             "dropped_tools": sorted(dropped), "sandbox_events": attempt.metadata.get("sandbox", {}).get("events")})
    assert facts["harness.sandboxed"] is True
    assert calls and all(c.has_token_ids and not c.failed for c in calls), [
        (c.agent_name, c.failed, c.has_token_ids, c.span_id) for c in calls]
    assert len(engine.prompts) == len(calls)  # every call the model answered was recorded
    assert samples.samples and sum(s.num_response_tokens for s in samples.samples) > 0
    assert all(any(tool in d for d in dropped) for tool in case.dropped), dropped
    assert rollout.reward == 1.0, (ran.seen.read_text(), facts.get("harness.stderr_tail"), engine.texts[-1][-2000:])
    assert (ran.repo / "calc.py").read_text() == REPO["calc.py"]  # the fix was made in the rollout's copy
