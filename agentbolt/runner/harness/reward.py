"""Where a harness run's reward comes from, and how its text is read.

Three sources, in order of preference:

1. an **evaluator** command run after the program exits (the agent under training does
   not grade itself); it prints the reward;
2. the file ``$AGENTBOLT_REWARD_FILE`` the program wrote;
3. a ``POST $AGENTBOLT_REWARD_URL`` the program made (stored by the server as a reward
   span directly, so nothing is read here).

Reward text, from a file or an evaluator's stdout, is a number (``0.75``) or JSON:
``{"value": 0.75}`` or ``{"rewards": {"acc": 1.0, "fmt": 0.5}, "primary": "acc"}``.
For an evaluator the last non-empty line of its output counts, so it may log before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import orjson

from agentbolt.runner.harness.untrusted import LeftFileError, read_left

__all__ = ["REWARD_FILE_LIMIT", "Reward", "RewardFormatError", "last_line", "parse_reward", "read_reward_file"]


class RewardFormatError(ValueError):
    """Reward text that is neither a number nor one of the JSON forms."""


@dataclass(frozen=True)
class Reward:
    """Named rewards and which one counts."""

    rewards: dict[str, float]
    primary: str

    @property
    def value(self) -> float:
        return self.rewards[self.primary]


_FORMS = 'a number (0.75), {"value": 0.75} or {"rewards": {"acc": 1.0}, "primary": "acc"}'


def parse_reward(text: str, *, source: str) -> Reward:
    """Read reward text; ``source`` names where it came from, for the error message."""
    stripped = text.strip()
    if not stripped:
        raise RewardFormatError(f"{source} is empty: write {_FORMS}")
    try:
        data = orjson.loads(stripped)
    except orjson.JSONDecodeError:
        raise RewardFormatError(f"{source} holds {_preview(stripped)}, which is not a reward: write {_FORMS}") from None
    if isinstance(data, (int, float)) and not isinstance(data, bool):
        return Reward({"reward": _finite(data, source)}, "reward")
    if isinstance(data, dict):
        if "value" in data and isinstance(data["value"], (int, float)) and not isinstance(data["value"], bool):
            return Reward({"reward": _finite(data["value"], source)}, "reward")
        rewards = data.get("rewards")
        if isinstance(rewards, dict) and rewards:
            values = {str(k): _finite(v, source) for k, v in rewards.items()}
            primary = data.get("primary")
            if primary is None and len(values) == 1:
                primary = next(iter(values))
            if not isinstance(primary, str) or primary not in values:
                raise RewardFormatError(f"{source}: several rewards need a \"primary\" that names one of them "
                                        f"({sorted(values)})")
            return Reward(values, primary)
    raise RewardFormatError(f"{source} holds {_preview(stripped)}, which is not a reward: write {_FORMS}")


REWARD_FILE_LIMIT = 65536
"""Bytes a reward file may hold (a number or a small JSON object)."""


def read_reward_file(path: Path) -> Reward | None:
    """The reward the program wrote to ``path``, or ``None`` if it wrote none.

    Read with :func:`~agentbolt.runner.harness.untrusted.read_left` (the program chose
    what lies there): a link, a FIFO or a device there, or more than
    :data:`REWARD_FILE_LIMIT` bytes, is a :class:`RewardFormatError` naming what it is,
    never read."""
    try:
        data = read_left(path.parent, path.name, limit=REWARD_FILE_LIMIT)
    except LeftFileError as exc:
        raise RewardFormatError(f"reward file: {exc}") from None
    if data is None:
        return None
    return parse_reward(data.decode("utf-8", errors="replace"), source=f"reward file {path}")


def last_line(text: str) -> str:
    """The last non-empty line of ``text`` (an evaluator's verdict)."""
    for line in reversed(text.splitlines()):
        if line.strip():
            return line
    return ""


def _finite(value: object, source: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RewardFormatError(f"{source}: reward {value!r} is not a number")
    number = float(value)
    if not math.isfinite(number):
        raise RewardFormatError(f"{source}: reward {number} is not finite")
    return number


def _preview(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")
