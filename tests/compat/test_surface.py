"""Every module path of Agent Lightning v0.3.0 resolves under ``agentbolt.compat``, with
the names users import from it: ``agentlightning.X`` → ``agentbolt.compat.X``. A name
agentbolt does not provide raises, saying why."""

from __future__ import annotations

import importlib

import pytest

from agentbolt.compat import UnsupportedV03NameError
from agentbolt.compat.resolution import unsupported_reason, v03_names_of
from agentbolt.compat.surface import MODULES

# every module of the agentlightning 0.3.0 wheel (``__main__`` aside), as data
V03_MODULES = (
    "adapter", "adapter.base", "adapter.messages", "adapter.triplet", "algorithm", "algorithm.apo",
    "algorithm.apo.apo", "algorithm.base", "algorithm.decorator", "algorithm.fast", "algorithm.utils",
    "algorithm.verl", "algorithm.verl.interface", "cli", "cli.prometheus", "cli.store", "cli.vllm", "client",
    "config", "emitter", "emitter.annotation", "emitter.exception", "emitter.message", "emitter.object",
    "emitter.reward", "env_var", "execution", "execution.base", "execution.client_server", "execution.events",
    "execution.inter_process", "execution.shared_memory", "instrumentation", "instrumentation.agentops",
    "instrumentation.agentops_langchain", "instrumentation.litellm", "instrumentation.vllm",
    "instrumentation.weave", "litagent", "litagent.decorator", "litagent.litagent", "llm_proxy", "logging",
    "reward", "runner", "runner.agent", "runner.base", "runner.legacy", "semconv", "server", "store",
    "store.base", "store.client_server", "store.collection", "store.collection.base", "store.collection.memory",
    "store.collection.mongo", "store.collection_based", "store.memory", "store.mongo", "store.sqlite",
    "store.threading", "store.utils", "tracer", "tracer.agentops", "tracer.base", "tracer.dummy",
    "tracer.otel", "tracer.weave", "trainer", "trainer.init_utils", "trainer.legacy", "trainer.registry",
    "trainer.trainer", "types", "types.core", "types.resources", "types.tracer", "utils", "utils.id",
    "utils.metrics", "utils.otel", "utils.otlp", "utils.server_launcher", "utils.system_snapshot", "verl",
    "verl.async_server", "verl.daemon", "verl.dataset", "verl.entrypoint", "verl.trainer",
)

PAIRS = [(m, n) for m in sorted(MODULES) for n in v03_names_of(m)]


def test_the_table_has_every_v03_module() -> None:
    assert set(MODULES) - {""} == set(V03_MODULES)


@pytest.mark.parametrize("module", sorted(V03_MODULES))
def test_every_v03_module_path_imports(module: str) -> None:
    imported = importlib.import_module(f"agentbolt.compat.{module}")
    assert imported.__name__ == f"agentbolt.compat.{module}"


@pytest.mark.parametrize(("module", "name"), PAIRS, ids=[f"{m or 'agentbolt.compat'}:{n}" for m, n in PAIRS])
def test_every_name_resolves_or_says_why_not(module: str, name: str) -> None:
    path = f"agentbolt.compat.{module}" if module else "agentbolt.compat"
    reason = unsupported_reason(module, name)
    namespace: dict[str, object] = {}
    if reason is None:
        exec(f"from {path} import {name}", namespace)  # noqa: S102 - the import statement itself is the subject
        assert namespace[name] is getattr(importlib.import_module(path), name)
    else:
        with pytest.raises(UnsupportedV03NameError, match="not provided by agentbolt") as raised:
            getattr(importlib.import_module(path), name)
        assert reason in str(raised.value)


@pytest.mark.parametrize("module", sorted(m for m, spec in MODULES.items() if spec.reason is None))
def test_star_imports_give_the_provided_names(module: str) -> None:
    path = f"agentbolt.compat.{module}" if module else "agentbolt.compat"
    namespace: dict[str, object] = {}
    exec(f"from {path} import *", namespace)  # noqa: S102
    provided = {n for n in v03_names_of(module) if unsupported_reason(module, n) is None}
    if module:  # agentbolt.compat's own __all__ is the top-level table (test_names.py)
        assert provided <= set(namespace)


def test_types_v03_users_import_are_real_types() -> None:
    from agentbolt.compat.types import OtelResource, SpanContext, SpanCoreFields, TraceStatus

    status = TraceStatus(status_code="OK")
    core = SpanCoreFields(name="step", status=status, attributes={"k": 1}, start_time=1.0, end_time=2.0)
    assert core.status.status_code == "OK" and core.attributes == {"k": 1}
    assert OtelResource(attributes={"service.name": "x"}, schema_url="").attributes["service.name"] == "x"
    assert SpanContext(trace_id="a" * 32, span_id="b" * 16, is_remote=False, trace_state={}).span_id == "b" * 16


def test_a_module_agentbolt_does_not_provide_still_imports_and_says_why_on_use() -> None:
    import agentbolt.compat.verl.trainer as verl_trainer

    with pytest.raises(UnsupportedV03NameError, match=r"agentbolt\.algorithms\.GRPO"):
        verl_trainer.AgentLightningTrainer  # noqa: B018


def test_real_files_win_over_the_table() -> None:
    import agentbolt.compat.store as store

    assert store.__file__ is not None and store.__file__.endswith("store/__init__.py")
