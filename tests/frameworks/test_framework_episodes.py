"""Multi-turn tool agents of three more frameworks — smolagents' ``ToolCallingAgent``,
LlamaIndex's ``ReActAgent``, DSPy's ``ReAct`` — recorded for
``benchmarks/lineage_merging.py``.

Each fixes the harness matrix's tiny repo (``add`` subtracts) with three tools — read a
file, run the test, replace a text — in five turns: read, test, fix, test, answer. Each
is pointed at the gateway as at any OpenAI-compatible server; the model is scripted
(:class:`ScriptedEngine`: real token ids through the gateway's templating and tool-call
parsing), in each framework's own output format (native tool calls for smolagents, the
ReAct text formats of LlamaIndex and DSPy). How the framework builds each prompt from the
last is its own: that is what is recorded.

Opt-in (it writes recordings; ``tests/frameworks/test_frameworks.py`` runs the same frameworks on
every test run):
``AGENTBOLT_FRAMEWORK_EPISODES=dir`` writes each rollout's spans to
``dir/<framework>.jsonl.xz``, one span a line. The committed recordings are in
``benchmarks/data/framework_episodes``.
"""

from __future__ import annotations

import json
import lzma
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="the gateway's chat templating needs a tokenizer (transformers)")

from gateway.conftest import GatewayWorld
from gateway.scripted_engine import ScriptedEngine
from runner.harness.fix_repo import REPO, TASK

from agentbolt.gateway import GatewayConfig
from agentbolt.models import byte_tokenizer

OUT = os.environ.get("AGENTBOLT_FRAMEWORK_EPISODES")
pytestmark = pytest.mark.skipif(
    not OUT, reason="recording the framework episodes is opt-in: AGENTBOLT_FRAMEWORK_EPISODES=dir"
)

FIX = {"path": "calc.py", "old": "return a - b", "new": "return a + b"}


class Repo:
    """The three tools, on a copy of the repo."""

    def __init__(self, root: Path) -> None:
        self.root = root
        for name, text in REPO.items():
            (root / name).write_text(text)

    def read_file(self, path: str) -> str:
        return (self.root / path).read_text()

    def run_tests(self) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_calc.py"],
            cwd=self.root,
            capture_output=True,
            text=True,
        )
        return done.stdout[-600:]

    def replace(self, path: str, old: str, new: str) -> str:
        text = (self.root / path).read_text()
        if old not in text:
            return f"{old!r} is not in {path}"
        (self.root / path).write_text(text.replace(old, new, 1))
        return f"replaced in {path}"

    def passes(self) -> bool:
        return "passed" in self.run_tests() and "failed" not in self.run_tests()


def hermes(name: str, **arguments: object) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def required(name: str, **arguments: object) -> str:
    """A tool call after the gateway's prefill for ``tool_choice="required"`` (the opening tag)."""
    return hermes(name, **arguments).removeprefix("<tool_call>\n")


def react(thought: str, action: str, **arguments: object) -> str:
    return f"Thought: {thought}\nAction: {action}\nAction Input: {json.dumps(arguments)}"


def dspy_step(thought: str, tool: str, **arguments: object) -> str:
    return (
        f"[[ ## next_thought ## ]]\n{thought}\n\n[[ ## next_tool_name ## ]]\n{tool}\n\n"
        f"[[ ## next_tool_args ## ]]\n{json.dumps(arguments)}\n\n[[ ## completed ## ]]"
    )


SCRIPTS: dict[str, list[str]] = {
    "smolagents": [  # it asks for tool_choice="required"
        required("read_file", path="calc.py"),
        required("run_tests"),
        required("replace", **FIX),
        required("run_tests"),
        required("final_answer", answer="Fixed calc.py: add() returns a + b; the test passes."),
    ],
    "llamaindex-react": [
        react("I read the code first.", "read_file", path="calc.py"),
        react("I run the test.", "run_tests"),
        react("add() subtracts; I fix it.", "replace", **FIX),
        react("I run the test again.", "run_tests"),
        "Thought: The test passes; I can answer without using any more tools.\n"
        "Answer: Fixed calc.py: add() returns a + b; the test passes.",
    ],
    "dspy-react": [
        dspy_step("I read the code first.", "read_file", path="calc.py"),
        dspy_step("I run the test.", "run_tests"),
        dspy_step("add() subtracts; I fix it.", "replace", **FIX),
        dspy_step("I run the test again.", "run_tests"),
        dspy_step("The test passes.", "finish"),
        "[[ ## reasoning ## ]]\nThe test passes after the fix.\n\n"
        "[[ ## answer ## ]]\nFixed calc.py: add() returns a + b.\n\n[[ ## completed ## ]]",
    ],
}


def smolagents_agent(repo: Repo, base_url: str, api_key: str) -> str:
    from smolagents import OpenAIServerModel, ToolCallingAgent, tool

    @tool
    def read_file(path: str) -> str:
        """Read a file of the repository.

        Args:
            path: the file's path, relative to the repository.
        """
        return repo.read_file(path)

    @tool
    def run_tests() -> str:
        """Run the repository's test and return its output."""
        return repo.run_tests()

    @tool
    def replace(path: str, old: str, new: str) -> str:
        """Replace the first occurrence of a text in a file.

        Args:
            path: the file's path, relative to the repository.
            old: the text to replace.
            new: the text to put instead.
        """
        return repo.replace(path, old, new)

    model = OpenAIServerModel(model_id="policy", api_base=base_url, api_key=api_key)
    agent = ToolCallingAgent(tools=[read_file, run_tests, replace], model=model, max_steps=8, verbosity_level=0)
    return str(agent.run(TASK))


def llamaindex_agent(repo: Repo, base_url: str, api_key: str) -> str:
    import asyncio

    from llama_index.core.agent.workflow import ReActAgent
    from llama_index.core.tools import FunctionTool
    from llama_index.llms.openai_like import OpenAILike

    tools = [
        FunctionTool.from_defaults(fn=repo.read_file, name="read_file", description="Read a file of the repo."),
        FunctionTool.from_defaults(fn=repo.run_tests, name="run_tests", description="Run the repo's test."),
        FunctionTool.from_defaults(
            fn=repo.replace, name="replace", description="Replace the first occurrence of old by new in a file."
        ),
    ]
    llm = OpenAILike(
        model="policy",
        api_base=base_url,
        api_key=api_key,
        is_chat_model=True,
        is_function_calling_model=False,
        context_window=200_000,
    )

    async def run() -> str:  # the workflow starts on the running loop
        return str(await ReActAgent(tools=tools, llm=llm).run(TASK, max_iterations=10))

    return asyncio.run(run())


def dspy_agent(repo: Repo, base_url: str, api_key: str) -> str:
    import dspy

    def read_file(path: str) -> str:
        """Read a file of the repository."""
        return repo.read_file(path)

    def run_tests() -> str:
        """Run the repository's test and return its output."""
        return repo.run_tests()

    def replace(path: str, old: str, new: str) -> str:
        """Replace the first occurrence of old by new in a file."""
        return repo.replace(path, old, new)

    lm = dspy.LM("openai/policy", api_base=base_url, api_key=api_key, cache=False)
    with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
        agent = dspy.ReAct("task -> answer", tools=[read_file, run_tests, replace], max_iters=8)
        return str(agent(task=TASK).answer)


AGENTS: dict[str, tuple[str, Callable[[Repo, str, str], str]]] = {
    "smolagents": ("smolagents", smolagents_agent),
    "llamaindex-react": ("llama_index.llms.openai_like", llamaindex_agent),
    "dspy-react": ("dspy", dspy_agent),
}


@pytest.fixture
def engine(request: pytest.FixtureRequest) -> ScriptedEngine:
    return ScriptedEngine(byte_tokenizer(), SCRIPTS[request.node.callspec.params["name"]], tool_parser="hermes")


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig(retry_backoff=0.01)


@pytest.mark.parametrize("name", list(AGENTS))
def test_a_framework_agent_fixes_the_repo_and_is_recorded(name: str, world: GatewayWorld, tmp_path: Path) -> None:
    module, agent = AGENTS[name]
    pytest.importorskip(module)
    repo = Repo(tmp_path)
    a = world.claim()
    answer = agent(repo, a.base_url, a.token)
    assert "a + b" in answer and repo.passes()
    engine = world.engine
    assert isinstance(engine, ScriptedEngine)
    spans = world.spans(a.rollout_id, len(engine.prompts))
    assert all(s["attributes"]["agentbolt.llm.token_ids_source"] == "engine" for s in spans)
    out = Path(str(OUT))
    out.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(span) + "\n" for span in spans)
    (out / f"{name}.jsonl.xz").write_bytes(lzma.compress(lines.encode()))
