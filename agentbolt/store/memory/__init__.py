"""The in-memory backend: :class:`MemoryStore`, the whole store in Python dicts (tests,
short in-process jobs, and the reference the other backends are checked against)."""

from agentbolt.store.memory.store import MemoryStore

__all__ = ["MemoryStore"]
