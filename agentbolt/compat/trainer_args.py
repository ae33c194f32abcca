"""Agent Lightning v0.3's ``Trainer(...)`` arguments, mapped onto agentbolt's.

:class:`~agentbolt.Trainer` hands its arguments to :func:`trainer_arguments` (its one call
into this layer), which calls :func:`map_arguments` when one of them is a v0.3 argument or
object, so ``Trainer(algorithm=..., n_workers=2, initial_resources={...}, adapter=...,
tracer=..., strategy="shm")`` runs unchanged:

========================  =================================================================
v0.3                      agentbolt
========================  =================================================================
``initial_resources``     ``resources`` (published before the algorithm starts, and handed
                          to a v0.3 algorithm's ``get_initial_resources()``); those given to
                          ``APO.set_initial_resources()`` when the Trainer has none
``n_workers``             ``n_runners``
``strategy="shm"``        ``"inprocess"`` (runners as tasks of this process)
``strategy="cs"``         ``ClientServerExecutionStrategy``: agentbolt's ``"multiprocess"``
                          (runner processes, the store served over HTTP), an in-memory
                          store served by the trainer's process
``store=LightningStore``  the agentbolt store it wraps
v0.3 ``Algorithm``        run by :class:`~agentbolt.compat.algorithm.V03Algorithm`
``adapter``               handed to a v0.3 algorithm (``get_adapter()``)
``llm_proxy``             handed to a v0.3 algorithm; an :class:`~agentbolt.compat.LLMProxy`
                          becomes the run's ``gateway``
``tracer``                agentbolt's runners trace every attempt themselves; v0.3
                          ``Hook`` objects get it as their ``tracer`` argument
``runner=LitAgentRunner`` its hooks are used; agentbolt's runner runs the agent
``max_rollouts``,         accepted and not needed: the algorithm decides how many
``max_tasks``             rollouts run, and runners stop with it
``port``, ``daemon``,     accepted; no counterpart (the multiprocess strategy picks a free
``dev``                   port; child processes always stop with the trainer)
``triplet_exporter``      the same as ``adapter`` (v0.3 deprecated it)
========================  =================================================================

The renames among these (``initial_resources``, ``n_workers``, ``triplet_exporter``, the
strategy names) are tables of :mod:`agentbolt.aliases`, with agentbolt's other spellings.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from agentbolt.aliases import V03_STRATEGIES, V03_STRATEGY_CLASSES

__all__ = ["V03_ARGUMENTS", "TrainerArguments", "looks_v03", "map_arguments", "trainer_arguments"]

log = logging.getLogger("agentbolt.trainer")

V03_ARGUMENTS = frozenset(
    {"initial_resources", "n_workers", "max_rollouts", "max_tasks", "adapter", "tracer", "llm_proxy", "port",
     "daemon", "dev", "triplet_exporter"}
)


class TrainerArguments(NamedTuple):
    """The ``Trainer`` arguments a v0.3 call changes, in the order the trainer unpacks them."""

    algorithm: Any
    n_runners: int
    store: Any
    hooks: Any
    strategy: Any
    runner: Any
    resources: Any
    gateway: Any


def trainer_arguments(ours: TrainerArguments, v03: dict[str, Any]) -> TrainerArguments:
    """What ``Trainer(...)`` runs with: ``ours`` unchanged when neither ``v03`` (its other
    keyword arguments) nor any of ``ours`` is Agent Lightning v0.3's; else mapped by
    :func:`map_arguments`. The trainer's one call into this layer."""
    if not v03 and not looks_v03(ours.algorithm, ours.store, ours.strategy, ours.runner, ours.hooks):
        return ours
    mapped = map_arguments(ours._asdict(), v03)
    return TrainerArguments(**{name: mapped[name] for name in TrainerArguments._fields})


def looks_v03(algorithm: Any, store: Any, strategy: Any, runner: Any, hooks: Any = ()) -> bool:
    """Whether any of these is a v0.3 value (so :func:`map_arguments` has work to do)."""
    from agentbolt.algorithms.base import Algorithm
    from agentbolt.compat.algorithm.apo import V03APO
    from agentbolt.runner.runner import Runner
    from agentbolt.store.base import Store

    return (
        (algorithm is not None and not isinstance(algorithm, Algorithm))
        or (isinstance(algorithm, V03APO) and algorithm.initial_resources is not None)
        or (store is not None and not isinstance(store, (Store, str)))
        or (isinstance(strategy, str) and strategy in V03_STRATEGIES)
        or isinstance(strategy, dict)
        or (runner is not None and not isinstance(runner, Runner))
        or _has_v03_hooks(hooks)
    )


def map_arguments(ours: dict[str, Any], v03: dict[str, Any]) -> dict[str, Any]:
    """agentbolt's Trainer arguments (``ours``, updated) for v0.3's ``v03`` ones."""
    unknown = sorted(set(v03) - V03_ARGUMENTS)
    if unknown:
        raise TypeError(
            f"Trainer got unexpected arguments {', '.join(unknown)}; agentbolt's are in docs/trainer.md and "
            f"Agent Lightning v0.3's it accepts are {', '.join(sorted(V03_ARGUMENTS))}"
        )
    out = dict(ours)  # the renames: agentbolt.aliases.V03_TRAINER_ARGUMENTS
    initial = v03.get("initial_resources")
    if initial is not None:
        if out.get("resources"):
            raise TypeError("give resources= or initial_resources= (Agent Lightning's name), not both")
        out["resources"] = dict(initial)
    from agentbolt.compat.algorithm.apo import V03APO

    algorithm = out.get("algorithm")
    if isinstance(algorithm, V03APO) and algorithm.initial_resources is not None and not out.get("resources"):
        out["resources"] = dict(algorithm.initial_resources)  # APO.set_initial_resources(...)
    if v03.get("n_workers") is not None:
        out["n_runners"] = v03["n_workers"]
    from agentbolt.compat.store import as_store

    out["store"] = as_store(out.get("store"))
    out["strategy"] = _strategy(out.get("strategy"), out["store"])
    out["runner"], out["hooks"] = _runner_and_hooks(out.get("runner"), out.get("hooks"))
    out["hooks"] = _with_v03_tracer(out["hooks"], v03.get("tracer"))
    adapter = v03.get("adapter") or v03.get("triplet_exporter")
    llm_proxy = v03.get("llm_proxy")
    out["algorithm"] = _algorithm(out.get("algorithm"), out.get("resources"), adapter, llm_proxy)
    if llm_proxy is not None and out.get("gateway") is None:
        from agentbolt.compat.llm_proxy import LLMProxy

        if isinstance(llm_proxy, LLMProxy):  # agentbolt's LLMProxy says which gateway it stands for
            out["gateway"] = llm_proxy.gateway_spec()
    ignored = sorted(
        k for k in ("max_rollouts", "max_tasks", "port", "daemon", "dev") if v03.get(k) not in (None, False)
    )
    if ignored:
        log.debug("Trainer: Agent Lightning arguments with no agentbolt counterpart ignored: %s", ", ".join(ignored))
    return out


def _strategy(strategy: Any, store: Any) -> Any:
    from agentbolt.compat.execution import strategy_of

    strategy = strategy_of(strategy, store)  # "cs" with any store, v0.3's server options
    if isinstance(strategy, str):
        return V03_STRATEGIES.get(strategy, strategy)
    if isinstance(strategy, dict):
        kind = str(strategy.get("type", "shm"))
        return V03_STRATEGIES.get(kind, V03_STRATEGY_CLASSES.get(kind.rsplit(".", 1)[-1], kind))
    return strategy if strategy is not None else "inprocess"


def _runner_and_hooks(runner: Any, hooks: Any) -> tuple[Any, Any]:
    from agentbolt.runner.runner import Runner

    if runner is None or isinstance(runner, Runner):
        return runner, hooks
    extra = list(getattr(runner, "_hooks", ()) or ())  # third-party: a v0.3 runner keeps its hooks in _hooks
    if not extra:
        return None, hooks
    return None, _hook_list(hooks) + extra


def _hook_list(hooks: Any) -> list[Any]:
    return list(hooks) if isinstance(hooks, (list, tuple)) else ([] if hooks is None else [hooks])


def _has_v03_hooks(hooks: Any) -> bool:
    from agentbolt.compat.types import Hook

    return any(isinstance(h, Hook) for h in _hook_list(hooks))


def _with_v03_tracer(hooks: Any, tracer: Any) -> Any:
    """v0.3 ``Hook`` objects get the v0.3 tracer (``tracer=``, or a new ``OtelTracer``) as
    their ``tracer`` argument, so ``tracer.get_last_trace()`` works in them."""
    if not _has_v03_hooks(hooks):
        return hooks
    from agentbolt.compat.runner import v03_hooks
    from agentbolt.compat.tracer.base import Tracer
    from agentbolt.compat.tracer.otel import OtelTracer

    return v03_hooks(_hook_list(hooks), tracer if isinstance(tracer, Tracer) else OtelTracer())


def _algorithm(algorithm: Any, resources: dict[str, Any] | None, adapter: Any, llm_proxy: Any) -> Any:
    from agentbolt.algorithms.base import Algorithm

    if algorithm is None:
        return None
    if isinstance(algorithm, Algorithm):
        _name_the_prompt(algorithm, resources)
        return algorithm
    run, set_store = getattr(algorithm, "run", None), getattr(algorithm, "set_store", None)  # third-party: v0.3's
    if callable(run) and callable(set_store):
        from agentbolt.compat.algorithm.base import V03Algorithm

        return V03Algorithm(algorithm, initial_resources=resources, adapter=adapter, llm_proxy=llm_proxy)
    raise TypeError(
        f"Trainer(algorithm=...) got {algorithm!r}: pass an agentbolt algorithm (agentbolt.algorithms), "
        "an Agent Lightning Algorithm subclass, or a function decorated with @algo"
    )


def _name_the_prompt(algorithm: Any, resources: dict[str, Any] | None) -> None:
    """APO optimises the resource named ``config.prompt_name``: point it at the one prompt
    template among the initial resources when the default name is not there."""
    from agentbolt.types import PromptTemplate

    config = getattr(algorithm, "config", None)  # third-party: a v0.3 object (Agent Lightning's or ours)
    name = getattr(config, "prompt_name", None)  # third-party: a v0.3 object (Agent Lightning's or ours)
    if config is None or name is None or not resources or name in resources:
        return
    prompts = [k for k, v in resources.items() if isinstance(v, PromptTemplate)]
    if len(prompts) == 1:
        algorithm.config = config.model_copy(update={"prompt_name": prompts[0]})
