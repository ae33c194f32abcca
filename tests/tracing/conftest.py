"""Fixtures for the tracing tests: a store, a started tracer, and the fake
OpenAI-compatible server (real HTTP on 127.0.0.1)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest
from fakes.openai_server import FakeOpenAI, serve_fake_openai

from agentbolt.store.memory import MemoryStore
from agentbolt.tracing import Tracer

# LiteLLM fetches a price list from the internet on import unless told not to
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture(scope="session")
def fake_openai() -> Iterator[FakeOpenAI]:
    with serve_fake_openai() as url:
        yield url


@pytest.fixture
async def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
async def tracer(store: MemoryStore) -> AsyncIterator[Tracer]:
    t = Tracer(store, flush_interval=0.01)
    t.start()
    yield t
    await t.aclose()
