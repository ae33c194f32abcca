"""Hooks: user code the runner calls around every rollout.

Any object can be a hooks object: define any subset of the four methods, sync or async.
Subclassing :class:`Hooks` is optional (it documents the signatures)::

    class Judge:
        def on_trace_end(self, *, rollout, attempt, tracer):
            agentbolt.emit_reward(score(rollout.input))   # still inside the rollout

Order for each attempt: ``on_rollout_start`` → (trace opens) ``on_trace_start`` →
the agent → ``on_trace_end`` → (trace closes, spans flushed, outcome reported)
``on_rollout_end``. Methods receive their arguments by name, so a hook may declare only
the ones it uses (``def on_trace_end(self, rollout)`` is fine); every hook may also ask
for ``agent`` and ``runner`` (Agent Lightning's signatures). An exception in one of
the first three fails the attempt like an exception in the agent; one in
``on_rollout_end`` (which runs after the outcome is reported) is logged.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from agentbolt.types import Span

__all__ = ["HOOK_NAMES", "Hooks", "HookSet"]

log = logging.getLogger("agentbolt.runner")

HOOK_NAMES = ("on_rollout_start", "on_trace_start", "on_trace_end", "on_rollout_end")

_POSITIONAL_ORDER: dict[str, tuple[str, ...]] = {
    "on_rollout_start": ("rollout", "agent", "runner"),
    "on_trace_start": ("rollout", "attempt", "tracer", "agent", "runner"),
    "on_trace_end": ("rollout", "attempt", "tracer", "agent", "runner"),
    "on_rollout_end": ("rollout", "spans", "agent", "runner"),
}
"""What each hook may ask for. ``agent`` (the agent object the runner was given) and
``runner`` (the :class:`~agentbolt.Runner`) make Agent Lightning v0.3's hook signatures
— ``on_trace_end(self, *, agent, runner, tracer, rollout)`` — work unchanged."""


class Hooks:
    """Documents the hook methods; every one is optional and may be ``async``."""

    def on_rollout_start(self, rollout: Any) -> None:
        """Before the attempt starts (the trace is not open yet)."""

    def on_trace_start(self, *, rollout: Any, attempt: Any, tracer: Any) -> None:
        """The trace is open: spans emitted here belong to the attempt."""

    def on_trace_end(self, *, rollout: Any, attempt: Any, tracer: Any) -> None:
        """The agent returned; still inside the trace, so ``emit_reward`` works here."""

    def on_rollout_end(self, rollout: Any, spans: list[Span]) -> None:
        """After the outcome is reported; ``rollout`` is the stored rollout, ``spans`` the
        attempt's spans."""


_BASE_METHODS: dict[str, Callable[..., Any]] = {
    "on_rollout_start": Hooks.on_rollout_start,
    "on_trace_start": Hooks.on_trace_start,
    "on_trace_end": Hooks.on_trace_end,
    "on_rollout_end": Hooks.on_rollout_end,
}
""":class:`Hooks`' do-nothing methods by name: a subclass that keeps one is not called for it."""


@dataclass(frozen=True)
class _Call:
    fn: Callable[..., Any]
    plan: tuple[tuple[str, str, bool], ...]  # (parameter name, argument name, positional only)
    var_keyword: bool


class HookSet:
    """Hook objects in order, with each defined method's argument plan worked out once."""

    def __init__(self, hooks: object | Iterable[object] = (), *, agent: Any = None, runner: Any = None) -> None:
        self.context: dict[str, Any] = {"agent": agent, "runner": runner}
        """Arguments every hook may ask for besides the per-call ones."""
        if hooks is None:
            items: list[object] = []
        elif isinstance(hooks, (list, tuple)):
            items = list(hooks)
        else:
            items = [hooks]
        self.hooks: tuple[object, ...] = tuple(items)
        self._calls: dict[str, list[_Call]] = {name: [] for name in HOOK_NAMES}
        for hook in self.hooks:
            for name in HOOK_NAMES:
                fn = getattr(hook, name, None)  # third-party: the user's hook, any object or function
                if fn is None or _is_base_noop(fn, name):
                    continue
                if not callable(fn):
                    raise TypeError(f"hook attribute {type(hook).__name__}.{name} is not callable")
                self._calls[name].append(_plan(fn, name))

    def defines(self, name: str) -> bool:
        return bool(self._calls[name])

    async def call(self, name: str, **arguments: Any) -> None:
        """Call ``name`` on every hook that defines it, in order, awaiting async ones."""
        if self._calls[name]:
            arguments = {**self.context, **arguments}
        for call in self._calls[name]:
            args: list[Any] = []
            kwargs: dict[str, Any] = {}
            for param, arg, positional_only in call.plan:
                if positional_only:
                    args.append(arguments[arg])
                else:
                    kwargs[param] = arguments[arg]
            if call.var_keyword:
                taken = {arg for _, arg, _ in call.plan}
                for key, value in arguments.items():
                    if key not in taken:
                        kwargs.setdefault(key, value)
            result = call.fn(*args, **kwargs)
            if inspect.isawaitable(result):
                await result


def _is_base_noop(fn: Any, name: str) -> bool:
    """A base class's do-nothing method (ours, or one marked ``__agentbolt_noop__`` such
    as those of Agent Lightning's ``Hook`` in :mod:`agentbolt.compat`): not called."""
    func = getattr(fn, "__func__", None)  # third-party: the user's hook, any object or function
    return func is _BASE_METHODS[name] or getattr(func, "__agentbolt_noop__", False)  # third-party: as above


def _plan(fn: Callable[..., Any], name: str) -> _Call:
    available = _POSITIONAL_ORDER[name]
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return _Call(fn, tuple((a, a, False) for a in available), False)
    plan: list[tuple[str, str, bool]] = []
    var_keyword = False
    unclaimed = [a for a in available if a not in sig.parameters]
    for p in sig.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            var_keyword = True
            continue
        if p.kind is p.VAR_POSITIONAL:
            continue
        if p.name in available:
            plan.append((p.name, p.name, p.kind is p.POSITIONAL_ONLY))
        elif p.default is p.empty:
            if p.kind is p.KEYWORD_ONLY or not unclaimed:
                shown = getattr(fn, "__qualname__", fn)  # third-party: the user's hook, any callable
                raise TypeError(
                    f"hook {shown} has a parameter {p.name!r} that agentbolt does not "
                    f"pass; {name} receives {', '.join(available)}"
                )
            plan.append((p.name, unclaimed.pop(0), p.kind is p.POSITIONAL_ONLY))
    return _Call(fn, tuple(plan), var_keyword)
