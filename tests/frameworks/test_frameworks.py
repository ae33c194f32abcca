"""The framework matrix: every framework of :data:`frameworks.agents.FRAMEWORKS` runs its
tool-using agent **inside a rollout** (a real Runner, agentbolt's tracer on:
``Trainer(algorithm=Evaluate)``) on both paths a user can take:

* **gateway** — the agent calls ``llm.endpoint`` / ``llm.api_key`` of the rollout's
  ``gateway_llm()``: the gateway (its own chat templating and hermes tool-call parsing)
  in front of a scripted engine that writes the ``add`` call, then "The answer is 5.";
* **tracer** — the agent calls a model server straight (:mod:`frameworks.tool_model`,
  same answers, Chat Completions and Responses) and only the tracer's instrumentors
  record the calls.

Each (framework, path) checks: every model call the model answered is recorded once (the
client's span and the gateway's twin are one call), with token ids on the gateway path;
the rollout's calls build training samples (on the gateway path as many as the record
says); where the framework has agents, every call carries the agent's name and
``agent_match="^calc$"`` trains exactly those calls. A framework with ``venv=`` runs in
its cached venv as an ``agentbolt runner`` subprocess joined to this test's server (same
gateway, same rollout); one whose calls the tracer cannot see is a strict xfail with the
reason (``tracer_gap``).
"""

from __future__ import annotations

import asyncio
import importlib.util
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
from agentbolt.execution.external import ExternalStrategy
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.models import byte_tokenizer
from agentbolt.runner import gateway_llm
from agentbolt.semconv import GATEWAY_SCOPE
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.http import HttpStore
from agentbolt.store.memory import MemoryStore
from agentbolt.trainer import Trainer
from agentbolt.types import LLM, Resource, Span
from frameworks.agents import FRAMEWORKS, Framework
from frameworks.in_rollout import framework_rollout
from frameworks.tool_model import ANSWER, ToolModel, serve_tool_model

CALL = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
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

    def __init__(self, path: str) -> None:
        self.path = path
        self.engine = ScriptedEngine(byte_tokenizer(), [CALL, ANSWER], tool_parser="hermes")
        self.server: ToolModel | None = None

    @contextmanager
    def serving(self) -> Iterator[None]:
        if self.path == "gateway":
            yield
            return
        with serve_tool_model() as self.server:
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


def samples_of(calls: list[ModelCall]) -> RolloutSamples:
    found = build_samples(calls)
    assert found is not None and found.samples
    return found


@pytest.mark.parametrize(("name", "path"), matrix())
async def test_a_framework_agent_trains_inside_a_rollout(name: str, path: str) -> None:
    framework = FRAMEWORKS[name]
    model = Model(path)
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
    assert recorded.answered >= 2  # the tool call, then the answer
    assert len(calls) == recorded.answered, [(c.span_id, c.attributes.get("otel.scope.name")) for c in calls]
    if path == "gateway":
        assert all(c.attributes.get("otel.scope.name") == GATEWAY_SCOPE for c in calls)
        assert all(c.has_token_ids and c.response_logprobs for c in calls)
        assert len(samples_of(calls).samples) == framework.samples
    elif all(c.has_token_ids for c in calls):  # a vLLM-like server's chat answers carry them
        samples_of(calls)
    check_names(framework, calls)


def test_every_framework_names_an_importable_agent() -> None:
    """The registry's agents are ``module:function`` references the rollout can load."""
    for framework in FRAMEWORKS.values():
        module, _, function = framework.agent.partition(":")
        assert module.startswith("frameworks.") and function, framework
        assert framework.samples >= 1
