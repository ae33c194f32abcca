"""``Trainer``: wire an algorithm, a store and runners together, and run them.

::

    trainer = agentbolt.Trainer(algorithm=agentbolt.algorithms.Evaluate(), n_runners=4)
    result = trainer.fit(agent, train_dataset, val_dataset)

    # the form some guides use: the agent in a Runner, the data in the trainer
    trainer = agentbolt.Trainer(algorithm=..., runner=agentbolt.Runner(run_fn=fn), train_dataset=data)
    trainer.run()

    trainer.dev(agent, data)   # a few rollouts, no training, printed trace by trace

``strategy`` chooses where runners run: ``"inprocess"`` (default: tasks in this
process; any agent), ``"multiprocess"`` (runner processes + a server on SQLite; the
agent must be importable — define it at module level, keep the script's work under
``if __name__ == "__main__":``), ``"external"`` (``agentbolt runner`` processes you
start anywhere), or an :class:`~agentbolt.execution.ExecutionStrategy` object.

``gateway`` puts the model gateway in front of an engine, next to the store, so an
unmodified program (a :class:`~agentbolt.runner.harness.Harness`) can be the agent::

    gateway = EngineSpec(kind="vllm", url="http://127.0.0.1:8000/v1")
    Trainer(algorithm=..., strategy="multiprocess", gateway=gateway).fit(Harness("python solve.py"), data)
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import signal
import threading
from collections.abc import Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from rich.console import Console

from agentbolt.algorithms.base import (
    DEFAULT_ROLLOUT_CONFIG,
    Algorithm,
    AlgorithmContext,
)
from agentbolt.algorithms.evaluate import Evaluate
from agentbolt.compat import trainer_args as _compat
from agentbolt.execution import ExecutionStrategy, RunnerSpec, strategy_from
from agentbolt.execution.dev import (
    DevRollout,
    preview_adapter,
    print_dev_rollouts,
    training_samples,
)
from agentbolt.execution.inprocess import InProcessStrategy
from agentbolt.runner.runner import Runner
from agentbolt.store.base import Store
from agentbolt.types import Resource, RolloutConfig, RolloutMode

if TYPE_CHECKING:
    from agentbolt.engines.spec import EngineSpec
    from agentbolt.gateway.control import GatewayControl
    from agentbolt.gateway.gateway import Gateway
    from agentbolt.gateway.spec import GatewaySpec

__all__ = ["Trainer"]

log = logging.getLogger("agentbolt.trainer")

T = TypeVar("T")


class Trainer:
    """Runs ``algorithm`` against ``n_runners`` runners of an agent.

    * ``algorithm`` — an :class:`~agentbolt.algorithms.Algorithm` (default:
      :class:`~agentbolt.algorithms.Evaluate`).
    * ``n_runners`` — runners (tasks or processes), each running ``concurrency``
      rollouts at once (from ``runner``, default 4).
    * ``store`` — a Store object or URL; default: a MemoryStore in-process, a SQLite
      file in ``run_dir`` served over HTTP for the process strategies.
    * ``hooks`` — hooks objects for every runner (see :mod:`agentbolt.runner.hooks`).
    * ``runner`` — a :class:`Runner` used as a template (its agent, concurrency, hooks,
      heartbeat settings).
    * ``resources`` — named resources (LLM endpoint, prompt template...) published as a
      new version before the algorithm starts.
    * ``rollout_config`` — limits and retries of the rollouts the algorithm enqueues
      (default: retried if their runner goes silent for 60 s).
    * Agent Lightning v0.3's arguments (``initial_resources``, ``n_workers``, ``adapter``,
      ``tracer``, ``llm_proxy``, ``strategy="shm"|"cs"``, v0.3 algorithms and stores) are
      accepted and mapped onto these (:mod:`agentbolt.compat.trainer_args`).
    * ``gateway`` — serve the model gateway next to the store: a
      :class:`~agentbolt.gateway.GatewaySpec` or an :class:`~agentbolt.engines.EngineSpec`
      (built in the server process: the trainer's own, or the one it starts), or — for
      the in-process strategy only — a :class:`~agentbolt.gateway.Gateway` object.
    """

    def __init__(
        self,
        algorithm: Algorithm | None = None,
        n_runners: int = 1,
        store: Store | str | None = None,
        hooks: Any = (),
        strategy: str | ExecutionStrategy = "inprocess",
        runner: Runner | None = None,
        train_dataset: Sequence[Any] | None = None,
        val_dataset: Sequence[Any] | None = None,
        *,
        resources: Mapping[str, Resource] | None = None,
        rollout_config: RolloutConfig | None = None,
        run_dir: str | None = None,
        gateway: GatewaySpec | EngineSpec | Gateway | None = None,
        **v03: Any,
    ) -> None:
        # Agent Lightning v0.3's arguments and objects, as agentbolt's (the rest unchanged)
        algorithm, n_runners, store, hooks, strategy, runner, resources, gateway = _compat.trainer_arguments(
            _compat.TrainerArguments(algorithm, n_runners, store, hooks, strategy, runner, resources, gateway), v03)
        if n_runners < 1:
            raise ValueError(f"n_runners must be at least 1, got {n_runners}")
        self.algorithm = algorithm if algorithm is not None else Evaluate()
        self.n_runners = n_runners
        self.store = store
        self.hooks = hooks
        self.strategy = strategy_from(strategy)
        if run_dir is not None and self.strategy.run_dir is None:
            self.strategy.run_dir = run_dir
        self.runner = runner
        self.train_dataset = train_dataset
        self.val_dataset = val_dataset
        self.resources = dict(resources) if resources else None
        self.rollout_config = rollout_config or DEFAULT_ROLLOUT_CONFIG.model_copy(deep=True)
        self.gateway = _gateway_of(gateway)

    # ------------------------------------------------------------------------ fit
    def fit(
        self, agent: Any = None, train_dataset: Sequence[Any] | None = None, val_dataset: Sequence[Any] | None = None
    ) -> Any:
        """Run the algorithm with runners of ``agent`` on the datasets; returns what the
        algorithm returns (an ``EvaluationResult`` for ``Evaluate``)."""
        return _run_sync(self.fit_async(agent, train_dataset, val_dataset), "fit")

    def run(self) -> Any:
        """:meth:`fit` with the agent of ``runner=`` and the datasets given to the trainer."""
        if self.runner is None:
            raise TypeError("Trainer.run() needs Trainer(runner=agentbolt.Runner(run_fn=...)); or call fit(agent, "
                            "data)")
        return self.fit()

    async def fit_async(
        self, agent: Any = None, train_dataset: Sequence[Any] | None = None, val_dataset: Sequence[Any] | None = None
    ) -> Any:
        """:meth:`fit`, for callers already inside an event loop."""
        _refuse_in_child("fit")
        spec = RunnerSpec.from_runner(self.runner, agent=agent, hooks=self.hooks)
        train = train_dataset if train_dataset is not None else self.train_dataset
        val = val_dataset if val_dataset is not None else self.val_dataset

        if self.algorithm.data_parallel and _is_follower_rank():  # torchrun: ranks > 0 only join the updates
            return await self.algorithm.follow()

        async def main(store: Store, gateway: GatewayControl | None = None) -> Any:
            if self.resources:
                await store.update_resources(self.resources)
            ctx = AlgorithmContext(store, train, val, self.rollout_config.model_copy(deep=True), gateway=gateway)
            result = self.algorithm.run(ctx)
            return await result if inspect.isawaitable(result) else result

        _ensure_log_output()
        if self.gateway is not None:  # e.g. GRPO: RL sampling per mode
            self.algorithm.configure_gateway(self.gateway.config)
        extra = {"gateway": self.gateway} if self.gateway is not None else {}  # strategies of others may lack it
        return await self.strategy.execute(main, spec, n_runners=self.n_runners, store=self.store, **extra)

    # ------------------------------------------------------------------------ dev
    def dev(
        self,
        agent: Any = None,
        dataset: Sequence[Any] | None = None,
        n: int = 4,
        *,
        mode: RolloutMode | str = RolloutMode.TRAIN,
        console: Console | None = None,
        val_dataset: Sequence[Any] | None = None,
    ) -> list[DevRollout]:
        """Run the first ``n`` items of ``dataset`` (default: the training set) in this
        process with no training, print each rollout's trace and the training samples
        the algorithm makes of it (GRPO: exactly what it trains on, ``agent_match``
        included; otherwise the RL adapter's), and return them. ``val_dataset`` (Agent Lightning's
        ``dev(agent, train, val_dataset=...)``) is previewed, as validation rollouts,
        when there is no training data."""
        if dataset is None and not self.train_dataset and val_dataset is not None:
            dataset, mode = val_dataset, RolloutMode.VAL
        return _run_sync(self.dev_async(agent, dataset, n, mode=mode, console=console), "dev")

    async def dev_async(
        self,
        agent: Any = None,
        dataset: Sequence[Any] | None = None,
        n: int = 4,
        *,
        mode: RolloutMode | str = RolloutMode.TRAIN,
        console: Console | None = None,
    ) -> list[DevRollout]:
        spec = RunnerSpec.from_runner(self.runner, agent=agent, hooks=self.hooks)
        items = list(dataset if dataset is not None else (self.train_dataset or []))[:n]
        if not items:
            raise ValueError("dev() needs a dataset with at least one item")

        async def main(store: Store, gateway: GatewayControl | None = None) -> list[DevRollout]:
            if self.resources:
                await store.update_resources(self.resources)
            ctx = AlgorithmContext(store, rollout_config=self.rollout_config.model_copy(deep=True), gateway=gateway)
            rollouts = await ctx.run_dataset(items, mode)
            if gateway is not None:  # the gateway's spans of these calls are in the store
                await gateway.flush()
            results = []
            for rollout in rollouts:
                spans = await store.get_spans(rollout.rollout_id, "latest") if rollout.latest_attempt_id else []
                error = None
                if rollout.latest_attempt_id:
                    attempt = await store.get_attempt(rollout.rollout_id, rollout.latest_attempt_id)
                    if attempt.error is not None:
                        error = f"{attempt.error.type}: {attempt.error.message}"
                samples, why_not = training_samples(spans, preview_adapter(self.algorithm))
                results.append(DevRollout(rollout, spans, samples, error, [why_not] if why_not else []))
            return results

        _ensure_log_output()
        if self.gateway is not None:  # sample as the algorithm will (GRPO: RL sampling)
            self.algorithm.configure_gateway(self.gateway.config)
        store = self.store if isinstance(self.store, Store) else None
        results = await InProcessStrategy().execute(main, spec, n_runners=1, store=store, gateway=self.gateway)
        print_dev_rollouts(results, console)
        return results


def _gateway_of(value: Any) -> GatewaySpec | Gateway | None:
    """A GatewaySpec (an EngineSpec alone gets default settings) or a live Gateway."""
    if value is None:
        return None
    from agentbolt.gateway.gateway import Gateway
    from agentbolt.gateway.spec import as_gateway_spec

    return value if isinstance(value, Gateway) else as_gateway_spec(value)


def _is_follower_rank() -> bool:
    """A data-parallel rank other than 0 (``torchrun``): it trains, rank 0 does the rest."""
    import sys

    if "torch" not in sys.modules:
        return False
    from agentbolt.training import distributed

    return distributed.is_distributed() and not distributed.is_main()


def _refuse_in_child(what: str) -> None:
    """A training script without a main guard runs again in every runner process
    (``multiprocessing`` imports it there): say so instead of recursing."""
    import multiprocessing

    if multiprocessing.parent_process() is not None and multiprocessing.current_process().name.startswith("agentbolt-"):
        raise RuntimeError(
            f"Trainer.{what}() was called again inside an agentbolt child process: the training script runs "
            "again in every runner process, so put its work under `if __name__ == \"__main__\":`"
        )


def _run_sync(coro: Coroutine[Any, Any, T], what: str) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        terminated: list[bool] = []
        try:
            return asyncio.run(_stop_on_sigterm(coro, terminated))
        except asyncio.CancelledError:
            if terminated:  # shut down as cleanly as on Ctrl-C, then exit like SIGTERM would
                raise SystemExit(128 + signal.SIGTERM) from None
            raise
    coro.close()
    raise RuntimeError(
        f"Trainer.{what}() was called inside a running event loop (e.g. a notebook); "
        f"use `await trainer.{what}_async(...)` there"
    )


async def _stop_on_sigterm(coro: Coroutine[Any, Any, T], terminated: list[bool]) -> T:
    """Treat SIGTERM (``kill``, a container stop) like Ctrl-C: cancel, so runners and
    child processes are shut down in order. Only where nobody else handles SIGTERM."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    installed = False
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:

        def on_sigterm() -> None:
            terminated.append(True)
            if task is not None:
                task.cancel()

        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
        installed = True
    try:
        return await coro
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGTERM)


def _ensure_log_output() -> None:
    """Show agentbolt's warnings (crashed runners, retries) when the application has not
    set up logging at all."""
    logger = logging.getLogger("agentbolt")
    if logging.getLogger().handlers or logger.handlers:
        return
    from rich.logging import RichHandler

    handler = RichHandler(console=Console(stderr=True), show_path=False)
    logger.addHandler(handler)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.WARNING)
    trainer_log = logging.getLogger("agentbolt.trainer")
    if trainer_log.level == logging.NOTSET:
        trainer_log.setLevel(logging.INFO)  # where the run's data is, runners started and stopped
