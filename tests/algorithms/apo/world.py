"""The APO tests' world: a room-booking task whose reward says whether the prompt
mentions the word the task needs, so the optimum is known, and helpers to run APO."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import agentbolt
from agentbolt import LLM, PromptTemplate, Rollout
from agentbolt.algorithms import APO, APOConfig, APOResult
from agentbolt.store.memory import MemoryStore
from agentbolt.types import Resources

WORDS = ("quiet", "window", "desk", "lamp")
INITIAL = "Pick a room for {request} among {rooms}."


def task(word: str, i: int = 0, **extra: Any) -> dict[str, Any]:
    return {"request": f"meeting {i} that needs a {word}", "rooms": "A, B, C", "needs": word, **extra}


def tasks(words: tuple[str, ...] = WORDS, copies: int = 2) -> list[dict[str, Any]]:
    return [task(w, i) for i in range(copies) for w in words]


class Calls:
    """What the agent was run with: (mode, template) per rollout."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list[tuple[str, str]] = []

    def add(self, mode: str, template: str) -> None:
        with self.lock:
            self.items.append((mode, template))

    def of(self, mode: str) -> list[str]:
        return [t for m, t in self.items if m == mode]


CALLS = Calls()


@agentbolt.rollout
def room_agent(task: dict[str, Any], prompt_template: PromptTemplate, rollout: Rollout) -> float:
    """Formats the prompt as a real agent would (an unknown placeholder raises), then is
    rewarded 1 when the prompt mentions what the task needs."""
    prompt_template.format(**task)
    CALLS.add(str(rollout.mode), prompt_template.template)
    if task.get("crash"):
        raise RuntimeError("the booking service is down")  # an infrastructure failure, not a 0
    if "forbids" in task and task["forbids"] in prompt_template.template:
        return 0.0
    return 1.0 if task["needs"] in prompt_template.template else 0.0


def config(tmp_path: Path, **kw: Any) -> APOConfig:
    base: dict[str, Any] = {"beam_width": 2, "branch_factor": 2, "rounds": 2, "train_batch_size": 4,
                            "val_batch_size": None, "max_failures_shown": 1, "run_dir": str(tmp_path / "run"),
                            "loggers": ["jsonl"], "progress": False, "llm_retry_backoff": 0.01}
    return APOConfig(**{**base, **kw})


def run_apo(apo: APO, train: list[Any], val: list[Any], *, store: MemoryStore | None = None,
            **trainer: Any) -> APOResult:
    CALLS.items.clear()
    result = agentbolt.Trainer(algorithm=apo, store=store, n_runners=2, **trainer).fit(room_agent, train, val)
    assert isinstance(result, APOResult)
    return result


def resources(store: MemoryStore) -> list[Resources]:
    return sorted(asyncio.run(store.query_resources(limit=1000)).items, key=lambda r: r.version)


def critic(url: str) -> LLM:
    return LLM(endpoint=url, model="scripted-critic", api_key="sk-test")
