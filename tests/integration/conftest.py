"""Fixtures of the acceptance tests: the fake OpenAI-compatible server (real HTTP on
127.0.0.1, deterministic answers with token ids) and a fresh MemoryStore."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest
from fakes.openai_server import FakeOpenAI, serve_fake_openai

from agentbolt.store.memory import MemoryStore

# LiteLLM fetches a price list from the internet on import unless told not to
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture(scope="session")
def fake_openai() -> Iterator[FakeOpenAI]:
    with serve_fake_openai() as url:
        yield url


@pytest.fixture
async def store() -> AsyncIterator[MemoryStore]:
    s = MemoryStore()
    await s.start()
    yield s
    await s.close()
