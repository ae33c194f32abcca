"""``agentbolt.controller``: the harness's old home, now :mod:`agentbolt.runner.harness`
(a Harness is an agent, so it sits next to the runner; :data:`agentbolt.aliases.MODULES`).
Importing it gives that very module, so ``from agentbolt.controller import Harness`` is
the same class."""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING

from agentbolt.aliases import MODULES

if TYPE_CHECKING:  # what type checkers see; at run time this module *is* agentbolt.runner.harness
    from agentbolt.runner.harness import *  # noqa: F403

sys.modules[__name__] = importlib.import_module(MODULES[__name__])
