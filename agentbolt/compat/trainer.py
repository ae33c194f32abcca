"""``agentlightning.trainer`` on agentbolt: agentbolt's :class:`~agentbolt.Trainer`
accepts v0.3's arguments (:mod:`.trainer_args`)."""

from agentbolt.compat.components import build_component
from agentbolt.trainer import Trainer

__all__ = ["Trainer", "build_component"]
