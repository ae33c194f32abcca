"""Store backends behind one interface. ``open_store(url)`` picks one from a URL."""

from agentbolt.store.base import Store
from agentbolt.store.errors import (
    ConflictError,
    InvalidRequestError,
    InvalidTransitionError,
    NotFoundError,
    StoreError,
    StoreUnavailableError,
)
from agentbolt.store.memory import MemoryStore
from agentbolt.store.url import open_store

__all__ = [
    "ConflictError",
    "InvalidRequestError",
    "InvalidTransitionError",
    "MemoryStore",
    "NotFoundError",
    "Store",
    "StoreError",
    "StoreUnavailableError",
    "open_store",
]
