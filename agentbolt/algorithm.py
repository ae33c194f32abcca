"""``agentbolt.algorithm``: another name for :mod:`agentbolt.algorithms` (both spellings
appear in guides; :data:`agentbolt.aliases.MODULES`). Importing it gives that very module,
so every name — the learning algorithms imported on first use — is the same object."""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING

from agentbolt.aliases import MODULES

if TYPE_CHECKING:  # what type checkers see; at run time this module *is* agentbolt.algorithms
    from agentbolt.algorithms import *  # noqa: F403

sys.modules[__name__] = importlib.import_module(MODULES[__name__])
