"""v0.3's environment variables (``AGL_*``) and their readers. agentbolt reads its own
settings from arguments, not from these; the readers work for programs that use them."""

from __future__ import annotations

import os
from enum import Enum

__all__ = ["LightningEnvVar", "resolve_bool_env_var", "resolve_int_env_var", "resolve_str_env_var"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class LightningEnvVar(Enum):
    AGL_EMITTER_DEBUG = "AGL_EMITTER_DEBUG"
    AGL_MANAGED_STORE = "AGL_MANAGED_STORE"
    AGL_CURRENT_ROLE = "AGL_CURRENT_ROLE"
    AGL_SERVER_HOST = "AGL_SERVER_HOST"
    AGL_SERVER_PORT = "AGL_SERVER_PORT"


def _raw(env_var: LightningEnvVar | str) -> str | None:
    value = os.environ.get(env_var.value if isinstance(env_var, LightningEnvVar) else env_var)
    return None if value is None or value.strip() == "" else value.strip()


def resolve_bool_env_var(env_var: LightningEnvVar | str, override: bool | None = None,
                         fallback: bool | None = None) -> bool | None:
    """``override`` if given, else the variable as a boolean, else ``fallback``."""
    if override is not None:
        return override
    raw = _raw(env_var)
    if raw is None:
        return fallback
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise ValueError(f"{env_var}: {raw!r} is not a boolean (use 1/0, true/false, yes/no, on/off)")


def resolve_int_env_var(env_var: LightningEnvVar | str, override: int | None = None,
                        fallback: int | None = None) -> int | None:
    if override is not None:
        return override
    raw = _raw(env_var)
    if raw is None:
        return fallback
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{env_var}: {raw!r} is not an integer") from None


def resolve_str_env_var(env_var: LightningEnvVar | str, override: str | None = None,
                        fallback: str | None = None) -> str | None:
    if override is not None:
        return override
    raw = _raw(env_var)
    return fallback if raw is None else raw
