"""Reading a judge's answer: scores in [0, 1] with a rationale each, or a
:class:`~agentbolt.rewards.judge.errors.MalformedJudgeAnswerError` — never a guess.

A group answer is ``{"scores": [{"id": "1", "score": 0.8, "rationale": "..."}, ...]}``
naming every trajectory exactly once; a rubric answer is ``{"score": 0.8, "rationale":
"..."}``. The JSON object may sit in a code fence or after some words (models do that);
anything else — no object, a missing, unknown or repeated id, a score that is not a
finite number in [0, 1] — is malformed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from agentbolt.rewards.judge.errors import MalformedJudgeAnswerError

__all__ = ["Score", "parse_group_answer", "parse_rubric_answer"]


@dataclass(frozen=True, slots=True)
class Score:
    """One trajectory's score and the judge's reason for it."""

    score: float
    rationale: str


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def _object(text: str) -> dict[str, Any]:
    candidates = [m.group(1) for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            data = orjson.loads(candidate.strip())
        except orjson.JSONDecodeError:
            continue
        if isinstance(data, dict):
            return data
    raise MalformedJudgeAnswerError("it holds no JSON object", text)


def _score(value: Any, where: str, text: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise MalformedJudgeAnswerError(f"the score of {where} is {value!r}, not a number", text)
    score = float(value)
    if not math.isfinite(score) or not 0.0 <= score <= 1.0:
        raise MalformedJudgeAnswerError(f"the score of {where} is {value!r}, outside [0, 1]", text)
    return score


def _rationale(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def parse_rubric_answer(text: str) -> Score:
    """The score of a rubric judge's answer."""
    data = _object(text)
    if "score" not in data:
        raise MalformedJudgeAnswerError('its JSON object has no "score"', text)
    return Score(_score(data["score"], "the trajectory", text), _rationale(data.get("rationale")))


def parse_group_answer(text: str, ids: Sequence[str]) -> dict[str, Score]:
    """``{id: Score}`` for every one of ``ids`` from a group judge's answer."""
    data = _object(text)
    entries = data.get("scores")
    if not isinstance(entries, list):
        raise MalformedJudgeAnswerError('its JSON object has no "scores" list', text)
    wanted = set(ids)
    out: dict[str, Score] = {}
    for entry in entries:
        if not isinstance(entry, Mapping):
            raise MalformedJudgeAnswerError(f"a score entry is {entry!r}, not an object", text)
        key = str(entry.get("id", ""))
        if key not in wanted:
            raise MalformedJudgeAnswerError(f"it scores trajectory {key!r}, which it was not shown "
                                            f"(ids: {', '.join(ids)})", text)
        if key in out:
            raise MalformedJudgeAnswerError(f"it scores trajectory {key!r} twice", text)
        out[key] = Score(_score(entry.get("score"), f"trajectory {key!r}", text), _rationale(entry.get("rationale")))
    missing = [i for i in ids if i not in out]
    if missing:
        raise MalformedJudgeAnswerError(f"it gives no score to trajectories {', '.join(missing)}", text)
    return out
