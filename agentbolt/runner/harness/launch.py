"""A real harness's launch for one rollout: its profile's command line, stdin,
environment and config files (:mod:`agentbolt.runner.harness.profiles`), placed where the
program will run — a fresh ``HOME`` in its sandbox or in the run's temporary directory."""

from __future__ import annotations

import os
from pathlib import Path

from agentbolt.runner.harness.profiles import ProfileRun
from agentbolt.runner.harness.profiles.base import RunContext
from agentbolt.runner.harness.sandbox import SandboxSession
from agentbolt.runner.harness.sandbox.workspace import write_files
from agentbolt.runner.harness.templates import render_text

__all__ = ["launch_profile"]


def launch_profile(run: ProfileRun, fields: dict[str, str], env: dict[str, str], token: str, tmp: Path,
                   box: SandboxSession | None, cwd: str | None) -> tuple[list[str], bytes | None]:
    """The profile's command line and stdin for this rollout; its environment goes into
    ``env`` (with ``HOME``) and its config files into that fresh ``HOME``."""
    home = box.program_home if box else str(tmp / "home")
    context = RunContext(
        openai_base_url=env["OPENAI_BASE_URL"], api_key=token, home=home,
        workdir=box.program_workspace if box else (cwd or os.getcwd()),
        task_text=render_text(run.task, fields), model=run.model, executable=run.executable,
    )
    launch = run.profile.launch(context)
    if box is not None:
        box.prepare_home(launch.files)
    else:
        write_files(tmp / "home", launch.files)
    env.update(launch.env)
    env["HOME"] = home
    return list(launch.argv), launch.stdin
