"""The verifier's reward, read as Harbor reads it: ``/logs/verifier/reward.json`` first
(an object of named numbers, or one number), else ``reward.txt`` (one number, the reward
``reward``). Every value must be a finite number; several named rewards stay named
rewards, the primary one being ``reward`` when present, else the only one, else the one
the caller names."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import orjson

from agentbolt.tasks.harbor.errors import HarborRewardError

__all__ = ["VerifierReward", "read_verifier_reward", "verifier_reward"]


@dataclass(frozen=True)
class VerifierReward:
    rewards: dict[str, float]
    primary: str

    @property
    def value(self) -> float:
        return self.rewards[self.primary]


def _number(value: object, where: Path) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise HarborRewardError(f"{where} holds {value!r}: rewards must be finite numbers")
    return float(value)


def read_verifier_reward(verifier_dir: Path, *, primary: str | None = None) -> VerifierReward:
    """The reward in ``verifier_dir`` (what the task's ``/logs/verifier/`` held)."""
    as_json, as_text = verifier_dir / "reward.json", verifier_dir / "reward.txt"
    json_text = as_json.read_text(errors="replace") if as_json.is_file() and not as_json.is_symlink() else None
    txt_text = as_text.read_text(errors="replace") if as_text.is_file() and not as_text.is_symlink() else None
    return verifier_reward(json_text, txt_text, where=verifier_dir, primary=primary)


def verifier_reward(json_text: str | None, txt_text: str | None, *, where: Path = Path("/logs/verifier"),
                    primary: str | None = None) -> VerifierReward:
    """The reward from the texts of ``reward.json`` and ``reward.txt`` (``None``: no such
    file), as read from ``where`` (named in the errors)."""
    as_json, as_text = where / "reward.json", where / "reward.txt"
    if json_text is not None:
        text = json_text.strip()
        if not text:
            raise HarborRewardError(f"{as_json} is empty: the verifier must write a number or an object of numbers")
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError:
            raise HarborRewardError(f"{as_json} is not JSON: {text[:200]!r}") from None
        if isinstance(data, dict):
            rewards = {str(k): _number(v, as_json) for k, v in data.items()}
        else:
            rewards = {"reward": _number(data, as_json)}
    elif txt_text is not None:
        text = txt_text.strip()
        try:
            rewards = {"reward": _number(float(text), as_text)}
        except ValueError:
            raise HarborRewardError(f"{as_text} holds {text[:200]!r}, not a number") from None
    else:
        raise HarborRewardError(f"the verifier wrote no reward: neither {as_text} nor {as_json} exists "
                                "(tests/test.sh must write one)")
    if not rewards:
        raise HarborRewardError(f"{as_json} holds no reward")
    chosen = primary or ("reward" if "reward" in rewards else next(iter(rewards)) if len(rewards) == 1 else None)
    if chosen is None or chosen not in rewards:
        raise HarborRewardError(f"the verifier wrote several rewards {sorted(rewards)}: say which one training uses "
                                "(primary=...)")
    return VerifierReward(rewards, chosen)
