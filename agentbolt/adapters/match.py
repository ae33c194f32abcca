"""``agent_match``: choose which agents' model calls become training data.

In a multi-agent system (a planner and a solver, a LangGraph with several nodes) often
only one agent is trained while the others keep running as they are. Adapters take an
``agent_match`` pattern and keep only the calls whose agent name it matches:

* the pattern is a regular expression, applied with :func:`re.search` — so
  ``"solver"`` matches ``"solver"`` and ``"math-solver"``; anchor it (``"^solver$"``)
  to match one name exactly, or use alternation (``"planner|solver"``);
* ``None`` (the default) keeps every call, named or not;
* a call with **no** agent name never matches a pattern (not even ``".*"``): it cannot
  be told apart from the agents you did not mean to train.

Where the agent name of a call comes from is described in :mod:`agentbolt.adapters.calls`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["AgentMatcher", "agent_matcher"]


@dataclass(frozen=True)
class AgentMatcher:
    """A compiled ``agent_match``; call it with an agent name (or None)."""

    pattern: re.Pattern[str] | None

    def __call__(self, agent_name: str | None) -> bool:
        if self.pattern is None:
            return True
        if agent_name is None:
            return False
        return self.pattern.search(agent_name) is not None

    @property
    def matches_everything(self) -> bool:
        return self.pattern is None


def agent_matcher(agent_match: str | re.Pattern[str] | AgentMatcher | None) -> AgentMatcher:
    """Compile an ``agent_match`` argument; a bad regular expression is reported with
    the pattern and what to do about it."""
    if isinstance(agent_match, AgentMatcher):
        return agent_match
    if agent_match is None or isinstance(agent_match, re.Pattern):
        return AgentMatcher(agent_match)
    if not isinstance(agent_match, str):
        raise TypeError(
            f"agent_match must be a regular expression string (or None for every agent), "
            f"got {type(agent_match).__name__}"
        )
    if not agent_match:
        raise ValueError("agent_match is empty: pass None to keep every agent's calls, or a name pattern like 'solver'")
    try:
        return AgentMatcher(re.compile(agent_match))
    except re.error as err:
        raise ValueError(
            f"agent_match {agent_match!r} is not a valid regular expression ({err}); "
            f"to match a literal name use re.escape(name)"
        ) from None
