"""Progress of long work, on a terminal and off one.

On a terminal, a rich progress bar. Anywhere else — CI logs, ``nohup``, a container's
log — a live bar prints nothing until the end, so a half-hour run would look dead:
there :class:`ConsoleProgress` prints a plain line instead, at every step (``force``) and
otherwise at most every ``every_s`` seconds::

    GRPO: step 3/40 · reward 0.413 · success 31% · loss +0.0123 · 77 s

:func:`wait_with_progress` waits for rollouts and reports how many have finished.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Self

from rich.console import Console
from rich.errors import LiveError
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from agentbolt.store.base import Store
from agentbolt.types import Rollout

__all__ = ["ConsoleProgress", "wait_with_progress"]

log = logging.getLogger("agentbolt.algorithms")


class ConsoleProgress:
    """A bar on a terminal, plain lines elsewhere; ``enabled=False`` shows nothing."""

    def __init__(self, console: Console, label: str, total: int | None, *, done: int = 0, unit: str = "",
                 every_s: float = 30.0, enabled: bool = True) -> None:
        self.console = console
        self.label = label
        self.total = total
        self.done = done
        self.unit = unit
        self.every_s = every_s
        self.enabled = enabled
        self._bar: Progress | None = None
        self._task: Any = None
        self._started = time.monotonic()
        self._printed = self._started

    def __enter__(self) -> Self:
        self._started = self._printed = time.monotonic()
        if self.enabled and self.console.is_terminal:
            bar = Progress(TextColumn(f"[bold]{self.label}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                           TimeRemainingColumn(), TextColumn("{task.description}"), console=self.console)
            try:
                bar.start()
            except LiveError:  # another live display owns this console (a bar around us)
                return self
            self._bar = bar
            self._task = bar.add_task("", total=self.total, completed=self.done)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    @property
    def plain(self) -> bool:
        """True when progress is printed as plain lines (no live bar)."""
        return self.enabled and self._bar is None

    def update(self, done: int, description: str = "", *, force: bool = False) -> None:
        """Now ``done`` of ``total``; a plain line is printed when ``force`` or when
        ``every_s`` seconds have passed since the last one."""
        self.done = done
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=done, description=description)
            return
        now = time.monotonic()
        if force or now - self._printed >= self.every_s:
            self._printed = now
            self.console.print(self.line(description), markup=False, highlight=False, soft_wrap=True)

    def line(self, description: str = "") -> str:
        """``GRPO: step 3/40 · reward 0.413 · 77 s``."""
        count = f"{self.done}/{self.total}" if self.total is not None else str(self.done)
        unit = f"{self.unit} " if self.unit else ""
        parts = [f"{self.label}: {unit}{count}"]
        if description:
            parts.append(description)
        parts.append(f"{time.monotonic() - self._started:.0f} s")
        return " · ".join(parts)


async def wait_with_progress(store: Store, rollouts: Sequence[Rollout | str], progress: ConsoleProgress,
                             *, timeout: float | None = None, poll_s: float = 1.0) -> None:
    """Wait until every rollout has finished (or ``timeout`` s), updating ``progress``
    with the number finished."""
    ids = list(dict.fromkeys(r if isinstance(r, str) else r.rollout_id for r in rollouts))
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        step = poll_s if left is None else max(0.0, min(poll_s, left))
        finished = await store.wait_for_rollouts(ids, timeout=step)
        progress.update(len(finished), "rollouts finished")
        if len(finished) == len(ids) or (left is not None and left <= step):
            progress.update(len(finished), "rollouts finished", force=progress.plain)
            return
