"""aider (PyPI ``aider-chat``), tested with 0.86.2.

Chat completions through litellm (``openai/{model}``, ``--openai-api-base``); edits as
SEARCH/REPLACE blocks in the model's text (``--edit-format diff``) applied by aider
itself. ``--no-git`` because the workspace has no ``.git`` (aider would otherwise try to
create one and commit); ``--yes-always`` answers its questions (adding a file the model
edits to the chat); no update check, analytics, release notes, pretty output or
streaming; its histories go into ``HOME``, not the workspace. The task goes on
``--message``; one too long for a command line in ``--message-file``. ``files``: paths
(relative to the workspace) added to the chat from the start — without git aider
builds no repository map, so naming the files to edit helps a small model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import orjson

from agentbolt.runner.harness.profiles.base import Install, Launch, RunContext, TaskInput, WireProtocol
from agentbolt.runner.harness.profiles.install import Packaged

__all__ = ["Aider"]


@dataclass(frozen=True)
class Aider(Packaged):
    files: tuple[str, ...] = ()
    edit_format: str = "diff"
    context_window: int = 8192

    name: ClassVar[str] = "aider"
    tested_version: ClassVar[str] = "0.86.2"
    install: ClassVar[Install] = Install("pypi", "aider-chat", "0.86.2", "aider", python="3.12")
    protocol: ClassVar[WireProtocol] = "openai-chat"
    task_input: ClassVar[TaskInput] = TaskInput.ARGV
    memory_mb: ClassVar[int] = 2048

    def launch(self, run: RunContext) -> Launch:
        model = f"openai/{run.model}"
        metadata = {model: {"max_input_tokens": self.context_window, "max_tokens": self.context_window,
                            "input_cost_per_token": 0, "output_cost_per_token": 0, "litellm_provider": "openai",
                            "mode": "chat"}}
        files = {".aider/model-metadata.json": orjson.dumps(metadata).decode()}
        argv = [
            run.executable, "--model", model, "--openai-api-base", run.openai_base_url,
            "--edit-format", self.edit_format, "--no-git", "--yes-always", "--no-auto-commits", "--no-dirty-commits",
            "--no-check-update", "--analytics-disable", "--no-show-model-warnings", "--no-show-release-notes",
            "--no-pretty", "--no-stream", "--no-fancy-input", "--no-detect-urls", "--no-suggest-shell-commands",
            "--map-tokens", "0", "--model-metadata-file", run.in_home(".aider/model-metadata.json"),
            "--chat-history-file", run.in_home(".aider/chat.md"),
            "--input-history-file", run.in_home(".aider/input.txt"),
            "--llm-history-file", run.in_home(".aider/llm.txt"),
        ]
        if run.task_fits_argv:
            argv += ["--message", run.task_text]
        else:
            files[".aider/task.md"] = run.task_text
            argv += ["--message-file", run.in_home(".aider/task.md")]
        argv += list(self.files)
        env = {
            "OPENAI_API_KEY": run.api_key,
            "OPENAI_API_BASE": run.openai_base_url,
            "AIDER_ANALYTICS": "false",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no price list from the network
        }
        return Launch(argv=argv, env=env, files=files)
