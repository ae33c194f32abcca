"""Emitters: record rewards, messages, objects, exceptions, annotations and operations
from anywhere inside a rollout.

Each call becomes a span of the current attempt, at the moment it is made, under the
current span (so an intermediate reward sits between the model calls around it).
Names and attributes are listed in ``docs/semantic-conventions.md``::

    agentbolt.emit_reward(0.8)
    agentbolt.emit_reward({"acc": 1.0, "format": 0.5}, primary="acc")
    agentbolt.emit_reward(score=0.85)
    agentbolt.emit_message("thinking about step 2", role="assistant")
    agentbolt.emit_object({"plan": [...]}, name="plan")
    agentbolt.emit_annotation(difficulty="hard", turns=3)

    @agentbolt.operation
    def search(query: str) -> list[str]: ...

    with agentbolt.operation("lookup") as op:
        op.set_output(result)
"""

from __future__ import annotations

import functools
import inspect
import math
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar, cast, overload

import orjson
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from agentbolt import semconv
from agentbolt.semconv import (
    ANNOTATION_PREFIX,
    ANNOTATION_SPAN,
    EXCEPTION_MESSAGE,
    EXCEPTION_SPAN,
    EXCEPTION_STACKTRACE,
    EXCEPTION_TYPE,
    MESSAGE_CONTENT,
    MESSAGE_ROLE,
    MESSAGE_SPAN,
    OBJECT_JSON,
    OBJECT_NAME,
    OBJECT_SPAN,
    OBJECT_TYPE,
    OPERATION_INPUT,
    OPERATION_NAME,
    OPERATION_OUTPUT,
    OPERATION_SPAN,
)
from agentbolt.tracing.context import current_context, require_context
from agentbolt.types import Span, SpanStatus

__all__ = [
    "REWARD_OPTIONS",
    "Operation",
    "emit_annotation",
    "emit_exception",
    "emit_message",
    "emit_object",
    "emit_output",
    "emit_reward",
    "operation",
    "output_metadata",
    "to_json",
]

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_REWARD_NAME = "reward"


def _emit(name: str, attributes: Mapping[str, Any]) -> trace.Span:
    """Start and end a span of the current attempt right now."""
    return require_context().tracer.otel_tracer.start_span(name, attributes=attributes)


# ----------------------------------------------------------------------------- rewards
REWARD_OPTIONS = frozenset({"primary", "primary_key", "attributes", "propagate"})
"""Keywords of :func:`emit_reward` that are options, never reward names."""


def emit_reward(
    value: float | Mapping[str, float] | None = None,
    *,
    primary: str | None = None,
    primary_key: str | None = None,
    attributes: Mapping[str, Any] | None = None,
    propagate: bool = True,
    **named: float,
) -> Span:
    """Record a reward now. A rollout may emit several; the last primary one counts.

    * ``emit_reward(0.8)`` — one reward named ``"reward"``;
    * ``emit_reward({"acc": 1.0, "fmt": 0.5}, primary="acc")`` — several named rewards,
      ``primary`` says which one is *the* reward (training uses it);
    * ``emit_reward(score=0.85)`` — one named reward, which is then the primary one.

    Options (Agent Lightning's emitters take the same): ``primary_key`` is another
    spelling of ``primary``; ``attributes`` are extra span attributes (tags, links);
    ``propagate=False`` builds the reward span without recording it in the trace (it is
    returned, e.g. to hand to your own exporter). None of them is ever a reward name: a
    reward called ``propagate``, ``attributes``, ``primary`` or ``primary_key`` is refused.

    Values must be finite numbers (``True``/``False`` count as 1/0). Returns the reward
    span as stored (a :class:`~agentbolt.types.Span`).
    """
    if primary_key is not None:
        if primary is not None and primary != primary_key:
            raise ValueError(f"emit_reward got primary={primary!r} and primary_key={primary_key!r}: give one")
        primary = primary_key
    if not isinstance(propagate, bool):
        raise TypeError(f"emit_reward's propagate= is an option (True or False), got {propagate!r}")
    rewards = _rewards(value, primary, named)
    if primary is None:
        primary = _default_primary(rewards)
    attrs = {**_extra_attributes(attributes), **semconv.reward_span_attributes(rewards, primary)}
    if not propagate:
        return _as_record(None, semconv.REWARD_SPAN, attrs)
    span = _emit(semconv.REWARD_SPAN, attrs)
    span.end()
    return _as_record(span, semconv.REWARD_SPAN, attrs)


def emit_output(value: Any) -> None:
    """Record the agent's output (its answer): what ``agentbolt store rollout``, the
    dashboard and ``Trainer.dev`` show. The runner calls it with an agent's return value
    when that is not a reward."""
    _emit(semconv.OUTPUT_SPAN, {semconv.OUTPUT_TYPE: _type_name(value), semconv.OUTPUT_JSON: to_json(value)}).end()


OUTPUT_METADATA_LIMIT = 20_000
"""Characters of JSON kept in an attempt's metadata; a longer output is kept there as a
shortened string (the output span has all of it)."""


def output_metadata(value: Any) -> Any:
    """``value`` as JSON values for an attempt's metadata (shortened past the limit)."""
    text = to_json(value)
    if len(text) > OUTPUT_METADATA_LIMIT:
        return text[: OUTPUT_METADATA_LIMIT - 1] + "…"
    return orjson.loads(text)


def _extra_attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    if attributes is None:
        return {}
    if not isinstance(attributes, Mapping):
        raise TypeError(f"emit_reward's attributes= is an option (a dict of span attributes), not a reward: got "
                        f"{type(attributes).__name__}")
    return {str(k): _attribute_value(v) for k, v in attributes.items()}


def _as_record(span: trace.Span | None, name: str, attributes: dict[str, Any]) -> Span:
    """The store's view of a span just emitted (ids from the live span), or of one built
    but not recorded (``span`` None: fresh ids, rollout ``"unrecorded"`` outside a rollout)."""
    ctx = current_context()
    ids: dict[str, str] = {}
    if span is not None:
        sc = span.get_span_context()
        ids = {"trace_id": format(sc.trace_id, "032x"), "span_id": format(sc.span_id, "016x")}
    return Span(
        rollout_id=ctx.rollout_id if ctx is not None else "unrecorded",
        attempt_id=ctx.attempt_id if ctx is not None else "unrecorded",
        name=name, attributes=attributes, status=SpanStatus.OK, **ids,
    )


def _rewards(value: Any, primary: str | None, named: Mapping[str, Any]) -> dict[str, float]:
    rewards: dict[str, float] = {}
    clash = sorted(REWARD_OPTIONS & {*named, *(map(str, value) if isinstance(value, Mapping) else ())})
    if clash:
        raise ValueError(
            f"{clash[0]!r} is an option of emit_reward, not a reward name: name the reward otherwise, "
            f"e.g. emit_reward({{'{clash[0]}_score': ...}})"
        )
    if isinstance(value, Mapping):
        rewards.update({str(k): _reward_number(str(k), v) for k, v in value.items()})
    elif value is not None:
        rewards[primary or DEFAULT_REWARD_NAME] = _reward_number(primary or DEFAULT_REWARD_NAME, value)
    for k, v in named.items():
        if k in rewards:
            raise ValueError(f"reward {k!r} is given twice")
        rewards[k] = _reward_number(k, v)
    if not rewards:
        raise ValueError(
            "emit_reward needs a value: emit_reward(0.8), emit_reward({'acc': 1.0}) or emit_reward(acc=1.0)"
        )
    return rewards


def _reward_number(name: str, v: Any) -> float:
    if not isinstance(v, (int, float)):
        raise TypeError(f"reward {name!r} must be a number, got {type(v).__name__} {v!r}")
    f = float(v)
    if not math.isfinite(f):
        raise ValueError(f"reward {name!r} must be finite, got {v!r}")
    return f


def _default_primary(rewards: Mapping[str, float]) -> str:
    if len(rewards) == 1:
        return next(iter(rewards))
    if DEFAULT_REWARD_NAME in rewards:
        return DEFAULT_REWARD_NAME
    raise ValueError(
        f"several rewards {sorted(rewards)} were given: say which one training should use, "
        f"e.g. emit_reward(..., primary={sorted(rewards)[0]!r})"
    )


# ----------------------------------------------------------------------------- others
def emit_message(text: str, *, role: str = "user") -> None:
    """Record a message (a line of the conversation, a log of what the agent thinks)."""
    _emit(MESSAGE_SPAN, {MESSAGE_ROLE: str(role), MESSAGE_CONTENT: str(text)}).end()


def emit_object(obj: Any, *, name: str = "object") -> None:
    """Record any object, as JSON (pydantic models, dataclasses and the like are
    converted; anything else is kept as its ``repr``)."""
    _emit(
        OBJECT_SPAN,
        {OBJECT_NAME: str(name), OBJECT_TYPE: _type_name(obj), OBJECT_JSON: to_json(obj)},
    ).end()


def emit_exception(exc: BaseException) -> None:
    """Record an exception with its type, message and traceback (OpenTelemetry's
    exception conventions: the attributes on the span and an ``exception`` event)."""
    if not isinstance(exc, BaseException):
        raise TypeError(f"emit_exception takes an exception, got {type(exc).__name__}")
    stack = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    attrs = {EXCEPTION_TYPE: _type_name(exc), EXCEPTION_MESSAGE: str(exc), EXCEPTION_STACKTRACE: stack}
    span = _emit(EXCEPTION_SPAN, attrs)
    span.record_exception(exc, attributes={EXCEPTION_STACKTRACE: stack})
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
    span.end()


def emit_annotation(**attributes: Any) -> None:
    """Record free-form facts about the rollout: ``agentbolt.annotation.<key>`` each.

    Strings, numbers, booleans and lists of one of those are kept as they are;
    anything else is stored as JSON."""
    if not attributes:
        raise ValueError("emit_annotation needs at least one keyword, e.g. emit_annotation(difficulty='hard')")
    _emit(ANNOTATION_SPAN, {ANNOTATION_PREFIX + k: _attribute_value(v) for k, v in attributes.items()}).end()


# ----------------------------------------------------------------------------- operation
class Operation:
    """An open ``agentbolt.operation`` span; set what it produced with :meth:`set_output`."""

    def __init__(self, span: trace.Span | None) -> None:
        self._span = span

    def set_input(self, *args: Any, **kwargs: Any) -> None:
        """Record the operation's input: one positional value, or keywords as an object."""
        if self._span is not None:
            value = args[0] if len(args) == 1 and not kwargs else {**({"args": list(args)} if args else {}), **kwargs}
            self._span.set_attribute(OPERATION_INPUT, to_json(value))

    def set_output(self, value: Any) -> None:
        if self._span is not None:
            self._span.set_attribute(OPERATION_OUTPUT, to_json(value))

    def set_attribute(self, key: str, value: Any) -> None:
        if self._span is not None:
            self._span.set_attribute(key, _attribute_value(value))


@contextmanager
def _operation_span(name: str, attributes: dict[str, Any] | None = None, propagate: bool = True) -> Iterator[Operation]:
    ctx = current_context()
    if ctx is None or not propagate:  # outside a rollout (or kept local) the function simply runs
        yield Operation(None)
        return
    with ctx.tracer.otel_tracer.start_as_current_span(
        OPERATION_SPAN,
        attributes={**(attributes or {}), OPERATION_NAME: name},
        record_exception=True,
        set_status_on_exception=True,
    ) as span:
        yield Operation(span)


class _OperationFactory:
    """``operation`` as decorator (bare or named) and as context manager."""

    @overload
    def __call__(self, fn: F) -> F: ...
    @overload
    def __call__(
        self, fn: str | None = None, *, name: str | None = None, propagate: bool = True, **attributes: Any
    ) -> _NamedOperation: ...

    def __call__(self, fn: Any = None, *, name: str | None = None, propagate: bool = True, **attributes: Any) -> Any:
        if callable(fn):
            return _wrap(fn, name or _qualname(fn))
        if fn is not None and not isinstance(fn, str):
            raise TypeError(f"operation takes a function or a name, got {type(fn).__name__}")
        return _NamedOperation(fn or name, attributes, propagate)


class _NamedOperation:
    def __init__(self, name: str | None, attributes: dict[str, Any] | None = None, propagate: bool = True) -> None:
        self._name = name
        self._attributes = {k: _attribute_value(v) for k, v in (attributes or {}).items()}
        self._propagate = propagate
        self._cm: Any = None

    def __call__(self, fn: F) -> F:
        return _wrap(fn, self._name or _qualname(fn), self._attributes, self._propagate)

    def __enter__(self) -> Operation:
        if self._cm is not None:
            raise RuntimeError("this operation(...) block is already open; create one per `with`")
        self._cm = _operation_span(self._name or "operation", self._attributes, self._propagate)
        return self._cm.__enter__()

    def __exit__(self, *exc: object) -> bool | None:
        cm, self._cm = self._cm, None
        return cm.__exit__(*exc)


operation = _OperationFactory()
"""Record a function's inputs and output as an ``agentbolt.operation`` span.

``@operation``, ``@operation("name")`` or ``@operation(name="name")`` on a sync or async
function; ``with operation("name") as op: ... op.set_output(x)`` around a block. Outside
a rollout the function runs unrecorded. Other keywords are span attributes
(``@operation(category="tool")``, as in Agent Lightning); ``propagate=False`` records
nothing."""


def _wrap(fn: F, name: str, attributes: dict[str, Any] | None = None, propagate: bool = True) -> F:
    sig = _signature(fn)

    def bound(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if sig is None:
            return {"args": list(args), "kwargs": kwargs}
        try:
            b = sig.bind(*args, **kwargs)
        except TypeError:
            return {"args": list(args), "kwargs": kwargs}
        b.apply_defaults()
        return {k: v for k, v in b.arguments.items() if k not in ("self", "cls")}

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            with _operation_span(name, attributes, propagate) as op:
                op.set_input(bound(args, kwargs))
                result = await fn(*args, **kwargs)
                op.set_output(result)
                return result

        return cast(F, async_wrapper)  # functools.wraps keeps fn's signature

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _operation_span(name, attributes, propagate) as op:
            op.set_input(bound(args, kwargs))
            result = fn(*args, **kwargs)
            op.set_output(result)
            return result

    return cast(F, wrapper)


def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _qualname(fn: Callable[..., Any]) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)  # third-party: any callable
    return name or type(fn).__name__


# ----------------------------------------------------------------------------- values
def to_json(value: Any) -> str:
    """``value`` as a JSON string; pydantic models and dataclasses are converted, anything
    else unknown becomes its ``repr``."""
    try:
        return orjson.dumps(
            value, default=_jsonable, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
        ).decode()
    except (TypeError, orjson.JSONEncodeError):
        return orjson.dumps(repr(value)).decode()


def _jsonable(value: Any) -> Any:
    if hasattr(value, "model_dump") and callable(value.model_dump):
        return value.model_dump(mode="json")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return repr(value)


def _attribute_value(value: Any) -> Any:
    """An OpenTelemetry attribute value: primitives and homogeneous lists as they are,
    anything else as JSON."""
    if isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)) and value:
        for kind in (str, bool, int):
            if all(type(v) is kind for v in value):
                return list(value)
        if all(type(v) in (int, float) for v in value):
            return [float(v) for v in value]
    return to_json(value)


def _type_name(obj: Any) -> str:
    t = type(obj)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
