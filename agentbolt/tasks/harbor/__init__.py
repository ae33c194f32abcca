"""Harbor task directories as a dataset (the format of Terminal-Bench's successor).

* :func:`load` — a task or a directory of tasks → :class:`HarborTask` (``rollout_input()``,
  ``rollout_config()``);
* :class:`HarborTaskConfig` — ``task.toml`` with Harbor's field names and defaults;
* :func:`read_verifier_reward` — the verifier's ``reward.txt`` / ``reward.json``, named rewards kept;
* :func:`base_images`, :func:`require_local_images` — the images an environment starts from,
  checked before a build (no registry is reachable).

Running tasks on the Docker executor (:mod:`.run`): :func:`harbor_harness` (any command
or harness profile, given the instruction), :func:`docker_inputs` (the rollout inputs),
:func:`ready` (images present and built before any claim); the environment built from
the task's Dockerfile, ``tests/`` copied in after the program, ``test.sh`` as the
verifier, the reward from ``/logs/verifier``. :mod:`.check` is ``agentbolt tasks check``
(the oracle scores 1, the untouched environment 0).
"""

from agentbolt.tasks.harbor.config import HarborTaskConfig, NetworkMode
from agentbolt.tasks.harbor.errors import HarborImageError, HarborRewardError, HarborTaskError
from agentbolt.tasks.harbor.images import DockerImages, ImageStore, base_images, require_local_images
from agentbolt.tasks.harbor.load import load
from agentbolt.tasks.harbor.rewards import VerifierReward, read_verifier_reward, verifier_reward
from agentbolt.tasks.harbor.run import HarborHarness, docker_input, docker_inputs, harbor_harness, ready, task_limits
from agentbolt.tasks.harbor.task import HarborTask

__all__ = ["load", "HarborTask", "HarborTaskConfig", "NetworkMode", "read_verifier_reward", "VerifierReward",
           "base_images", "require_local_images", "ImageStore", "DockerImages", "HarborTaskError",
           "HarborImageError", "HarborRewardError", "verifier_reward", "HarborHarness", "docker_input",
           "docker_inputs", "harbor_harness", "ready", "task_limits"]
