"""Shared fixtures for runner tests: a fresh MemoryStore that notices deadlines fast."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentbolt.store.memory import MemoryStore


@pytest.fixture
async def store() -> AsyncIterator[MemoryStore]:
    s = MemoryStore(deadline_check_interval=0.02)
    await s.start()
    yield s
    await s.close()
