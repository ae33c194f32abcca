"""One Harbor task directory, read: its instruction, its ``task.toml``, where its
environment, verifier and oracle are, and the rollout input it becomes.

::

    task/
      instruction.md         what the agent is told
      task.toml              timeouts, resources, network, metadata (:mod:`.config`)
      environment/Dockerfile the environment (or [environment].docker_image)
      tests/test.sh          the verifier: copied in after the agent ends, writes /logs/verifier/reward.txt|json
      solution/solve.sh      optional oracle
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentbolt.tasks.harbor.config import HarborTaskConfig
from agentbolt.tasks.harbor.errors import HarborTaskError
from agentbolt.types import RolloutConfig

__all__ = ["HarborTask"]


@dataclass(frozen=True)
class HarborTask:
    path: Path
    instruction: str
    config: HarborTaskConfig

    @classmethod
    def read(cls, path: str | Path) -> HarborTask:
        """The task in directory ``path``; :class:`HarborTaskError` saying what is missing."""
        root = Path(path).resolve()
        toml = root / "task.toml"
        if not toml.is_file():
            raise HarborTaskError(f"{root} is not a Harbor task: it has no task.toml (`harbor tasks init` makes one)")
        try:
            config = HarborTaskConfig.model_validate(tomllib.loads(toml.read_text()))
        except tomllib.TOMLDecodeError as exc:
            raise HarborTaskError(f"{toml} is not valid TOML: {exc}") from None
        except ValidationError as exc:
            raise HarborTaskError(f"{toml} does not follow Harbor's task schema: {exc}") from None
        if config.steps:
            raise HarborTaskError(f"{root} is a multi-step Harbor task ([[steps]]): agentbolt runs single-step tasks; "
                                  "split it into one task per step")
        instruction = root / "instruction.md"
        if not instruction.is_file():
            raise HarborTaskError(f"{root} has no instruction.md: the agent would be told nothing")
        task = cls(root, instruction.read_text(), config)
        if task.dockerfile is None and config.environment.docker_image is None:
            raise HarborTaskError(f"{root} has no environment: add environment/Dockerfile (or a compose file), or "
                                  "[environment].docker_image in task.toml")
        if not task.test_script.is_file():
            raise HarborTaskError(f"{root} has no verifier: tests/test.sh is missing")
        return task

    # ------------------------------------------------------------------ where things are
    @property
    def name(self) -> str:
        """``[task].name`` when the task is a package, else the directory's name."""
        return self.config.task.name if self.config.task is not None else self.path.name

    @property
    def environment_dir(self) -> Path:
        return self.path / "environment"

    @property
    def dockerfile(self) -> Path | None:
        found = self.environment_dir / "Dockerfile"
        return found if found.is_file() else None

    @property
    def compose_file(self) -> Path | None:
        for name in ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml"):
            if (self.environment_dir / name).is_file():
                return self.environment_dir / name
        return None

    @property
    def tests_dir(self) -> Path:
        return self.path / "tests"

    @property
    def test_script(self) -> Path:
        return self.tests_dir / "test.sh"

    @property
    def solve_script(self) -> Path | None:
        found = self.path / "solution" / "solve.sh"
        return found if found.is_file() else None

    # ------------------------------------------------------------------ as a rollout
    def rollout_input(self) -> dict[str, Any]:
        """What a rollout of this task gets as its input (JSON): the instruction and the
        task's name and directory (the environment is built from the directory; the
        verifier never reaches the agent)."""
        return {"harbor_task": self.name, "instruction": self.instruction, "task_dir": str(self.path),
                "metadata": dict(self.config.metadata)}

    def rollout_config(self, *, max_attempts: int = 3) -> RolloutConfig:
        """Limits for the store: the agent's, the verifier's and the build's timeouts in
        sum (None when the agent has none, as in Harbor)."""
        agent = self.config.agent.timeout_sec
        if agent is None:
            return RolloutConfig(max_attempts=max_attempts)
        total = agent + self.config.verifier.timeout_sec + self.config.environment.build_timeout_sec
        return RolloutConfig(timeout_seconds=total, max_attempts=max_attempts)
