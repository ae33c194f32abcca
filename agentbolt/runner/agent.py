"""The three ways to hand an agent to agentbolt, and how its parameters are filled in.

1. A function decorated with :func:`rollout` (sync or async)::

       @agentbolt.rollout
       async def solve(task, llm):
           ...
           return 1.0 if answer == task["answer"] else 0.0

2. A :class:`LitAgent` subclass, with separate training and validation entry points.

3. A plain function ``fn(task)`` or ``fn(rollout)`` (reading ``rollout.input[...]``).

Parameters are filled in *by name*: ``task`` (the rollout's input; also the first
positional parameter when it has another name), ``llm`` (the LLM resource of the
rollout's resources version), ``prompt_template`` (its prompt template), ``resources``
(all named resources, a dict), ``rollout`` (the :class:`~agentbolt.types.Rollout`), and
any resource by its own name (e.g. ``main_llm``) — also when the parameter has a default,
which is used only when the rollout's resources have no resource of that name. A
``**kwargs`` parameter receives all of them.

What the agent returns decides its reward: a number is recorded as the final reward
(a reward span); ``None`` means the agent emitted its rewards itself with
:func:`agentbolt.emit_reward` (or has none); anything else (its answer, a dict) is kept
as the rollout's output (an ``agentbolt.output`` span), next to the rewards it emitted.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import pickle
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, overload

from agentbolt.aliases import LITAGENT_TRAINING_METHODS, LITAGENT_VALIDATION_METHODS
from agentbolt.runner.loading import load_object
from agentbolt.types import LLM, PromptTemplate, Resources, Rollout, RolloutMode

__all__ = [
    "INJECTABLE_PARAMETERS",
    "AgentParameterError",
    "EntryPoint",
    "LitAgent",
    "RolloutFunction",
    "RunnableAgent",
    "as_agent",
    "reward_from_result",
    "rollout",
    "split_result",
]

T_task = TypeVar("T_task")

INJECTABLE_PARAMETERS = ("task", "llm", "prompt_template", "resources", "rollout")
"""Parameter names an agent function may declare to receive rollout data."""


class AgentParameterError(TypeError):
    """An agent asks for a parameter agentbolt cannot fill (or that the rollout lacks)."""


# ----------------------------------------------------------------------------- decorator
class RolloutFunction:
    """A function marked with :func:`rollout`. Calling it calls the function unchanged;
    ``.name`` names the agent (in spans, worker records and tables)."""

    __qualname__: str  # the function's, copied by functools.update_wrapper (pickling uses it)

    def __init__(self, fn: Callable[..., Any], name: str | None = None) -> None:
        if not callable(fn):
            raise TypeError(f"@agentbolt.rollout decorates a function, got {type(fn).__name__}")
        self.fn = fn
        self.name = name or _name_of(fn)
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<agentbolt rollout function {self.name!r}>"

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled by reference (module + name), so child processes import the decorated
        # object itself; the wrapped function cannot be pickled by reference because its
        # module attribute now holds this wrapper.
        module, qualname = self.__module__, self.__qualname__
        if "<" in qualname:
            raise pickle.PicklingError(
                f"agent {self.name!r} is defined inside a function ({qualname}), so a child process "
                "cannot import it: define it at module level, or use strategy='inprocess'"
            )
        return (load_object, (f"{module}:{qualname}",))


@overload
def rollout(fn: Callable[..., Any], *, name: str | None = None) -> RolloutFunction: ...
@overload
def rollout(fn: None = None, *, name: str | None = None) -> Callable[[Callable[..., Any]], RolloutFunction]: ...


def rollout(
    fn: Callable[..., Any] | None = None, *, name: str | None = None
) -> RolloutFunction | Callable[[Callable[..., Any]], RolloutFunction]:
    """Mark a sync or async function as an agent: ``@rollout`` or ``@rollout(name="solver")``."""
    if fn is None:
        return lambda f: RolloutFunction(f, name)
    return RolloutFunction(fn, name)


# ----------------------------------------------------------------------------- class form
class LitAgent(Generic[T_task]):
    """Class form of an agent. Override :meth:`training_rollout`; override
    :meth:`validation_rollout` too if validation/test rollouts should run differently.

    Both may be sync or async and take the same parameters as a :func:`rollout`
    function (``task`` first, then any of ``llm``, ``prompt_template``, ``resources``,
    ``rollout`` — or ``**named`` for all of them).

    Agent Lightning's spellings work too: a subclass may define ``rollout`` or
    ``rollout_async`` (one entry point for every mode) or ``training_rollout_async`` /
    ``validation_rollout_async``; ``LitAgent[Task]`` may be subscripted, and
    ``trained_agents`` (a regular expression of the agent names to train) is kept.
    Which method runs: the most specific one defined — for training rollouts
    ``training_rollout_async``, ``training_rollout``, ``rollout_async``, ``rollout``; for
    validation and test rollouts the ``validation_*`` ones first, then the same list.
    """

    name: str | None = None

    def __init__(self, *, trained_agents: str | None = None) -> None:
        self.trained_agents = trained_agents

    def training_rollout(self, task: Any, **named: Any) -> float | Awaitable[float | None] | None:
        raise NotImplementedError(
            f"{type(self).__name__} must define training_rollout(self, task, ...) returning a reward or None"
        )

    def validation_rollout(self, task: Any, **named: Any) -> float | Awaitable[float | None] | None:
        """Runs validation and test rollouts; by default the same as :meth:`training_rollout`."""
        return self.training_rollout(task, **named)


_TRAIN_METHODS = LITAGENT_TRAINING_METHODS  # agentbolt's name and Agent Lightning's (agentbolt.aliases)
_VALIDATION_METHODS = LITAGENT_VALIDATION_METHODS
_DEFAULTS: dict[str, Callable[..., Any]] = {
    "training_rollout": LitAgent.training_rollout,
    "validation_rollout": LitAgent.validation_rollout,
}
"""LitAgent's own entry points: a subclass that keeps one has not defined it."""


def _entry_point(agent: LitAgent[Any], names: tuple[str, ...]) -> EntryPoint | None:
    """The first of ``names`` that the agent's class defines itself (not LitAgent's default)."""
    for name in names:
        method = getattr(type(agent), name, None)  # third-party: the user's LitAgent subclass
        if method is not None and method is not _DEFAULTS.get(name):
            return EntryPoint.of(getattr(agent, name))  # third-party: the user's LitAgent subclass
    return None


# ----------------------------------------------------------------------------- binding
_TASK, _ROLLOUT = "task", "rollout"


@dataclass(frozen=True)
class _Param:
    name: str
    source: str  # an injectable name, "resource:<name>", or "default"
    positional_only: bool
    has_default: bool


@dataclass(frozen=True)
class EntryPoint:
    """One callable of an agent plus the plan to fill its parameters."""

    fn: Callable[..., Any]
    is_async: bool
    params: tuple[_Param, ...]
    var_keyword: bool

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> EntryPoint:
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError) as err:
            raise AgentParameterError(f"cannot read the parameters of {fn!r}: {err}") from None
        params: list[_Param] = []
        var_keyword = False
        taken: set[str] = set()
        first_positional = True
        for p in sig.parameters.values():
            if p.kind is p.VAR_POSITIONAL:
                continue
            if p.kind is p.VAR_KEYWORD:
                var_keyword = True
                continue
            positional = p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            has_default = p.default is not p.empty
            if p.name in INJECTABLE_PARAMETERS and p.name not in taken:
                source = p.name
            elif _is_rollout_annotation(p.annotation) and _ROLLOUT not in taken:
                source = _ROLLOUT
            elif positional and first_positional and _TASK not in taken:
                source = _TASK
            elif has_default:
                source = "default"
            else:
                source = "resource:" + p.name
            if positional:
                first_positional = False
            taken.add(source)
            params.append(_Param(p.name, source, p.kind is p.POSITIONAL_ONLY, has_default))
        return cls(fn=fn, is_async=_is_async_callable(fn), params=tuple(params), var_keyword=var_keyword)

    def bind(self, rollout: Rollout, resources: Resources | None) -> tuple[list[Any], dict[str, Any]]:
        """The arguments to call :attr:`fn` with for this rollout."""
        named: dict[str, Any] = dict(resources.resources) if resources is not None else {}
        values: dict[str, Any] = {
            "task": rollout.input,
            "llm": _pick(named, "llm", LLM),
            "prompt_template": _pick(named, "prompt_template", PromptTemplate),
            "resources": named,
            "rollout": rollout,
        }
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        used: set[str] = set()
        for p in self.params:
            if p.source == "default":
                # a resource of the parameter's name wins over its default (``planner_llm: LLM |
                # None = None`` gets the published ``planner_llm``); positional-only ones keep
                # their default, since filling one could shift the positions after it
                if p.positional_only or p.name not in named:
                    continue
                kwargs[p.name] = named[p.name]
                used.add("resource:" + p.name)
                continue
            if p.source.startswith("resource:"):
                key = p.source[len("resource:") :]
                if key not in named:
                    raise AgentParameterError(self._unknown_parameter(p.name, rollout, named))
                value = named[key]
            else:
                value = values[p.source]
                if value is None and p.source in ("llm", "prompt_template"):
                    if p.has_default:
                        continue
                    raise AgentParameterError(self._missing_resource(p.source, rollout, named))
            used.add(p.source)
            if p.positional_only:
                args.append(value)
            else:
                kwargs[p.name] = value
        if self.var_keyword:
            for key, value in values.items():
                if key not in used and key not in kwargs:
                    kwargs[key] = value
        return args, kwargs

    def _unknown_parameter(self, name: str, rollout: Rollout, named: Mapping[str, Any]) -> str:
        have = ", ".join(sorted(named)) or "none"
        return (
            f"agent {_describe(self.fn)} has a parameter {name!r} that agentbolt cannot fill: name it one of "
            f"{', '.join(INJECTABLE_PARAMETERS)}, give it a default, or publish a resource called {name!r} "
            f"(resources of rollout {rollout.rollout_id}: {have})"
        )

    def _missing_resource(self, what: str, rollout: Rollout, named: Mapping[str, Any]) -> str:
        kind = "LLM" if what == "llm" else "PromptTemplate"
        version = rollout.resources_version
        where = f"resources version {version}" if version is not None else "the store (no resources published)"
        return (
            f"agent {_describe(self.fn)} asks for {what!r} but {where} has no {kind} resource "
            f"(has: {', '.join(sorted(named)) or 'nothing'}); publish one, e.g. "
            f"store.add_resources({{{what!r}: {kind}(...)}}) or Trainer(resources=...), "
            f"or give the parameter a default"
        )


def _pick(named: Mapping[str, Any], key: str, kind: type) -> Any:
    value = named.get(key)
    if isinstance(value, kind):
        return value
    return next((v for v in named.values() if isinstance(v, kind)), None)


def _is_rollout_annotation(annotation: Any) -> bool:
    if annotation is Rollout:
        return True
    return isinstance(annotation, str) and (annotation == "Rollout" or annotation.endswith(".Rollout"))


def _is_async_callable(fn: Any) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - third-party: a user's object with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def _describe(fn: Any) -> str:
    return repr(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or fn)  # third-party: any callable


def _name_of(fn: Any) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__  # third-party: the user's agent, any callable


# ---------------------------------------------------------------------- runnable agent
class RunnableAgent:
    """Any accepted agent form, seen the same way by the runner: a name, and the entry
    point to call for a rollout's mode."""

    def __init__(self, source: Any, name: str, train: EntryPoint, validation: EntryPoint | None = None) -> None:
        self.source = source
        """What the user passed (pickled or referenced to rebuild the agent elsewhere)."""
        self.name = name
        self._train = train
        self._validation = validation or train

    def entry_point(self, mode: RolloutMode) -> EntryPoint:
        """Training rollouts use the training entry point; validation and test ones the
        validation entry point."""
        return self._train if mode == RolloutMode.TRAIN else self._validation

    def __repr__(self) -> str:
        return f"<agentbolt agent {self.name!r}>"


def as_agent(obj: Any) -> RunnableAgent:
    """Accept a :func:`rollout` function, a :class:`LitAgent` (instance or class), a plain
    function ``fn(task)`` / ``fn(rollout)``, or a ``"module:object"`` reference."""
    if isinstance(obj, RunnableAgent):
        return obj
    source = obj
    if isinstance(obj, str):
        obj = load_object(obj)
        if isinstance(obj, RunnableAgent):
            return obj
    if isinstance(obj, type) and issubclass(obj, LitAgent):
        obj = obj()
    if isinstance(obj, LitAgent):
        cls = type(obj)
        train = _entry_point(obj, _TRAIN_METHODS)
        if train is None:
            raise TypeError(
                f"{cls.__name__} is a LitAgent without an entry point: define training_rollout(self, task, ...) "
                "(or rollout / rollout_async, Agent Lightning's names)"
            )
        validation = _entry_point(obj, _VALIDATION_METHODS)
        return RunnableAgent(source if isinstance(source, str) else obj, obj.name or cls.__name__, train, validation)
    if isinstance(obj, RolloutFunction):
        return RunnableAgent(source, obj.name, EntryPoint.of(obj.fn))
    if callable(obj) and not isinstance(obj, type):
        return RunnableAgent(source, _name_of(obj), EntryPoint.of(obj))
    raise TypeError(
        f"cannot use {obj!r} as an agent: pass a function decorated with @agentbolt.rollout, a plain "
        "function fn(task) or fn(rollout), a LitAgent subclass or instance, or a 'module:object' reference"
    )


def reward_from_result(result: Any) -> float | None:
    """The final reward an agent's return value stands for: a real number is the reward;
    anything else (``None``, an answer string, a dict...) stands for none."""
    return split_result(result)[0]


def split_result(result: Any) -> tuple[float | None, Any]:
    """``(reward, output)`` of an agent's return value.

    A real number (not a bool) is the final reward and there is no output; ``None`` is
    neither (rewards were emitted with :func:`agentbolt.emit_reward`, or there are none);
    anything else — the agent's answer string, a dict, a bool — is the rollout's
    *output*: stored with the attempt (an ``agentbolt.output`` span) and shown by
    ``agentbolt store rollout``, the dashboard and ``Trainer.dev``, never a failure.
    """
    if result is None:
        return None, None
    if isinstance(result, numbers.Real) and not isinstance(result, bool):
        value = float(result)
        if not math.isfinite(value):
            raise ValueError(f"the agent returned a non-finite reward ({value}); return a finite number or None")
        return value, None
    return None, result
