"""The agent of ``async_speedup.py``, in a module of its own so that runner processes
can import it: model call → "tool" of heavy-tailed duration → model call; reward a hash.

Everything an attempt draws depends only on (seed, group id, member index), read from
the rollout's metadata — no counter of the process — so a rollout lasts the same in
both schedules and in any runner process.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import ssl
import time
from typing import Any

import httpx
import openai

import agentbolt

PROFILE_ENV = "ASYNC_SPEEDUP_PROFILE"
"""``<dir>:<pid>``: a runner process (any process but ``pid``, the benchmark's) importing
this module profiles itself with cProfile and writes ``<dir>/runner-<its pid>.prof`` at exit."""


def _profile_runner_process() -> None:
    import atexit
    import cProfile
    import os

    where, _, parent = os.environ.get(PROFILE_ENV, "").rpartition(":")
    if not where or str(os.getpid()) == parent:
        return
    profile = cProfile.Profile()
    profile.enable()
    atexit.register(lambda: profile.dump_stats(os.path.join(where, f"runner-{os.getpid()}.prof")))


_profile_runner_process()


def unit(*key: Any) -> float:
    """A deterministic number in [0, 1) from ``key``."""
    digest = hashlib.sha256(repr(key).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def tool_seconds(seed: int, group_id: str, index: int, scale: float) -> float:
    """90 %: 0.1–0.3 s, 10 %: 2–4 s (times ``scale``)."""
    u, v = unit(seed, group_id, index, "long"), unit(seed, group_id, index, "length")
    return scale * (2.0 + 2.0 * v if u < 0.1 else 0.1 + 0.2 * v)


def reward(seed: int, group_id: str, index: int) -> float:
    """0 or 1, half the time each: nearly every group of 8 carries signal."""
    return 1.0 if unit(seed, group_id, index, "reward") < 0.5 else 0.0


class ToolAgent:
    """Picklable (its HTTP client is made in the runner process, at the first call).

    ``trace_path``: append one JSON line per rollout there — wall-clock times of entry,
    the two model calls as the agent sees them, and exit — to compare with the store's
    claim and end times (where a rollout's time goes outside the agent).
    """

    POOLS = 64
    """HTTP clients the rollouts are spread over, each keeping up to ``POOL_SIZE``
    connections alive. One client for all rollouts (256 at once) spent ~40 % of the runner
    process's CPU in httpcore 1.0's connection pool, whose bookkeeping on every request is
    quadratic in its connections (and, with httpx's default 20 kept alive, reopened
    connections all the time); small pools keep that negligible."""
    POOL_SIZE = 8

    def __init__(self, seed: int, scale: float, trace_path: str | None = None) -> None:
        self.seed, self.scale, self.trace_path = seed, scale, trace_path
        self._http: list[httpx.AsyncClient] = []

    def __getstate__(self) -> dict[str, Any]:
        return {"seed": self.seed, "scale": self.scale, "trace_path": self.trace_path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["seed"], state["scale"], state.get("trace_path"))  # type: ignore[misc]

    async def __call__(self, task: dict[str, Any], llm: agentbolt.LLM, rollout: agentbolt.Rollout) -> float:
        group_id = str(rollout.metadata["group_id"])
        index = int(rollout.metadata["dataset_index"])  # 0..G-1 inside the group
        if not self._http:  # pools shared by the rollouts (a client per rollout builds an SSL context)
            limits = httpx.Limits(max_connections=self.POOL_SIZE, max_keepalive_connections=self.POOL_SIZE)
            ssl_context = ssl.create_default_context()  # one for all: each costs ~20 ms of CPU to build
            self._http = [httpx.AsyncClient(timeout=300, limits=limits, verify=ssl_context) for _ in range(self.POOLS)]
        http = self._http[int(unit(rollout.rollout_id) * self.POOLS)]
        client = openai.AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "none", max_retries=8,
                                    http_client=http)
        t = [time.time()]
        messages: list[Any] = [{"role": "user", "content": task["prompt"]}]
        first = await client.chat.completions.create(model=llm.model, messages=messages, max_tokens=4)
        t.append(time.time())
        await asyncio.sleep(tool_seconds(self.seed, group_id, index, self.scale))
        t.append(time.time())
        messages += [{"role": "assistant", "content": first.choices[0].message.content or ""},
                     {"role": "user", "content": "tool result: ok"}]
        await client.chat.completions.create(model=llm.model, messages=messages, max_tokens=4)
        t.append(time.time())
        if self.trace_path:
            with open(self.trace_path, "a") as f:  # noqa: ASYNC230 (one short line: appends do not interleave)
                f.write(json.dumps({"rollout_id": rollout.rollout_id, "t": t}) + "\n")
        return reward(self.seed, group_id, index)
