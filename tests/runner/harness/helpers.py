"""Test helpers: a served MemoryStore, a runner loop over a few tasks, script files."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from fakes.openai_server import serve_fake_openai

from agentbolt.engines import VLLMEngine
from agentbolt.gateway import Gateway
from agentbolt.runner.runner import Runner
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.memory import MemoryStore
from agentbolt.types import Rollout, RolloutConfig, RolloutCreate

ADMIN = "admin-secret"
PY = sys.executable


class Served:
    """A MemoryStore the test drives directly, also served over HTTP at ``url``."""

    def __init__(self, store: MemoryStore, url: str, gateway: Gateway | None = None) -> None:
        self.store = store
        self.url = url
        self.gateway = gateway

    async def run(
        self,
        agent: Any,
        tasks: Sequence[Any],
        *,
        config: RolloutConfig | None = None,
        concurrency: int = 4,
    ) -> list[Rollout]:
        """Enqueue ``tasks``, run them with an in-process runner until done, return them."""
        created = await self.store.enqueue_rollouts(
            [RolloutCreate(input=t, config=config or RolloutConfig()) for t in tasks]
        )
        runner = Runner(agent, store=self.store, concurrency=concurrency, heartbeat_interval=0.5, poll_interval=0.05)
        await runner.run(stop_when_idle=True)
        if self.gateway is not None:  # as an algorithm does: the gateway's spans are written in the background
            await self.gateway.flush()
        return [await self.store.get_rollout(r.rollout_id) for r in created]


@pytest.fixture
def served() -> Iterator[Served]:
    """Store + server + gateway in front of the fake OpenAI server."""
    store = MemoryStore()
    with serve_fake_openai() as llm:
        gateway = Gateway(VLLMEngine(str(llm)))
        with serve_in_thread(store, admin_token=ADMIN, gateway=gateway) as url:
            yield Served(store, url, gateway)


def script(tmp_path: Path, name: str, body: str) -> str:
    """Write a Python script into ``tmp_path``; returns its path."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)
