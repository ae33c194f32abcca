"""Longer episodes of the real harnesses, recorded for ``benchmarks/lineage_merging.py``.

Each harness, unmodified and sandboxed, fixes the matrix's tiny repo (:mod:`.fix_repo`)
in several turns — look at the files, run the test, fix, run it again, finish — and
does on the way what breaks a conversation's token prefix in real use, as far as the
harness does it: mini-swe-agent drops a reply without a tool call from its history
(after a format error), Claude Code runs a sub-agent (its ``Agent`` tool: a conversation
with a system prompt of its own) inside the rollout, aider reflects a SEARCH block that
did not match back to the model. The model is scripted (:class:`PlaybookEngine`: real
token ids through the gateway's templating and parsing); whatever the harness sends is
what is recorded.

They run with the harness matrix (``scripts/test`` installs the harnesses;
``AGENTBOLT_HARNESS_MATRIX=0`` switches both off) and check, besides the fix, that each
episode's samples break where the harness really breaks the prefix (:data:`BREAKS`).
``AGENTBOLT_HARNESS_EPISODES=dir`` also writes each rollout's spans (model calls and
reward) to ``dir/<harness>.jsonl.xz``, one span a line (xz: the prompts repeat from call
to call, byte tokens make them long). The committed recordings are in
``benchmarks/data/harness_episodes``.
"""

from __future__ import annotations

import lzma
import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="the gateway's chat templating needs a tokenizer (transformers)")

from agentbolt.adapters.calls import extract_model_calls
from agentbolt.adapters.samples import SampleAdapter
from agentbolt.runner.harness.profiles import Aider, ClaudeCode, Codex, MiniSweAgent, OpenCode, OpenHands
from agentbolt.types import RolloutStatus
from runner.harness.fix_repo import REPO, Case, run_case, tool

OUT = os.environ.get("AGENTBOLT_HARNESS_EPISODES")

pytestmark = [
    pytest.mark.skipif(os.environ.get("AGENTBOLT_HARNESS_MATRIX") == "0",
                       reason="the harness matrix is switched off (AGENTBOLT_HARNESS_MATRIX=0)"),
    pytest.mark.skipif(shutil.which("bwrap") is None,
                       reason="bubblewrap is not installed (apt-get install bubblewrap)"),
]

LOOK = "cat calc.py test_calc.py"
TEST = "python3 -m pytest -q test_calc.py 2>&1 | tail -5"
FIX = "sed -i 's/a - b/a + b/' calc.py && cat calc.py"
NO_TOOL = "add() returns a - b where it should return a + b; changing the minus to a plus will fix the test."
BLOCK = "calc.py\n```python\n<<<<<<< SEARCH\n{old}\n=======\n    return a + b\n>>>>>>> REPLACE\n```\n"
SUBAGENT = "You are an agent for Claude Code"  # the start of Claude Code's sub-agent system prompt

EPISODES: dict[str, Case] = {
    # a reply without a tool call is a format error: mini keeps its error message, not the reply
    "mini-swe-agent": Case(MiniSweAgent(step_limit=10, command_timeout=30), [
        "First I look at the code and its test.\n" + tool("bash", command=LOOK),
        "Now I run the test to see it fail.\n" + tool("bash", command=TEST),
        NO_TOOL,
        "I fix it.\n" + tool("bash", command=FIX),
        "I run the test again.\n" + tool("bash", command=TEST),
        "The test passes; submitting.\n" + tool("bash", command="echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"),
    ], markers=("No tool calls found in the response",)),
    # the first block's SEARCH text is not in the file: aider says so and asks again
    "aider": Case(Aider(files=("calc.py", "test_calc.py")), [BLOCK.format(old="    return a-b")],
                  side={"SearchReplaceNoExactMatch": BLOCK.format(old="    return a - b")}),
    "openhands": Case(OpenHands(max_steps=10), [
        tool("terminal", command=LOOK, security_risk="LOW"),
        tool("terminal", command=TEST, security_risk="LOW"),
        tool("terminal", command=FIX, security_risk="LOW"),
        tool("terminal", command=TEST, security_risk="LOW"),
        tool("finish", message="Fixed calc.py: add() now returns a + b; the test passes."),
    ]),
    "codex": Case(Codex(), [
        tool("exec_command", cmd=LOOK),
        tool("exec_command", cmd=TEST),
        tool("exec_command", cmd=FIX),
        tool("exec_command", cmd=TEST),
        "Fixed calc.py: add() now returns a + b; the test passes.",
    ], dropped={"web_search"}),
    # the main agent hands the look to a sub-agent (the Agent tool), then fixes and tests
    "claude-code": Case(ClaudeCode(), [
        tool("Agent", description="Inspect the calc repo", subagent_type="general-purpose",
             prompt="Read calc.py and test_calc.py and say why the test fails."),
        tool("Bash", command=FIX, description="Fix add in calc.py"),
        tool("Bash", command=TEST, description="Run the test"),
        "Fixed calc.py: add() now returns a + b; the test passes.",
    ], side={SUBAGENT: [tool("Bash", command=LOOK, description="Show the files"),
                        "add() returns a - b; the test expects add(2, 3) == 5."]}),
    "opencode": Case(OpenCode(context_window=200_000), [
        tool("read", filePath="/workspace/calc.py"),
        tool("bash", command=TEST, description="Run the test"),
        tool("edit", filePath="/workspace/calc.py", oldString="return a - b", newString="return a + b"),
        tool("bash", command=TEST, description="Run the test again"),
        "Fixed: add() now returns a + b; the test passes.",
    ]),
}

BREAKS: dict[str, dict[str, int]] = {
    "claude-code": {"new_conversation": 1},  # its sub-agent: a conversation of its own
    "mini-swe-agent": {"diverged": 1},  # the reply without a tool call, dropped from its history
    "aider": {"diverged": 1},  # the file moved after the chat history when the SEARCH block missed
}
"""Where each harness's episode leaves one conversation (none: one sample throughout)."""


@pytest.mark.parametrize("name", list(EPISODES))
async def test_a_long_episode_fixes_the_repo_and_is_recorded(name: str, tmp_path: Path) -> None:
    ran = await run_case(EPISODES[name], tmp_path, task_id=name)
    facts = ran.attempt.metadata.get("harness", {})
    assert ran.rollout.status == RolloutStatus.SUCCEEDED, (ran.attempt.error, facts.get("harness.stderr_tail"))
    calls = extract_model_calls(ran.spans)
    assert calls and all(c.has_token_ids and not c.failed for c in calls), [
        (c.agent_name, c.failed, c.has_token_ids, c.span_id) for c in calls]
    assert len(ran.engine.prompts) == len(calls) >= 2  # every call the model answered was recorded
    assert ran.rollout.reward == 1.0, (ran.seen.read_text(), facts.get("harness.stderr_tail"))
    assert (ran.repo / "calc.py").read_text() == REPO["calc.py"]  # the fix was made in the rollout's copy
    [samples] = SampleAdapter().adapt(ran.spans)
    breaks = {cause: n for cause, n in samples.counts.breaks.items() if cause != "first" and n}
    assert breaks == BREAKS.get(name, {}), breaks
    if not OUT:
        return
    out = Path(str(OUT))
    out.mkdir(parents=True, exist_ok=True)
    lines = "".join(span.model_dump_json() + "\n" for span in ran.spans)
    (out / f"{name}.jsonl.xz").write_bytes(lzma.compress(lines.encode()))
