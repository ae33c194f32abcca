"""Claude Code (``claude -p``, npm ``@anthropic-ai/claude-code``), tested with 2.1.332.

Anthropic Messages through the gateway: ``ANTHROPIC_BASE_URL`` is the attempt's URL
(Claude Code appends ``/v1/messages``), ``ANTHROPIC_API_KEY`` the scoped token (sent as
``x-api-key``); every model it would pick (the main one, the small/fast one for titles
and summaries) is the gateway's. Print mode (``-p``) with permissions skipped
(``--dangerously-skip-permissions``; ``IS_SANDBOX=1`` allows that as root: agentbolt's
sandbox is the boundary); no auto-update, telemetry or error reporting; its settings in
``HOME/.claude``. The task goes on stdin, so any length works.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from agentbolt.runner.harness.profiles.base import Install, Launch, RunContext, TaskInput, WireProtocol
from agentbolt.runner.harness.profiles.install import Packaged

__all__ = ["ClaudeCode"]


@dataclass(frozen=True)
class ClaudeCode(Packaged):
    """``max_turns``: most agent turns per episode; ``max_output_tokens``: the cap per call."""

    max_turns: int = 30
    max_output_tokens: int | None = None

    name: ClassVar[str] = "claude-code"
    tested_version: ClassVar[str] = "2.1.332"
    install: ClassVar[Install] = Install("npm", "@anthropic-ai/claude-code", "2.1.332", "claude")
    protocol: ClassVar[WireProtocol] = "anthropic-messages"
    task_input: ClassVar[TaskInput] = TaskInput.STDIN
    memory_mb: ClassVar[int] = 4096

    def launch(self, run: RunContext) -> Launch:
        argv = [run.executable, "-p", "--dangerously-skip-permissions", "--model", run.model,
                "--max-turns", str(self.max_turns), "--output-format", "text"]
        env = {
            "ANTHROPIC_BASE_URL": run.attempt_url,
            "ANTHROPIC_API_KEY": run.api_key,
            "ANTHROPIC_MODEL": run.model,
            "ANTHROPIC_SMALL_FAST_MODEL": run.model,
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": run.model,
            "ANTHROPIC_DEFAULT_SONNET_MODEL": run.model,
            "ANTHROPIC_DEFAULT_OPUS_MODEL": run.model,
            "CLAUDE_CONFIG_DIR": run.in_home(".claude"),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "IS_SANDBOX": "1",
        }
        if self.max_output_tokens:
            env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(self.max_output_tokens)
        return Launch(argv=argv, env=env, stdin=run.task_text.encode("utf-8"))
