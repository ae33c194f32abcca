"""opencode (``opencode run``, npm ``opencode-ai``), tested with 1.18.33.

A provider of its own in ``HOME/.config/opencode/opencode.json``: the bundled
OpenAI-compatible client (``@ai-sdk/openai-compatible``) at the gateway's URL, the key
from ``OPENAI_API_KEY``, one model (``agentbolt/{model}``) for both the agent and its
small model; every permission allowed but web fetches (``--auto``: agentbolt's sandbox
is the boundary); no auto-update, sharing or external plugins (``--pure``). The session
gets a fixed ``--title`` so opencode makes no extra title-generation call (that call
would be a second, unrelated sample). The task is the message on the command line; one
too long for it is attached as a file (``-f``) with a one-line message pointing at it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import orjson

from agentbolt.runner.harness.profiles.base import Install, Launch, RunContext, TaskInput, WireProtocol
from agentbolt.runner.harness.profiles.install import Packaged

__all__ = ["OpenCode"]

LONG_TASK_MESSAGE = "Your task is in the attached file task.md. Do it."


@dataclass(frozen=True)
class OpenCode(Packaged):
    """``context_window``/``max_output_tokens``: the model's limits as opencode is told
    them (its own prompt is about 7k tokens; past the window it compacts the history with
    a summarisation call, every turn)."""

    context_window: int = 32768
    max_output_tokens: int = 1024
    title: str = "agentbolt rollout"

    name: ClassVar[str] = "opencode"
    tested_version: ClassVar[str] = "1.18.33"
    install: ClassVar[Install] = Install("npm", "opencode-ai", "1.18.33", "opencode")
    protocol: ClassVar[WireProtocol] = "openai-chat"
    task_input: ClassVar[TaskInput] = TaskInput.ARGV
    memory_mb: ClassVar[int] = 6144

    def launch(self, run: RunContext) -> Launch:
        model = f"agentbolt/{run.model}"
        config = {
            "$schema": "https://opencode.ai/config.json",
            "provider": {"agentbolt": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "agentbolt gateway",
                "options": {"baseURL": run.openai_base_url, "apiKey": "{env:OPENAI_API_KEY}"},
                "models": {run.model: {"name": run.model, "tool_call": True,
                                       "limit": {"context": self.context_window, "output": self.max_output_tokens}}},
            }},
            "model": model,
            "small_model": model,
            "autoupdate": False,
            "share": "disabled",
            "permission": {"edit": "allow", "bash": "allow", "webfetch": "deny"},
        }
        files = {".config/opencode/opencode.json": orjson.dumps(config).decode()}
        argv = [run.executable, "run", "--pure", "--auto", "--model", model, "--title", self.title,
                "--dir", run.workdir]
        if run.task_fits_argv:
            argv += [run.task_text]
        else:
            files["task.md"] = run.task_text
            argv += ["-f", run.in_home("task.md"), "--", LONG_TASK_MESSAGE]
        env = {
            "OPENAI_API_KEY": run.api_key,
            "XDG_CONFIG_HOME": run.in_home(".config"),
            "XDG_DATA_HOME": run.in_home(".local/share"),
            "XDG_CACHE_HOME": run.in_home(".cache"),
            "XDG_STATE_HOME": run.in_home(".local/state"),
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
        }
        return Launch(argv=argv, env=env, files=files)
