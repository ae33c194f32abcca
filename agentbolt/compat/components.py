"""v0.3's ``build_component``: make a component from whatever describes it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agentbolt.runner.loading import load_object

__all__ = ["build_component"]


def build_component(spec: Any, *, expected_type: type | None = None, spec_name: str = "component",
                    default_factory: Callable[[], Any] | None = None, registry: Mapping[str, str] | None = None,
                    dict_default_cls: type | None = None, **_options: Any) -> Any:
    """``spec`` may be ``None`` (``default_factory()``), an instance (returned), a class or
    factory (called), a ``"module:Name"``/``"module.Name"`` path or a registry key (imported
    and called), or a dict ``{"type": <any of those>, **kwargs}`` (called with kwargs)."""
    if spec is None:
        return default_factory() if default_factory is not None else None
    if expected_type is not None and isinstance(spec, expected_type):
        return spec
    kwargs: dict[str, Any] = {}
    if isinstance(spec, Mapping):
        kwargs = {k: v for k, v in spec.items() if k != "type"}
        spec = spec.get("type", dict_default_cls)
        if spec is None:
            raise ValueError(f"{spec_name} spec {kwargs!r} has no 'type'")
    if isinstance(spec, str):
        path = (registry or {}).get(spec, spec)
        spec = load_object(path if ":" in path else ":".join(path.rsplit(".", 1)))
    if not callable(spec):
        raise TypeError(f"cannot build {spec_name} from {spec!r}: give an instance, a class, a path or a dict")
    built = spec(**kwargs)
    if expected_type is not None and not isinstance(built, expected_type):
        raise TypeError(f"{spec_name} built from {spec!r} is a {type(built).__name__}, not a {expected_type.__name__}")
    return built
