"""Lazy imports of the optional tracker libraries, failing with the pip command to run."""

from __future__ import annotations

import importlib
from types import ModuleType

from agentbolt.metrics.errors import MissingIntegrationError

__all__ = ["require"]


def require(module: str, integration: str, pip_command: str) -> ModuleType:
    """``import module``, or :class:`MissingIntegrationError` saying how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingIntegrationError(integration, pip_command) from exc
