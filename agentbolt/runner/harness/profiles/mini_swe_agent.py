"""mini-SWE-agent (``mini``, PyPI ``mini-swe-agent``), tested with 2.4.6.

Its ``bash`` tool over chat completions through litellm (``openai/{model}``), which
reads ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``. A config file in ``HOME`` (merged over
the built-in ``mini.yaml``) turns off cost tracking (the gateway's model has no price),
the cost limit and the first-run setup; ``-y --exit-immediately`` runs without asking.
The task goes on ``-t``; one too long for a command line goes in the config file
(``run.task``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import orjson

from agentbolt.runner.harness.profiles.base import Install, Launch, RunContext, TaskInput, WireProtocol
from agentbolt.runner.harness.profiles.install import Packaged

__all__ = ["MiniSweAgent"]


@dataclass(frozen=True)
class MiniSweAgent(Packaged):
    """``step_limit``: most model calls per episode (0: none); ``command_timeout``:
    seconds each bash command may run."""

    step_limit: int = 30
    command_timeout: int = 60

    name: ClassVar[str] = "mini-swe-agent"
    tested_version: ClassVar[str] = "2.4.6"
    install: ClassVar[Install] = Install("pypi", "mini-swe-agent", "2.4.6", "mini", python="3.12")
    protocol: ClassVar[WireProtocol] = "openai-chat"
    task_input: ClassVar[TaskInput] = TaskInput.ARGV
    memory_mb: ClassVar[int] = 2048

    def launch(self, run: RunContext) -> Launch:
        config: dict[str, object] = {
            "agent": {"cost_limit": 0, "step_limit": self.step_limit, "mode": "yolo", "confirm_exit": False},
            "model": {"model_name": f"openai/{run.model}", "cost_tracking": "ignore_errors",
                      "model_kwargs": {"api_base": run.openai_base_url, "drop_params": True}},
            "environment": {"cwd": run.workdir, "timeout": self.command_timeout},
        }
        argv = [run.executable, "-y", "--exit-immediately", "-m", f"openai/{run.model}",
                "-c", "mini.yaml", "-c", run.in_home("agentbolt.yaml"), "-o", run.in_home("trajectory.json")]
        if run.task_fits_argv:
            argv += ["-t", run.task_text]
        else:
            config["run"] = {"task": run.task_text}
        env = {
            "MSWEA_CONFIGURED": "true",  # no first-run setup dialogue
            "MSWEA_SILENT_STARTUP": "1",
            "MSWEA_COST_TRACKING": "ignore_errors",
            "MSWEA_GLOBAL_CONFIG_DIR": run.in_home(".config/mini-swe-agent"),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # litellm fetches its price list from the network otherwise
            "OPENAI_API_BASE": run.openai_base_url,
            "OPENAI_API_KEY": run.api_key,
            "PAGER": "cat",
        }
        # JSON is YAML: mini reads any ``*.yaml`` path
        return Launch(argv=argv, env=env, files={"agentbolt.yaml": orjson.dumps(config).decode()})
