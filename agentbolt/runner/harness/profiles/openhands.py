"""OpenHands SDK (PyPI ``openhands-sdk`` + ``openhands-tools``), tested with 1.58.2.

The SDK is a library; its standard agent (``get_default_agent``: terminal, file editor,
task tracker, its condenser; no browser) runs on the task through
:mod:`~agentbolt.runner.harness.profiles.openhands_main`, a file of the SDK's documented
calls only, with the SDK's own Python — 3.12 or later, which the sandbox is told to
mount (the venv's base interpreter). Chat completions through litellm
(``openai/{model}``, ``OPENAI_BASE_URL``). The task goes by file (``HOME/task.md``), so
any length works.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from agentbolt.runner.harness.profiles.base import Install, Launch, RunContext, TaskInput, WireProtocol
from agentbolt.runner.harness.profiles.install import Packaged

__all__ = ["OpenHands"]

MAIN = Path(__file__).with_name("openhands_main.py")


@dataclass(frozen=True)
class OpenHands(Packaged):
    """``max_steps``: most agent iterations; ``context_window``: the model's context as
    the SDK is told it (its condenser summarises the history before it is reached)."""

    max_steps: int = 30
    context_window: int = 32768

    name: ClassVar[str] = "openhands"
    tested_version: ClassVar[str] = "1.58.2"
    install: ClassVar[Install] = Install("pypi", "openhands-sdk", "1.58.2", "python",
                                         extra=("openhands-tools==1.58.2",), python="3.12")
    protocol: ClassVar[WireProtocol] = "openai-chat"
    task_input: ClassVar[TaskInput] = TaskInput.FILE
    memory_mb: ClassVar[int] = 2048

    def launch(self, run: RunContext) -> Launch:
        env = {
            "AGENTBOLT_OPENHANDS_MODEL": run.model,
            "AGENTBOLT_OPENHANDS_MAX_STEPS": str(self.max_steps),
            "AGENTBOLT_OPENHANDS_CONTEXT": str(self.context_window),
            "OPENAI_BASE_URL": run.openai_base_url,
            "OPENAI_API_KEY": run.api_key,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LOG_LEVEL": "WARNING",
        }
        return Launch(argv=[run.executable, str(MAIN), run.in_home("task.md")], env=env,
                      files={"task.md": run.task_text})
