"""v0.3's ``build_component`` (make a component from whatever describes it) and the
helpers of ``agentlightning.trainer.init_utils``: ``load_class``, ``instantiate_component``,
``instantiate_from_spec``."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from agentbolt.runner.loading import load_object

__all__ = ["OptionalDefaults", "build_component", "instantiate_component", "instantiate_from_spec", "load_class"]

OptionalDefaults = dict[str, Any]
"""Keyword arguments to give a constructor when it takes them: a value, or a factory of one."""


def load_class(path: str) -> Any:
    """The object a ``"module.Name"`` (or ``"module:Name"``) path names."""
    return load_object(path if ":" in path else ":".join(path.rsplit(".", 1)))


def instantiate_component(cls: Any, provided_kwargs: Mapping[str, Any] | None = None,
                          optional_defaults: OptionalDefaults | None = None) -> Any:
    """``cls(**provided_kwargs)``, plus each of ``optional_defaults`` its constructor takes
    and was not given (a callable default is called for its value)."""
    kwargs = dict(provided_kwargs or {})
    if optional_defaults:
        accepted = inspect.signature(cls).parameters
        for name, value in optional_defaults.items():
            if name not in kwargs and name in accepted:
                kwargs[name] = value() if callable(value) else value
    return cls(**kwargs)


def instantiate_from_spec(spec: str | Mapping[str, Any], *, spec_name: str,
                          optional_defaults: OptionalDefaults | None = None, dict_requires_type: bool = True,
                          dict_default_cls: Any = None, registry: Mapping[str, str] | None = None) -> Any:
    """A component from a class path (or registry key), or from ``{"type": path, **kwargs}``
    (``type`` may be left out when ``dict_requires_type`` is false and
    ``dict_default_cls`` is given)."""
    if isinstance(spec, str):
        return instantiate_component(load_class((registry or {}).get(spec, spec)), None, optional_defaults)
    if not isinstance(spec, Mapping):
        raise TypeError(f"{spec_name} spec must be a string or a dict, got {type(spec).__name__}")
    kwargs = dict(spec)
    path = kwargs.pop("type", None)
    if path is None and registry and "name" in kwargs:
        path = registry.get(kwargs.pop("name"))
    elif path is not None and registry:
        path = registry.get(path, path)
    if path is not None:
        return instantiate_component(load_class(path), kwargs, optional_defaults)
    if dict_requires_type:
        raise ValueError(f"{spec_name} dict needs a 'type' key naming the class (module.Name)")
    if dict_default_cls is None:
        raise ValueError(f"{spec_name} dict has no 'type' and there is no default class")
    return instantiate_component(dict_default_cls, kwargs, optional_defaults)


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
