"""Run one agent call so that it can be stopped: async agents as asyncio tasks, sync
agents in their own thread.

Stopping an async agent cancels its task. Stopping a sync agent raises
:class:`AttemptStopped` inside its thread (``PyThreadState_SetAsyncExc``) and stops
waiting for it at once. That is best-effort: the exception only fires when the thread
next runs Python bytecode, so a thread blocked inside C code (a socket read without a
timeout, ``time.sleep``) finishes that call first, and code that catches
``BaseException`` can swallow it. The abandoned thread is a daemon and never delays
the runner; whatever it records later lands in its own (finished) attempt.
"""

from __future__ import annotations

import asyncio
import contextvars
import ctypes
import inspect
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["AttemptStopped", "AgentCall", "start_call"]


class AttemptStopped(BaseException):
    """Raised inside an agent that the runner stopped (timeout, cancellation, shutdown).

    A ``BaseException`` (like ``KeyboardInterrupt``) so that an agent's
    ``except Exception:`` does not swallow it.
    """


class AgentCall:
    """A running agent call: await :attr:`future` for its result, :meth:`stop` to stop it."""

    future: asyncio.Future[Any]
    #: the thread a synchronous agent runs on (None: a task of this loop)
    thread: threading.Thread | None = None

    def stop(self) -> None:
        raise NotImplementedError


class _TaskCall(AgentCall):
    def __init__(self, coro: Any) -> None:
        self.task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self.task.add_done_callback(_retrieve)  # an abandoned task's error is not "never retrieved"
        self.future = self.task

    def stop(self) -> None:
        self.task.cancel()


class _ThreadCall(AgentCall):
    def __init__(self, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any], name: str) -> None:
        self._loop = asyncio.get_running_loop()
        self.future = self._loop.create_future()
        context = contextvars.copy_context()  # the rollout's attempt context, OTel span included
        self.thread = self._thread = threading.Thread(
            target=self._main, args=(context, fn, args, kwargs), name=name, daemon=True
        )
        self._thread.start()

    def _main(
        self, context: contextvars.Context, fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]
    ) -> None:
        try:
            result = context.run(fn, *args, **kwargs)
            if inspect.iscoroutine(result):  # e.g. a lambda around an async agent
                result = context.run(asyncio.run, result)
        except BaseException as exc:  # noqa: BLE001 — delivered to the waiting task, which raises it
            self._deliver(None, exc)
        else:
            self._deliver(result, None)

    def _deliver(self, result: Any, exc: BaseException | None) -> None:
        try:
            self._loop.call_soon_threadsafe(_settle, self.future, result, exc)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    def stop(self) -> None:
        self.future.cancel()  # stop waiting now; a late result is dropped
        ident = self._thread.ident
        if ident is not None and self._thread.is_alive():
            hit = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(AttemptStopped))
            if hit > 1:  # cannot happen for one live thread id; undo rather than hit others
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), None)


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _settle(fut: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if fut.done():
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(result)


def start_call(
    fn: Callable[..., Any], args: list[Any], kwargs: dict[str, Any], *, is_async: bool, name: str
) -> AgentCall:
    """Start ``fn(*args, **kwargs)`` in the current context (which the tracer set up)."""
    if is_async:
        return _TaskCall(fn(*args, **kwargs))
    return _ThreadCall(fn, args, kwargs, name)
