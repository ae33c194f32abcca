"""The framework matrix: every framework of :data:`frameworks.registry.FRAMEWORKS` runs its
tool-using agent **inside a rollout** (a real Runner, agentbolt's tracer on:
``Trainer(algorithm=Evaluate)``) on both paths a user can take:

* **gateway** — the agent calls ``llm.endpoint`` / ``llm.api_key`` of the rollout's
  ``gateway_llm()``: the gateway (its own chat templating and hermes tool-call parsing)
  in front of a scripted engine that writes the framework's replies (the ``add`` call,
  then "The answer is 5.", or the framework's own text format);
* **tracer** — the agent calls a model server straight (:mod:`frameworks.tool_model`,
  the same replies, Chat Completions and Responses) and only the tracer's instrumentors
  record the calls.

Each (framework, path) checks: every model call the model answered is recorded once (the
client's span and the gateway's twin are one call), as many as the record says; the
``add`` tool really ran (the last call's prompt holds the question, the call and its
result); on the gateway path every call has token ids and logprobs, the last prompt is
token-exact where the record says so, and the rollout makes the record's samples with
merge rate ``1 - (samples - 1) / (calls - 1)``; every call carries the record's agent
name, and where there is one ``agent_match="^calc$"`` trains exactly those calls. A framework with ``venv=`` runs in
its cached venv as an ``agentbolt runner`` subprocess joined to this test's server (same
gateway, same rollout); one whose calls the tracer cannot see is a strict xfail with the
reason (``tracer_gap``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers", reason="the gateway's chat templating needs a tokenizer (transformers)")

from gateway.scripted_engine import ScriptedEngine

from agentbolt.adapters.calls import ModelCall, extract_model_calls
from agentbolt.adapters.samples import RolloutSamples, build_samples
from agentbolt.adapters.triplets import MissingTokenIdsError
from agentbolt.algorithms.evaluate import Evaluate
from agentbolt.engines.tools.hermes import HermesParser
from agentbolt.execution.external import ExternalStrategy
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.models import byte_tokenizer
from agentbolt.runner import gateway_llm
from agentbolt.semconv import GATEWAY_SCOPE, LLM_PROMPT_SOURCE
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.http import HttpStore
from agentbolt.store.memory import MemoryStore
from agentbolt.trainer import Trainer
from agentbolt.types import LLM, Resource, Span
from frameworks.agents import QUESTION
from frameworks.in_rollout import framework_rollout
from frameworks.registry import FRAMEWORKS, Framework
from frameworks.tool_model import ToolModel, serve_tool_model

ROOT = Path(__file__).resolve().parents[2]
ADMIN = "matrix-admin"
PATHS = ("gateway", "tracer")


def framework_venvs() -> Path:
    """Where ``scripts/install_framework_venvs`` keeps the frameworks' venvs."""
    return Path(os.environ.get("AGENTBOLT_FRAMEWORK_VENVS") or Path.home() / ".cache/agentbolt/framework-venvs")


def matrix() -> list[Any]:
    """One test per (framework, path); the tracer path of a framework with a ``tracer_gap``
    is a strict xfail giving the reason."""
    params = []
    for name in sorted(FRAMEWORKS):
        for path in PATHS:
            gap = FRAMEWORKS[name].tracer_gap if path == "tracer" else None
            marks = [pytest.mark.xfail(reason=gap, strict=True)] if gap else []
            params.append(pytest.param(name, path, id=f"{name}-{path}", marks=marks))
    return params


@dataclass
class Recorded:
    """One rollout of a framework's agent: its spans and how many calls the model answered."""

    spans: list[Span]
    answered: int


class Model:
    """The model of one test on one path: what the rollout's ``llm`` resource points at."""

    def __init__(self, path: str, framework: Framework) -> None:
        self.path = path
        self.replies = framework.replies
        written = list(framework.replies)
        if framework.forces_tool_call:  # the gateway writes the opening of the call itself
            written = [r.removeprefix(HermesParser().forced_prefix(None)) for r in written]
        self.engine = ScriptedEngine(byte_tokenizer(), written, tool_parser="hermes")
        self.server: ToolModel | None = None

    @contextmanager
    def serving(self) -> Iterator[None]:
        if self.path == "gateway":
            yield
            return
        with serve_tool_model(self.replies) as self.server:
            yield

    def gateway(self) -> Gateway | None:
        config = GatewayConfig(retry_backoff=0.01, span_flush_interval=0.01)
        return Gateway(self.engine, config) if self.path == "gateway" else None

    def resources(self) -> dict[str, Resource]:
        if self.server is None:
            return {"llm": gateway_llm()}
        return {"llm": LLM(endpoint=self.server.url, model="policy", api_key="none")}

    def answered(self) -> int:
        return len(self.engine.prompts) if self.server is None else len(self.server.calls)


async def run_in_this_venv(framework: Framework, model: Model) -> Recorded:
    store = MemoryStore()
    trainer = Trainer(algorithm=Evaluate(show=False), store=store, gateway=model.gateway(), resources=model.resources())
    result = await trainer.fit_async(framework_rollout, [{"agent": framework.agent}])
    (row,) = result.rows
    assert row.reward == 1.0, row.error
    return Recorded(await store.get_spans(row.rollout_id, "latest"), model.answered())


async def run_in_its_venv(framework: Framework, model: Model, python: Path) -> Recorded:
    """The rollout runs in ``agentbolt runner`` of the framework's venv (this checkout's
    agentbolt on its path), joined to a server with this test's store and gateway."""
    with serve_in_thread(MemoryStore(), admin_token=ADMIN, gateway=model.gateway()) as url:
        store = HttpStore(url, token=ADMIN)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
        runner = subprocess.Popen(
            [
                str(python),
                "-m",
                "agentbolt.runner_cli",
                "--server",
                url,
                "--token",
                ADMIN,
                "--agent",
                "frameworks.in_rollout:framework_rollout",
                "--max-rollouts",
                "1",
                "--concurrency",
                "1",
                "--log-level",
                "warning",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            trainer = Trainer(
                algorithm=Evaluate(show=False),
                store=store,
                resources=model.resources(),
                strategy=ExternalStrategy(announce=False),
            )
            result = await asyncio.wait_for(trainer.fit_async(framework_rollout, [{"agent": framework.agent}]), 300)
            output = runner.communicate(timeout=60)[0]
        finally:
            runner.kill()
        (row,) = result.rows
        assert row.reward == 1.0, f"{row.error}\nrunner output:\n{output}"
        spans = await store.get_spans(row.rollout_id, "latest")
        await store.close()
        return Recorded(spans, model.answered())


def check_names(framework: Framework, calls: list[ModelCall]) -> None:
    """Every call carries the agent's name, and ``agent_match`` selects exactly those calls:
    trained where they have token ids; refused for training, naming the missing ids,
    where they have none (a Responses call straight to a model server)."""
    name = framework.agent_name
    assert [c.agent_name for c in calls] == [name] * len(calls)
    if name is None:
        return
    other = build_samples(calls, agent_match="^someone-else$")
    assert other is not None and not [c for s in other.samples for c in s.calls if c.trained]
    if not all(c.has_token_ids for c in calls):
        assert other.skipped_calls == len(calls)
        with pytest.raises(MissingTokenIdsError, match=f"{len(calls)} of {len(calls)} trained model calls"):
            build_samples(calls, agent_match=f"^{name}$")
        return
    selected = build_samples(calls, agent_match=f"^{name}$")
    assert selected is not None
    assert sorted(c.span_id for s in selected.samples for c in s.calls if c.trained) == sorted(c.span_id for c in calls)


def check_the_tool_ran(framework: Framework, last: ModelCall) -> None:
    """The last call's prompt holds the question, the ``add`` call and the tool's result
    (a Responses call that continues ``previous_response_id`` straight to a model server
    holds only the result: the rest of the conversation is the server's)."""
    messages = last.messages or []
    if last.request.get("previous_response_id") and last.attributes.get("otel.scope.name") != GATEWAY_SCOPE:
        assert [m for m in messages if m["role"] != "system"] == [
            {"role": "tool", "tool_call_id": messages[-1].get("tool_call_id"), "content": "5"}
        ], messages
        return
    assert any(QUESTION in json.dumps(m.get("content")) for m in messages if m["role"] == "user"), messages
    if framework.api_tool_calls:
        call = next(m for m in messages if m["role"] == "assistant")["tool_calls"][0]
        assert call["function"]["name"] == "add" and json.loads(call["function"]["arguments"]) == {"a": 2, "b": 3}
        assert any(m["role"] == "tool" and "5" in json.dumps(m["content"]) for m in messages)
    else:  # the framework's own text format: the prompt holds the call and the result (no other 5)
        said = json.dumps([m.get("content") for m in messages if m["role"] != "system"])
        assert "add" in said and "5" in said, said


def samples_of(calls: list[ModelCall]) -> RolloutSamples:
    found = build_samples(calls)
    assert found is not None and found.samples
    return found


@pytest.mark.parametrize(("name", "path"), matrix())
async def test_a_framework_agent_trains_inside_a_rollout(name: str, path: str) -> None:
    framework = FRAMEWORKS[name]
    model = Model(path, framework)
    with model.serving():
        if framework.venv is None:
            if importlib.util.find_spec(framework.module) is None:
                pytest.skip(f"{name} is not installed (docs/frameworks.md says how)")
            recorded = await run_in_this_venv(framework, model)
        else:
            python = framework_venvs() / framework.venv / "bin/python"
            if not python.exists():
                pytest.skip(
                    f"{name} runs in its own venv: build it with scripts/install_framework_venvs "
                    f"{framework.venv} (scripts/test does)"
                )
            recorded = await run_in_its_venv(framework, model, python)
    calls = extract_model_calls(recorded.spans)
    assert recorded.answered == framework.calls
    assert len(calls) == recorded.answered, [(c.span_id, c.attributes.get("otel.scope.name")) for c in calls]
    check_the_tool_ran(framework, calls[-1])
    if path == "gateway":
        assert all(c.attributes.get("otel.scope.name") == GATEWAY_SCOPE for c in calls)
        assert all(c.has_token_ids and c.response_logprobs for c in calls)
        assert (calls[-1].attributes[LLM_PROMPT_SOURCE] == "token_exact") is framework.token_exact
        found = samples_of(calls)
        assert len(found.samples) == framework.samples
        assert found.merge_rate == 1.0 - (framework.samples - 1) / (framework.calls - 1)
    elif all(c.has_token_ids for c in calls):  # a vLLM-like server's chat answers carry them
        samples_of(calls)
    check_names(framework, calls)


def test_every_framework_names_an_importable_agent() -> None:
    """The registry's agents are ``module:function`` references the rollout can load."""
    for framework in FRAMEWORKS.values():
        module, _, function = framework.agent.partition(":")
        assert module.startswith("frameworks.") and function, framework
        assert 1 <= framework.samples <= framework.calls and len(framework.replies) <= framework.calls
