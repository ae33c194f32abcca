"""``agentlightning.algorithm`` on agentbolt: v0.3's algorithm base, ``@algo``,
``FastAlgorithm``/``Baseline`` and ``APO`` (agentbolt's, with v0.3's arguments).
``VERL`` is not provided: agentbolt trains with its own GRPO (see the migration guide)."""

from agentbolt.compat.algorithm.apo import APO
from agentbolt.compat.algorithm.base import Algorithm, V03Algorithm
from agentbolt.compat.algorithm.decorator import FunctionalAlgorithm, algo
from agentbolt.compat.algorithm.fast import Baseline, FastAlgorithm
from agentbolt.compat.resolution import module_getattr

__all__ = ["APO", "Algorithm", "Baseline", "FastAlgorithm", "FunctionalAlgorithm", "V03Algorithm", "algo"]


__getattr__ = module_getattr(__name__)  # third-party: v0.3 names defined elsewhere, or not provided (why)
