"""``LitAgentRunner``: v0.3's runner API over agentbolt's :class:`~agentbolt.Runner`.

::

    runner = LitAgentRunner(OtelTracer())
    with runner.run_context(agent=my_agent, store=InMemoryLightningStore(), hooks=[MyHook()]):
        rollout = await runner.step(task, resources={"main_prompt": prompt})   # run one task now
        await runner.iter(event=stop)                                          # or serve the queue

The agent runs exactly as under agentbolt's own runner (hooks, trace, heartbeats,
outcome); v0.3 hooks receive v0.3's arguments (this runner, its tracer, the agent).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from agentbolt.compat.resolution import module_getattr
from agentbolt.compat.store import LightningStore, as_lightning_store
from agentbolt.compat.tracer.base import Tracer
from agentbolt.compat.tracer.otel import OtelTracer
from agentbolt.compat.types import NamedResources
from agentbolt.runner.hooks import HOOK_NAMES, _is_base_noop
from agentbolt.runner.runner import Runner
from agentbolt.types import Claim, Rollout, RolloutStatus

__all__ = ["LitAgentRunner", "Runner", "TraceWatcher", "V03Hook", "v03_hooks"]

T_value = TypeVar("T_value")
T_task = TypeVar("T_task")


class LitAgentRunner(Generic[T_task]):
    """Runs a v0.3 agent (any agent form agentbolt accepts) on a store, one task at a time.

    ``max_rollouts`` bounds :meth:`iter`; ``poll_interval`` and ``heartbeat_interval``
    are agentbolt's runner's; v0.3's other options (jitter, heartbeat launch mode, GPU
    stats) do not apply and are ignored."""

    def __init__(self, tracer: Tracer | None = None, max_rollouts: int | None = None, poll_interval: float = 5.0,
                 heartbeat_interval: float = 10.0, **_options: Any) -> None:
        self._tracer = tracer if tracer is not None else OtelTracer()
        self._max_rollouts = max_rollouts
        self._poll_interval = min(poll_interval, 0.2)  # agentbolt's claims are cheap: answer quickly
        self._heartbeat_interval = heartbeat_interval
        self._agent: Any = None
        self._hooks: Sequence[Any] = ()
        self._store: LightningStore | None = None
        self._runner: Runner | None = None
        self.worker_id: int | None = None

    # ------------------------------------------------------------------ set-up
    @property
    def tracer(self) -> Tracer:
        return self._tracer

    def init(self, agent: Any, *, hooks: Sequence[Any] | None = None, **_kwargs: Any) -> None:
        self._agent = agent
        self._hooks = list(hooks or ())

    def init_worker(self, worker_id: int, store: Any, **_kwargs: Any) -> None:
        self.worker_id = worker_id
        self._store = as_lightning_store(store)
        self._tracer.init_worker(worker_id, self._store)
        hooks = v03_hooks(self._hooks, self._tracer, runner=self)
        self._runner = Runner(
            self._agent,
            store=self._store.store,
            concurrency=1,
            worker_id=self.get_worker_id(),
            hooks=hooks,
            heartbeat_interval=self._heartbeat_interval,
            poll_interval=self._poll_interval,
        )

    def teardown_worker(self, worker_id: int, *_args: Any, **_kwargs: Any) -> None:
        self._runner = None

    def teardown(self, *_args: Any, **_kwargs: Any) -> None:
        self._agent, self._hooks, self._store = None, (), None

    @contextmanager
    def run_context(self, *, agent: Any, store: Any, hooks: Sequence[Any] | None = None,
                    worker_id: int | None = None) -> Iterator[LitAgentRunner[T_task]]:
        """Set the runner up with ``agent`` and ``store`` for the block (v0.3's debugging entry)."""
        self.init(agent, hooks=hooks)
        self.init_worker(worker_id if worker_id is not None else 0, store)
        try:
            yield self
        finally:
            self.teardown_worker(worker_id if worker_id is not None else 0)
            self.teardown()

    def get_agent(self) -> Any:
        return _required(self._agent, "agent")

    def get_store(self) -> LightningStore:
        return _required(self._store, "store")

    def get_worker_id(self) -> str:
        return f"lit-agent-runner-{self.worker_id if self.worker_id is not None else 0}"

    # ------------------------------------------------------------------ running
    async def step(self, input: T_task, *, resources: NamedResources | None = None, mode: str | None = None,
                   event: Any = None) -> Rollout:
        """Run the agent on ``input`` now (not through the queue) and return the finished
        rollout. ``resources`` are published as a new version for it (default: the latest).
        A failed rollout raises ``RuntimeError`` with the agent's error."""
        store = self.get_store()
        runner = _required(self._runner, "worker set-up")
        resources_id = (await store.add_resources(resources)).resources_id if resources is not None else None
        started = await store.start_rollout(input=input, mode=mode, resources_id=resources_id,
                                            worker_id=self.get_worker_id())
        rollout = Rollout(**{k: v for k, v in started.__dict__.items() if k != "attempt"})
        await runner.run_claimed(Claim(rollout=rollout, attempt=started.attempt))
        done = await store.store.get_rollout(rollout.rollout_id)
        if done.status != RolloutStatus.SUCCEEDED:
            attempt = await store.get_latest_attempt(done.rollout_id)
            error = attempt.error if attempt is not None else None
            why = f"{error.type}: {error.message}" if error is not None else done.status.value
            raise RuntimeError(f"rollout {done.rollout_id} did not succeed: {why}")
        return done

    async def iter(self, *, event: Any = None) -> None:
        """Claim and run queued rollouts until ``event`` is set (a ``threading.Event``,
        ``asyncio.Event`` or v0.3 ``ExecutionEvent``) or ``max_rollouts`` have run."""
        runner = _required(self._runner, "worker set-up")
        stop = asyncio.Event()
        watcher = asyncio.create_task(_forward(event, stop)) if event is not None else None
        try:
            await runner.run(max_rollouts=self._max_rollouts, stop=stop)
        finally:
            if watcher is not None:
                watcher.cancel()


async def _forward(event: Any, stop: asyncio.Event) -> None:
    """Set ``stop`` once ``event`` (polled: it may be a threading or process event) is set."""
    while not event.is_set():
        await asyncio.sleep(0.05)
    stop.set()


class TraceWatcher:
    """Keeps the compat tracer's ``get_last_trace`` current for each attempt."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    def on_trace_start(self, *, attempt: Any) -> None:
        self.tracer.begin(attempt.attempt_id)

    def on_rollout_end(self, rollout: Any) -> None:
        if self.tracer._attempt_id is not None:
            self.tracer.end(self.tracer._attempt_id)


class V03Hook:
    """A v0.3 hook as agentbolt's runner sees it: each method the hook defines is called
    with v0.3's keyword arguments — ``agent``, ``runner``, the v0.3 ``tracer`` (whose
    ``get_last_trace()`` works), ``rollout`` (and ``spans``). ``runner`` overrides the
    runner passed (a ``LitAgentRunner`` hands itself). Picklable, for runner processes."""

    def __init__(self, hook: Any, tracer: Tracer, runner: Any = None) -> None:
        self.hook = hook
        self.tracer = tracer
        self.runner = runner

    def __getattr__(self, name: str) -> Any:
        hook = self.__dict__.get("hook")
        fn = getattr(hook, name, None) if name in HOOK_NAMES else None  # third-party: the user's v0.3 hook, any class
        if fn is None or _is_base_noop(fn, name):
            raise AttributeError(name)

        def call(*, rollout: Any, agent: Any = None, runner: Any = None, spans: Any = None) -> Any:
            arguments = {"agent": agent, "runner": self.runner if self.runner is not None else runner,
                         "tracer": self.tracer, "rollout": rollout, "spans": spans}
            return fn(**{k: v for k, v in arguments.items() if _accepts(fn, k)})

        return call


def v03_hooks(hooks: Sequence[Any], tracer: Tracer, runner: Any = None) -> list[Any]:
    """``hooks`` ready for agentbolt's runner: v0.3 ``Hook`` objects wrapped in
    :class:`V03Hook`, and the watcher that keeps ``tracer.get_last_trace()`` current."""
    from agentbolt.compat.types import Hook

    wrapped = [V03Hook(h, tracer, runner) if isinstance(h, Hook) or runner is not None else h for h in hooks]
    return [TraceWatcher(tracer), *wrapped]


def _accepts(fn: Any, name: str) -> bool:
    import inspect

    params = inspect.signature(fn).parameters
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _required(value: T_value | None, what: str) -> T_value:
    if value is None:
        raise RuntimeError(f"this runner has no {what}: use `with runner.run_context(agent=..., store=...):`")
    return value


__getattr__ = module_getattr(__name__)  # third-party: v0.3 names defined elsewhere, or not provided (why)
