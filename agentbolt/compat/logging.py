"""v0.3's logging set-up (``setup_logging``, ``setup_module_logging``, ``configure_logger``):
configure the ``agentbolt`` logger hierarchy (and ``agentlightning``, for code that logs
under v0.3's name) with a console handler."""

from __future__ import annotations

import logging
import sys
import weakref
from typing import Any

__all__ = ["configure_logger", "setup", "setup_module"]

_NAMES = ("agentbolt", "agentlightning")


def _handler(color: bool) -> logging.Handler:
    if color:
        from rich.console import Console
        from rich.logging import RichHandler

        return RichHandler(console=Console(stderr=True), show_path=False)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s [%(levelname)s] (%(name)s) %(message)s"))
    return handler


_OURS: weakref.WeakSet[logging.Handler] = weakref.WeakSet()
"""The handlers :func:`setup` added, replaced when it is called again."""


def setup(level: int | str = "INFO", *, console: bool = True, color: bool | dict[str, Any] = True,
          propagate: bool = False, submodule_levels: dict[str, int | str] | None = None,
          extra_handlers: list[logging.Handler] | None = None, formatter: logging.Formatter | None = None,
          apply_to: list[str] | None = None, files: str | dict[str, str] | None = None, **_options: Any) -> None:
    """Log agentbolt's messages at ``level`` to the console (and ``files``), once per logger."""
    for name in (*_NAMES, *(apply_to or ())):
        logger = logging.getLogger(name)
        logger.setLevel(level if isinstance(level, int) else level.upper())
        logger.propagate = propagate
        for old in [h for h in logger.handlers if h in _OURS]:
            logger.removeHandler(old)
        handlers: list[logging.Handler] = [_handler(bool(color))] if console else []
        if isinstance(files, str):
            handlers.append(logging.FileHandler(files))
        elif isinstance(files, dict) and name in files:
            handlers.append(logging.FileHandler(files[name]))
        for handler in handlers:
            if formatter is not None:
                handler.setFormatter(formatter)
            _OURS.add(handler)
            logger.addHandler(handler)
        for handler in extra_handlers or ():
            logger.addHandler(handler)
    for name, sub_level in (submodule_levels or {}).items():
        logging.getLogger(name).setLevel(sub_level if isinstance(sub_level, int) else sub_level.upper())


def setup_module(level: int | str = "INFO", *, name: str = "agentbolt", console: bool = True,
                 color: bool | dict[str, Any] = True, propagate: bool = False, **_options: Any) -> logging.Logger:
    """Set up one logger hierarchy (default ``agentbolt``) and return its logger."""
    setup(level, console=console, color=color, propagate=propagate, apply_to=[name])
    return logging.getLogger(name)


def configure_logger(level: int = logging.INFO, name: str = "agentbolt") -> logging.Logger:
    """v0.3's deprecated helper: :func:`setup_module` with plain output."""
    return setup_module(level, name=name, color=False)
