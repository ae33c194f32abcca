"""Codex CLI (``codex exec``, npm ``@openai/codex``), tested with 0.171.0.

Its built-in OpenAI provider ignores ``OPENAI_BASE_URL``, so a provider of its own is
written into ``$CODEX_HOME/config.toml`` (``HOME/.codex``): the gateway's URL, the Responses
wire API, the key from ``OPENAI_API_KEY``, no WebSocket. Approvals and Codex's own
sandbox are off (``--dangerously-bypass-approvals-and-sandbox``: agentbolt's sandbox is
the boundary; Codex's landlock/seccomp one cannot nest in it); ``--ephemeral`` keeps no
session files; ``--skip-git-repo-check`` because the workspace has no ``.git``. The task
goes on stdin (``-``), so any length works. The requests carry Codex's default tools
(its ``namespace`` of sub-agent functions, hosted ``web_search``): the gateway flattens
or drops what the engine cannot run and records it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import orjson

from agentbolt.runner.harness.profiles.base import Install, Launch, RunContext, TaskInput, WireProtocol
from agentbolt.runner.harness.profiles.install import Packaged

__all__ = ["Codex"]


def _toml(value: str) -> str:
    return orjson.dumps(value).decode()  # a JSON string is a TOML basic string


@dataclass(frozen=True)
class Codex(Packaged):
    """``context_window``: the model's context as Codex is told it (it compacts the
    history before reaching it). Codex sends no ``max_output_tokens``: the engine's own
    limit applies (``agentbolt server --max-tokens``)."""

    context_window: int | None = None

    name: ClassVar[str] = "codex"
    tested_version: ClassVar[str] = "0.171.0"
    install: ClassVar[Install] = Install("npm", "@openai/codex", "0.171.0", "codex")
    protocol: ClassVar[WireProtocol] = "openai-responses"
    task_input: ClassVar[TaskInput] = TaskInput.STDIN
    memory_mb: ClassVar[int] = 2048

    def launch(self, run: RunContext) -> Launch:
        lines = [
            f"model = {_toml(run.model)}",
            'model_provider = "agentbolt"',
            'approval_policy = "never"',
            'sandbox_mode = "danger-full-access"',
            "check_for_update_on_startup = false",
            'model_reasoning_effort = "low"',
        ]
        if self.context_window:
            lines.append(f"model_context_window = {int(self.context_window)}")
        lines += [
            "",
            "[model_providers.agentbolt]",
            'name = "agentbolt gateway"',
            f"base_url = {_toml(run.openai_base_url)}",
            'env_key = "OPENAI_API_KEY"',
            'wire_api = "responses"',
            "supports_websockets = false",
            "request_max_retries = 1",
            "stream_max_retries = 1",
            "",
        ]
        argv = [run.executable, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
                "--ephemeral", "--color", "never", "-C", run.workdir, "-m", run.model, "-"]
        env = {"CODEX_HOME": run.in_home(".codex"), "OPENAI_API_KEY": run.api_key, "RUST_LOG": "warn"}
        return Launch(argv=argv, env=env, files={".codex/config.toml": "\n".join(lines)},
                      stdin=run.task_text.encode("utf-8"))
