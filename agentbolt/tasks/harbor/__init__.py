"""Harbor task directories as a dataset (the format of Terminal-Bench's successor).

* :func:`load` — a task or a directory of tasks → :class:`HarborTask` (``rollout_input()``,
  ``rollout_config()``);
* :class:`HarborTaskConfig` — ``task.toml`` with Harbor's field names and defaults;
* :func:`read_verifier_reward` — the verifier's ``reward.txt`` / ``reward.json``, named rewards kept;
* :func:`base_images`, :func:`require_local_images` — the images an environment starts from,
  checked before a build (no registry is reachable).

Running a task (building its environment, the agent in it, ``tests/`` copied in after,
``test.sh`` as the verifier, ``agentbolt tasks check``) needs the Docker executor; see
docs/tasks-and-rewards.md for what is there today.
"""

from agentbolt.tasks.harbor.config import HarborTaskConfig, NetworkMode
from agentbolt.tasks.harbor.errors import HarborImageError, HarborRewardError, HarborTaskError
from agentbolt.tasks.harbor.images import DockerImages, ImageStore, base_images, require_local_images
from agentbolt.tasks.harbor.load import load
from agentbolt.tasks.harbor.rewards import VerifierReward, read_verifier_reward
from agentbolt.tasks.harbor.task import HarborTask

__all__ = ["load", "HarborTask", "HarborTaskConfig", "NetworkMode", "read_verifier_reward", "VerifierReward",
           "base_images", "require_local_images", "ImageStore", "DockerImages", "HarborTaskError",
           "HarborImageError", "HarborRewardError"]
