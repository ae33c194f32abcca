"""Every public name of Agent Lightning v0.3 (``agentlightning.__all__`` and friends:
116 names), and where agentbolt provides it or why it does not.

This table drives ``agentbolt.compat``'s lazy attributes and the v0.3 names of
``import agentbolt as agl``; ``tests/compat/test_names.py`` checks it against the
migration guide.
"""

from __future__ import annotations

__all__ = ["PROVIDED", "SHADOWED", "UNSUPPORTED", "V03_NAMES"]

_C = "agentbolt.compat"

PROVIDED: dict[str, str] = {
    # store
    "LightningStore": f"{_C}.store:LightningStore",
    "InMemoryLightningStore": f"{_C}.store:InMemoryLightningStore",
    "LightningStoreClient": f"{_C}.store_client:LightningStoreClient",
    "LightningStoreServer": f"{_C}.store_server:LightningStoreServer",
    "LightningStoreThreaded": f"{_C}.store:LightningStoreThreaded",
    "LightningStoreCapabilities": f"{_C}.store:LightningStoreCapabilities",
    "LightningStoreStatistics": f"{_C}.store:LightningStoreStatistics",
    # agents and runners
    "LitAgent": "agentbolt.runner.agent:LitAgent",
    "rollout": "agentbolt.runner.agent:rollout",
    "llm_rollout": f"{_C}.litagent:llm_rollout",
    "prompt_rollout": f"{_C}.litagent:prompt_rollout",
    "LitAgentRunner": f"{_C}.runner:LitAgentRunner",
    "Runner": "agentbolt.runner.runner:Runner",
    "Hook": f"{_C}.types:Hook",
    # trainer, strategies
    "Trainer": "agentbolt.trainer:Trainer",
    "build_component": f"{_C}.components:build_component",
    "ExecutionStrategy": "agentbolt.execution.base:ExecutionStrategy",
    "SharedMemoryExecutionStrategy": f"{_C}.execution:SharedMemoryExecutionStrategy",
    "ClientServerExecutionStrategy": f"{_C}.execution:ClientServerExecutionStrategy",
    "ExecutionEvent": f"{_C}.execution:ExecutionEvent",
    "ThreadingEvent": f"{_C}.execution:ThreadingEvent",
    "MultiprocessingEvent": f"{_C}.execution:MultiprocessingEvent",
    # algorithms
    "Algorithm": f"{_C}.algorithm.base:Algorithm",
    "algo": f"{_C}.algorithm.decorator:algo",
    "FastAlgorithm": f"{_C}.algorithm.fast:FastAlgorithm",
    "Baseline": f"{_C}.algorithm.fast:Baseline",
    "APO": f"{_C}.algorithm.apo:APO",
    # emitters and readers
    "emit_reward": "agentbolt.tracing.emitters:emit_reward",
    "emit_message": f"{_C}.emitter.options:emit_message",
    "emit_object": f"{_C}.emitter.options:emit_object",
    "emit_exception": f"{_C}.emitter.options:emit_exception",
    "emit_annotation": f"{_C}.emitter.options:emit_annotation",
    "operation": "agentbolt.tracing.emitters:operation",
    "reward": f"{_C}.emitter:reward",
    "get_reward_value": f"{_C}.emitter:get_reward_value",
    "get_rewards_from_span": f"{_C}.emitter:get_rewards_from_span",
    "is_reward_span": f"{_C}.emitter:is_reward_span",
    "find_reward_spans": f"{_C}.emitter:find_reward_spans",
    "find_final_reward": f"{_C}.emitter:find_final_reward",
    "get_message_value": f"{_C}.emitter:get_message_value",
    "get_object_value": f"{_C}.emitter:get_object_value",
    # tracers
    "Tracer": f"{_C}.tracer.base:Tracer",
    "OtelTracer": f"{_C}.tracer.otel:OtelTracer",
    "AgentOpsTracer": f"{_C}.tracer.agentops:AgentOpsTracer",
    "DummyTracer": f"{_C}.tracer.dummy:DummyTracer",
    "get_active_tracer": f"{_C}.tracer.base:get_active_tracer",
    "set_active_tracer": f"{_C}.tracer.base:set_active_tracer",
    "clear_active_tracer": f"{_C}.tracer.base:clear_active_tracer",
    # adapters
    "Adapter": f"{_C}.adapter:Adapter",
    "TraceAdapter": f"{_C}.adapter:TraceAdapter",
    "OtelTraceAdapter": f"{_C}.adapter:OtelTraceAdapter",
    "TraceToTripletBase": f"{_C}.adapter:TraceToTripletBase",
    "TracerTraceToTriplet": f"{_C}.adapter:TracerTraceToTriplet",
    "LlmProxyTraceToTriplet": f"{_C}.adapter:LlmProxyTraceToTriplet",
    "TraceToMessages": f"{_C}.adapter:TraceToMessages",
    # the model proxy
    "LLMProxy": f"{_C}.llm_proxy:LLMProxy",
    # logging, environment
    "setup_logging": f"{_C}.logging:setup",
    "setup_module_logging": f"{_C}.logging:setup_module",
    "configure_logger": f"{_C}.logging:configure_logger",
    "LightningEnvVar": f"{_C}.env_var:LightningEnvVar",
    "resolve_bool_env_var": f"{_C}.env_var:resolve_bool_env_var",
    "resolve_int_env_var": f"{_C}.env_var:resolve_int_env_var",
    "resolve_str_env_var": f"{_C}.env_var:resolve_str_env_var",
    # types
    "Dataset": f"{_C}.types:Dataset",
    "NamedResources": f"{_C}.types:NamedResources",
    "ResourcesUpdate": f"{_C}.types:ResourcesUpdate",
    "Resource": f"{_C}.types:Resource",
    "ResourceUnion": f"{_C}.types:ResourceUnion",
    "LLM": "agentbolt.types:LLM",
    "ProxyLLM": f"{_C}.types:ProxyLLM",
    "PromptTemplate": "agentbolt.types:PromptTemplate",
    "Rollout": "agentbolt.types:Rollout",
    "AttemptedRollout": f"{_C}.types:AttemptedRollout",
    "Attempt": "agentbolt.types:Attempt",
    "RolloutConfig": "agentbolt.types:RolloutConfig",
    "RolloutMode": "agentbolt.types:RolloutMode",
    "RolloutStatus": "agentbolt.types:RolloutStatus",
    "AttemptStatus": "agentbolt.types:AttemptStatus",
    "Worker": "agentbolt.types:Worker",
    "WorkerStatus": "agentbolt.types:WorkerStatus",
    "EnqueueRolloutRequest": f"{_C}.types:EnqueueRolloutRequest",
    "PaginatedResult": f"{_C}.types:PaginatedResult",
    "Triplet": f"{_C}.types:Triplet",
    "TaskInput": f"{_C}.types:TaskInput",
    "RolloutRawResult": f"{_C}.types:RolloutRawResult",
    "Span": f"{_C}.types.span:Span",
    "SpanLike": f"{_C}.types:SpanLike",
    "SpanNames": f"{_C}.types:SpanNames",
    "SpanAttributeNames": f"{_C}.types:SpanAttributeNames",
    "StatusCode": f"{_C}.types:StatusCode",
    "AttributeValue": f"{_C}.types:AttributeValue",
    "Attributes": f"{_C}.types:Attributes",
    # v0.3's span model parts (agentbolt's Span keeps them as plain fields)
    "TraceState": f"{_C}.types.tracer:TraceState",
    "SpanContext": f"{_C}.types.tracer:SpanContext",
    "TraceStatus": f"{_C}.types.tracer:TraceStatus",
    "Event": f"{_C}.types.tracer:Event",
    "Link": f"{_C}.types.tracer:Link",
    "OtelResource": f"{_C}.types.tracer:OtelResource",
    "SpanCoreFields": f"{_C}.types.tracer:SpanCoreFields",
    "SpanRecordingContext": f"{_C}.types.tracer:SpanRecordingContext",
}

_LEGACY = (
    "v0.1/v0.2 API that v0.3 already deprecated (the HTTP task server and client); agentbolt's "
    "store is the one channel: enqueue with LightningStore/Store, run agents with Trainer or LitAgentRunner"
)

UNSUPPORTED: dict[str, str] = {
    "VERL": "verl-only trainer (FSDP + vLLM workers); agentbolt trains with its own GRPO "
            "(agentbolt.algorithms.GRPO, LoRA or full, vLLM or in-process engine)",
    "CollectionBasedLightningStore": "base class of v0.3's collection stores (memory, MongoDB); agentbolt's "
                                     "backends subclass agentbolt.Store; MongoDB is not a backend (use SQLite "
                                     "or PostgreSQL)",
    "LegacyAgentRunner": _LEGACY,
    "AgentLightningClient": _LEGACY,
    "AgentLightningServer": _LEGACY,
    "DevTaskLoader": _LEGACY,
    "RolloutLegacy": _LEGACY,
    "RolloutRawResultLegacy": _LEGACY,
    "Task": _LEGACY,
    "TaskIfAny": _LEGACY,
    "GenericResponse": _LEGACY,
    "ParallelWorkerBase": "v0.3's init/init_worker/teardown life cycle of components; agentbolt's Trainer "
                          "builds runners itself (LitAgentRunner keeps the methods)",
    "lightning_cli": "a command-line builder for v0.3's component classes; agentbolt's CLI is `agentbolt` "
                     "(train scripts take their own arguments)",
    "FilterOptions": "the query language of v0.3's collection stores; agentbolt's LightningStore methods "
                     "take v0.3's keyword filters directly",
    "SortOptions": "as FilterOptions: sort with sort_by=/sort_order= on the LightningStore methods",
    "FilterField": "as FilterOptions",
}

V03_NAMES = frozenset(PROVIDED) | frozenset(UNSUPPORTED)

SHADOWED = frozenset({"Tracer", "Span", "emit_message", "emit_object", "emit_exception", "emit_annotation"})
"""v0.3 names that ``import agentbolt as agl`` resolves to agentbolt's own, different
object (``agl.Tracer`` is agentbolt's per-runner tracer; ``agl.emit_object`` and the other
three emitters take agentbolt's keywords); ``agentbolt.compat`` has v0.3's."""
