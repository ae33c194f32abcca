"""``agentlightning.algorithm`` on agentbolt: v0.3's algorithm base, ``@algo``,
``FastAlgorithm``/``Baseline`` and ``APO`` (agentbolt's, with v0.3's arguments).
``VERL`` is not provided: agentbolt trains with its own GRPO (see the migration guide)."""

from agentbolt.compat.algorithm.apo import APO
from agentbolt.compat.algorithm.base import Algorithm, V03Algorithm
from agentbolt.compat.algorithm.decorator import FunctionalAlgorithm, algo
from agentbolt.compat.algorithm.fast import Baseline, FastAlgorithm
from agentbolt.compat.resolution import module_getattr

__all__ = ["APO", "Algorithm", "Baseline", "FastAlgorithm", "FunctionalAlgorithm", "V03Algorithm", "algo"]


# third-party: v0.3's names, resolved on first use
__getattr__ = module_getattr(__name__)  # v0.3 names of this module defined elsewhere, or not provided (why)
