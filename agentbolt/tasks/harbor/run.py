"""Harbor tasks run: each rollout's program in the task's environment on the Docker
executor, ``tests/test.sh`` after it as the verifier, the reward from ``/logs/verifier``.

::

    tasks = harbor.load("examples/harbor_tasks")
    harness = harbor.harbor_harness(tasks, ["sh", "agent.sh", "{instruction}"])  # or profile="codex"
    harbor.ready(tasks, harness)                     # images present and built, before any claim
    Trainer(algorithm=GRPO(...)).fit(harness, harbor.docker_inputs(tasks))

What each task setting becomes:

* ``environment/Dockerfile`` — built on the Docker Engine (task field ``dockerfile``,
  never pulled); its ``FROM`` images must be on this machine
  (:class:`~agentbolt.tasks.harbor.errors.HarborImageError` names the first that is
  not). ``[environment].docker_image`` is used as it is. The image needs ``/bin/sh`` and
  ``python3`` (agentbolt's init and this verifier run on them).
* ``instruction.md`` — the task field ``instruction`` (``{instruction}`` in a command,
  the task text of a profile, ``$AGENTBOLT_TASK``); ``workdir`` — the environment's
  working directory (``[environment].workdir``, else the Dockerfile's last ``WORKDIR``).
  The program itself starts in the executor's ``/workspace``.
* ``[agent].timeout_sec`` / ``[verifier].timeout_sec`` — the harness's ``timeout`` /
  the verifier's limit (the largest over the tasks for the harness; each task's own for
  its ``test.sh``); ``[environment].cpus`` / ``memory_mb`` — the container's limits (the
  largest over the tasks); ``[environment].env`` — the program's and the verifier's
  environment, ``[verifier].env`` the verifier's.
* the network — every container has none but the gateway relay: ``no-network`` holds
  as asked; a task asking for ``public`` or ``allowlist`` runs without it (logged).
  ``storage_mb`` and ``build_timeout_sec`` are not applied; ``gpus`` > 0 is refused.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from agentbolt.runner.harness import Harness
from agentbolt.runner.harness.docker import ContainerLimits, DockerExecutor
from agentbolt.runner.harness.errors import EvaluatorError
from agentbolt.runner.harness.local import ProcessResult, ProcessSpec
from agentbolt.runner.harness.profiles import HarnessProfile
from agentbolt.runner.harness.reward import Reward, last_line
from agentbolt.runner.harness.templates import Command
from agentbolt.tasks.harbor.config import NetworkMode
from agentbolt.tasks.harbor.errors import HarborRewardError, HarborTaskError
from agentbolt.tasks.harbor.images import DockerImages, ImageStore, require_local_images
from agentbolt.tasks.harbor.task import HarborTask
from agentbolt.tasks.harbor.verifier import VERIFY, reward_of

__all__ = ["HIDDEN_FIELDS", "HarborHarness", "docker_input", "docker_inputs", "harbor_harness", "ready",
           "task_limits", "workdir_of"]

log = logging.getLogger("agentbolt.tasks.harbor")

HIDDEN_FIELDS = ("task_dir", "dockerfile", "image", "tests", "harbor_verifier", "evaluate_in", "workspace")
"""Task fields the program never sees (where the verifier is, how it runs)."""
EVALUATOR = ["python3", "-I", "-c", VERIFY.replace("{", "{{").replace("}", "}}"), "{harbor_verifier}"]
_WORKDIR = re.compile(r"^\s*WORKDIR\s+(\S+)\s*$", re.IGNORECASE | re.MULTILINE)


def workdir_of(task: HarborTask) -> str:
    """The environment's working directory: ``[environment].workdir``, else the
    Dockerfile's last absolute ``WORKDIR``, else ``/``."""
    if task.config.environment.workdir:
        return task.config.environment.workdir
    found = _WORKDIR.findall(task.dockerfile.read_text()) if task.dockerfile is not None else []
    return found[-1] if found and found[-1].startswith("/") else "/"


def docker_input(task: HarborTask, *, workspace: str | Path | None = None) -> dict[str, Any]:
    """The rollout input that runs ``task`` on the Docker executor: :meth:`HarborTask.rollout_input`
    plus the environment to build, the tests, the verifier's settings and the working
    directory; ``workspace`` — a directory copied to ``/workspace`` for the program."""
    env = task.config.environment
    data = {**task.rollout_input(), "workdir": workdir_of(task), "tests": str(task.tests_dir),
            "evaluate_in": "program"}
    if env.docker_image:
        data["image"] = env.docker_image
    else:
        data["dockerfile"] = str(task.environment_dir)
    data["harbor_verifier"] = orjson.dumps({
        "env": {**env.env, **task.config.verifier.env}, "timeout": task.config.verifier.timeout_sec,
        "workdir": data["workdir"]}).decode()
    if workspace is not None:
        data["workspace"] = str(Path(workspace).absolute())
    return data


def docker_inputs(tasks: Sequence[HarborTask]) -> list[dict[str, Any]]:
    return [docker_input(t) for t in tasks]


class HarborHarness(Harness):
    """A :class:`Harness` whose evaluator is a Harbor verifier: the reward is what
    ``test.sh`` left in ``/logs/verifier`` (``primary_reward`` names the one training
    uses when ``reward.json`` holds several without ``reward``)."""

    def __init__(self, command: Command, *, primary_reward: str | None = None, **options: Any) -> None:
        super().__init__(command, **options)
        self.primary_reward = primary_reward
        self._images_checked: set[str] = set()

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._images_checked = set()

    async def training_rollout(self, task: Any) -> float | None:  # type: ignore[override]
        if isinstance(task, Mapping) and task.get("task_dir") and task["task_dir"] not in self._images_checked:
            import asyncio

            await asyncio.to_thread(require_local_images, HarborTask.read(task["task_dir"]), DockerImages())
            self._images_checked.add(str(task["task_dir"]))
        return await super().training_rollout(task)

    def verdict(self, spec: ProcessSpec, result: ProcessResult) -> Reward:
        if result.timed_out or result.exit_code != 0:
            return super().verdict(spec, result)  # raises, saying why
        try:
            found = reward_of(last_line(result.stdout.decode("utf-8", "replace")), primary=self.primary_reward)
        except HarborRewardError as exc:
            raise EvaluatorError(str(exc)) from None
        return Reward(dict(found.rewards), found.primary)


def _settings(tasks: Sequence[HarborTask]) -> dict[str, Any]:
    """The harness options the tasks ask for (see the module docstring)."""
    if not tasks:
        raise HarborTaskError("no Harbor task given")
    env: dict[str, str] = {}
    for task in tasks:
        environment = task.config.environment
        if environment.gpus:
            raise HarborTaskError(f"task {task.name!r} asks for {environment.gpus} GPU(s); the Docker executor "
                                  "gives containers none")
        if environment.network != NetworkMode.NO_NETWORK:
            log.info("task %r asks for the network %r; its container has none but the model gateway",
                     task.name, environment.network.value)
        for key, value in environment.env.items():
            if env.setdefault(key, value) != value:
                raise HarborTaskError(f"the tasks set [environment].env {key} differently ({env[key]!r}, {value!r}); "
                                      "run them with separate harnesses")
    agent = [t.config.agent.timeout_sec for t in tasks if t.config.agent.timeout_sec is not None]
    verifier = max(t.config.verifier.timeout_sec for t in tasks)
    return {"timeout": max(agent) if agent else 600.0, "evaluator_timeout": verifier + 30.0, "env": env}


def task_limits(tasks: Sequence[HarborTask], base: ContainerLimits | None = None) -> ContainerLimits:
    """``base`` (default :class:`ContainerLimits`) with the largest ``cpus`` and ``memory_mb`` the tasks ask for."""
    base = base or ContainerLimits()
    cpus = [float(t.config.environment.cpus) for t in tasks if t.config.environment.cpus]
    memory = [t.config.environment.memory_mb for t in tasks if t.config.environment.memory_mb]
    update: dict[str, Any] = {}
    if cpus:
        update["cpus"] = max(cpus)
    if memory:
        update["memory_mb"] = max(memory)
    return base.model_copy(update=update)


def harbor_harness(
    tasks: Sequence[HarborTask],
    command: Command | None = None,
    *,
    profile: str | HarnessProfile | None = None,
    executor: DockerExecutor | None = None,
    primary_reward: str | None = None,
    **options: Any,
) -> HarborHarness:
    """A harness that runs ``command`` (or the harness ``profile``, given the instruction)
    on ``tasks``' environments with their verifiers (rollout inputs: :func:`docker_inputs`).
    ``executor`` defaults to a :class:`DockerExecutor` with the tasks' limits; ``options``
    are :class:`Harness`'s and override what the tasks ask for."""
    if (command is None) == (profile is None):
        raise ValueError("give the program: a command, or profile= (a harness profile's name)")
    asked = _settings(tasks)
    settings: dict[str, Any] = {**asked, "name": "harbor", **options}
    settings.setdefault("task_hidden", HIDDEN_FIELDS)
    settings["env"] = {**asked["env"], **options.get("env", {})}
    executor = executor or DockerExecutor(limits=task_limits(tasks))
    if profile is not None:
        settings["name"] = options.get("name", f"harbor:{profile if isinstance(profile, str) else profile.name}")
        made = HarborHarness.for_(profile, task="{instruction}", evaluator=EVALUATOR, executor=executor,
                                  primary_reward=primary_reward, **settings)
        assert isinstance(made, HarborHarness)
        return made
    assert command is not None
    return HarborHarness(command, evaluator=EVALUATOR, executor=executor, primary_reward=primary_reward, **settings)


def ready(tasks: Sequence[HarborTask], harness: Harness, images: ImageStore | None = None) -> list[str]:
    """Before any claim: every task's base images are here (:class:`HarborImageError`
    naming the first that is not), and its environment is built and can run agentbolt's
    init on ``harness``'s Docker executor. Returns the image tags."""
    images = images or DockerImages()
    for task in tasks:
        require_local_images(task, images)
    if not isinstance(harness.executor, DockerExecutor):
        raise HarborTaskError(f"Harbor tasks run on the Docker executor, not {type(harness.executor).__name__}")
    return harness.executor.check_ready(docker_inputs(tasks))
