"""A runner as the main job of a process (``agentbolt runner`` and the runner processes
of the multi-process strategy): signals, parent watch, exit.

The first SIGINT/SIGTERM stops claiming and lets running attempts finish (for the
runner's ``shutdown_grace``); a second one stops them at once and reports them failed as
retryable, so the store hands them to another runner. With ``parent_pid`` the process
also stops when that parent dies, so a killed trainer leaves no runner behind.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading

from agentbolt.runner.job import RunnerStats
from agentbolt.runner.runner import Runner

__all__ = ["serve_runner", "watch_parent", "configure_child_logging"]

log = logging.getLogger("agentbolt.runner")


def serve_runner(
    runner: Runner, *, max_rollouts: int | None = None, parent_pid: int | None = None
) -> RunnerStats | None:
    """Run ``runner`` until a signal, ``max_rollouts``, or the parent's death. Returns
    its stats, or None if it was stopped hard (second signal)."""
    if parent_pid is not None:
        watch_parent(parent_pid)
    try:
        return asyncio.run(_serve(runner, max_rollouts))
    except (asyncio.CancelledError, KeyboardInterrupt):
        return None


async def _serve(runner: Runner, max_rollouts: int | None) -> RunnerStats:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    main = asyncio.current_task()
    signals = 0

    def on_signal(signum: int) -> None:
        nonlocal signals
        signals += 1
        if signals == 1:
            log.info(
                "runner %s: %s received, finishing running rollouts (send it again to stop them now)",
                runner.worker_id,
                signal.Signals(signum).name,
            )
            stop.set()
        elif main is not None:
            main.cancel()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        return await runner.run(max_rollouts=max_rollouts, stop=stop)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


def watch_parent(parent_pid: int, *, interval: float = 0.5, grace: float = 20.0) -> threading.Thread:
    """Send this process SIGTERM when ``parent_pid`` is gone (it got re-parented), and
    exit for good ``grace`` seconds later if it is still alive."""

    def watch() -> None:
        stop = threading.Event()
        while not stop.wait(interval):
            if os.getppid() != parent_pid:
                log.warning("parent process %d is gone; shutting down", parent_pid)
                os.kill(os.getpid(), signal.SIGTERM)
                stop.wait(grace)
                os._exit(1)

    thread = threading.Thread(target=watch, name="agentbolt-parent-watch", daemon=True)
    thread.start()
    return thread


def configure_child_logging(level: str | int) -> None:
    """Plain stderr logging for a child process that has none (it shares the parent's
    terminal, so lines carry the process id)."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(
            level=level if isinstance(level, int) else level.upper(),
            format=f"%(asctime)s %(levelname)s [pid {os.getpid()}] %(name)s: %(message)s",
        )

