"""Every module of Agent Lightning v0.3.0, and the names a v0.3 user imports from it.

``import agentlightning.<path>`` becomes ``import agentbolt.compat.<path>`` for every
``<path>`` of :data:`MODULES`: the modules with code of their own are files of this
package (``store``, ``tracer.otel``, ``types``...); the others are made from this table
on import (:mod:`.submodules`), each name resolved on first use. A name v0.3 had but
agentbolt does not provide raises :class:`~agentbolt.compat.UnsupportedV03NameError`
saying why and what to use instead; ``agentbolt migrate`` reports the same reasons.

The names of a module are its ``__all__`` at v0.3.0 where it had one, else the public
names v0.3's docs, examples and tests import from it. v0.3's top-level names
(:data:`.names.PROVIDED`, :data:`.names.UNSUPPORTED`) are listed by name only; names
found only in a submodule carry their own target or reason.
``tests/compat/test_surface.py`` walks the whole table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["MODULES", "V03Module"]

_C = "agentbolt.compat"


@dataclass(frozen=True)
class V03Module:
    """One module of ``agentlightning`` 0.3.0 as ``agentbolt.compat`` provides it."""

    names: tuple[str, ...] = ()
    """v0.3 top-level names found in this module too (their target or reason is in :mod:`.names`)."""
    extra: Mapping[str, str] = field(default_factory=dict)
    """Names of this module only: ``"agentbolt.module:attribute"``."""
    unsupported: Mapping[str, str] = field(default_factory=dict)
    """Names of this module only that agentbolt does not provide: why, and what to use."""
    reason: str | None = None
    """Set when nothing of the module is provided: why (every name then raises with it)."""


_STORE = ("LightningStore", "LightningStoreCapabilities", "LightningStoreStatistics", "LightningStoreClient",
          "LightningStoreServer", "InMemoryLightningStore", "CollectionBasedLightningStore", "LightningStoreThreaded")
_TYPES_CORE = ("Triplet", "RolloutLegacy", "Task", "TaskInput", "TaskIfAny", "RolloutRawResultLegacy",
               "RolloutRawResult", "RolloutMode", "GenericResponse", "ParallelWorkerBase", "Dataset",
               "AttemptStatus", "RolloutStatus", "RolloutConfig", "Rollout", "Attempt", "AttemptedRollout",
               "EnqueueRolloutRequest", "Hook", "Worker", "WorkerStatus", "PaginatedResult", "FilterOptions",
               "SortOptions", "FilterField")
_TYPES_RESOURCES = ("Resource", "LLM", "ProxyLLM", "PromptTemplate", "ResourceUnion", "NamedResources",
                    "ResourcesUpdate")
_TYPES_TRACER = ("AttributeValue", "Attributes", "TraceState", "SpanContext", "TraceStatus", "Event", "Link",
                 "OtelResource", "Span", "SpanNames", "SpanAttributeNames", "SpanLike", "StatusCode",
                 "SpanCoreFields", "SpanRecordingContext")
_REWARD = ("reward", "emit_reward", "get_reward_value", "get_rewards_from_span", "is_reward_span",
           "find_reward_spans", "find_final_reward")
_EMITTER = ("operation", *_REWARD, "emit_message", "emit_object", "emit_exception", "emit_annotation",
            "get_message_value", "get_object_value")
_TRACER = ("AgentOpsTracer", "Tracer", "OtelTracer", "DummyTracer", "get_active_tracer", "set_active_tracer",
           "clear_active_tracer")
_EXECUTION = ("ExecutionStrategy", "ClientServerExecutionStrategy", "ExecutionEvent", "ThreadingEvent",
              "MultiprocessingEvent", "SharedMemoryExecutionStrategy")
_ADAPTER = ("TraceAdapter", "OtelTraceAdapter", "Adapter", "TraceToTripletBase", "TracerTraceToTriplet",
            "LlmProxyTraceToTriplet", "TraceToMessages")

_COLLECTIONS = ("v0.3's collection layer (the storage of its memory and MongoDB stores); agentbolt's backends "
                "(agentbolt.MemoryStore, SqliteStore, PostgresStore) implement agentbolt.Store directly; "
                "write a backend by subclassing agentbolt.Store")
_MONGO = "MongoDB is not an agentbolt backend: use agentbolt.SqliteStore or agentbolt.PostgresStore"
_TREE = ("v0.3's span-tree internals of TracerTraceToTriplet; agentbolt's TripletAdapter matches rewards "
         "to model calls itself (agentbolt.adapters.TripletAdapter)")
_INSTRUMENTATION = ("v0.3's patches of AgentOps, LiteLLM, vLLM and Weave; agentbolt instruments openai, "
                    "LangChain and LiteLLM itself (OpenInference) inside every rollout: nothing to call")
_VERL = ("the verl trainer (FSDP + vLLM workers) is not part of agentbolt; train with "
         "agentbolt.algorithms.GRPO (LoRA or full, vLLM or the in-process engine)")
_CLI = ("v0.3's `agl` command line; agentbolt's is `agentbolt` (`agl store` is `agentbolt server`, "
        "see docs/cli.md)")
_LEGACY = ("v0.1/v0.2 API that v0.3 already deprecated (the HTTP task server and client); serve a store "
           "with LightningStoreServer or `agentbolt server`, run agents with Trainer or LitAgentRunner")
_LAUNCHER = ("v0.3's internal server launcher (uvicorn/gunicorn); agentbolt's servers start with "
             "`agentbolt server` or LightningStoreServer.start()")

MODULES: dict[str, V03Module] = {
    "": V03Module(),  # agentbolt.compat itself: every name of .names
    "adapter": V03Module(_ADAPTER),
    "adapter.base": V03Module(("Adapter", "OtelTraceAdapter", "TraceAdapter")),
    "adapter.messages": V03Module(
        ("TraceToMessages",),
        extra={"OpenAIMessages": f"{_C}.adapter:OpenAIMessages"},
    ),
    "adapter.triplet": V03Module(
        ("TraceToTripletBase", "TracerTraceToTriplet", "LlmProxyTraceToTriplet"),
        unsupported={"TraceTree": _TREE, "Transition": _TREE, "RewardMatchPolicy": _TREE},
    ),
    "algorithm": V03Module(("Algorithm", "algo", "FastAlgorithm", "Baseline", "APO", "VERL")),
    "algorithm.apo": V03Module(("APO",)),
    "algorithm.apo.apo": V03Module(
        ("APO",),
        unsupported={
            "RolloutResultForAPO": "an internal record of v0.3's APO; agentbolt's APO keeps its own history "
                                   "(agentbolt.algorithms.APO)",
            "VersionedPromptTemplate": "an internal record of v0.3's APO; agentbolt publishes each prompt as "
                                       "a resources version",
        },
    ),
    "algorithm.base": V03Module(("Algorithm",)),
    "algorithm.decorator": V03Module(
        ("algo",), extra={"FunctionalAlgorithm": f"{_C}.algorithm.decorator:FunctionalAlgorithm"},
    ),
    "algorithm.fast": V03Module(("FastAlgorithm", "Baseline")),
    "algorithm.utils": V03Module(
        extra={"batch_iter_over_dataset": f"{_C}.algorithm.batches:batch_iter_over_dataset"},
        unsupported={
            "with_store": "a decorator of v0.3's algorithm internals; inside an Algorithm use self.get_store()",
            "with_llm_proxy": "a decorator of v0.3's algorithm internals; inside an Algorithm use "
                              "self.get_llm_proxy()",
        },
    ),
    "algorithm.verl": V03Module(("VERL",)),
    "algorithm.verl.interface": V03Module(("VERL",)),
    "cli": V03Module(reason=_CLI),
    "cli.prometheus": V03Module(reason=_CLI),
    "cli.store": V03Module(reason=_CLI),
    "cli.vllm": V03Module(reason=_CLI),
    "client": V03Module(("AgentLightningClient", "DevTaskLoader")),
    "config": V03Module(("lightning_cli",)),
    "emitter": V03Module(_EMITTER),
    "emitter.annotation": V03Module(("emit_annotation", "operation")),
    "emitter.exception": V03Module(("emit_exception",)),
    "emitter.message": V03Module(("emit_message", "get_message_value")),
    "emitter.object": V03Module(("emit_object", "get_object_value")),
    "emitter.reward": V03Module(_REWARD),
    "env_var": V03Module(("LightningEnvVar", "resolve_bool_env_var", "resolve_int_env_var", "resolve_str_env_var")),
    "execution": V03Module(_EXECUTION),
    "execution.base": V03Module(("ExecutionStrategy",)),
    "execution.client_server": V03Module(("ClientServerExecutionStrategy",)),
    "execution.events": V03Module(("ExecutionEvent", "ThreadingEvent", "MultiprocessingEvent")),
    "execution.inter_process": V03Module(
        unsupported={"InterProcessExecutionStrategy": "unfinished in v0.3 (its registry entry is commented "
                                                      "out); use ClientServerExecutionStrategy (\"cs\")"},
    ),
    "execution.shared_memory": V03Module(("SharedMemoryExecutionStrategy",)),
    "instrumentation": V03Module(reason=_INSTRUMENTATION),
    "instrumentation.agentops": V03Module(reason=_INSTRUMENTATION),
    "instrumentation.agentops_langchain": V03Module(reason=_INSTRUMENTATION),
    "instrumentation.litellm": V03Module(reason=_INSTRUMENTATION),
    "instrumentation.vllm": V03Module(reason=_INSTRUMENTATION),
    "instrumentation.weave": V03Module(reason=_INSTRUMENTATION),
    "litagent": V03Module(("LitAgent", "llm_rollout", "prompt_rollout", "rollout")),
    "litagent.decorator": V03Module(("llm_rollout", "prompt_rollout", "rollout"),
                                    extra={"FunctionalLitAgent": "agentbolt.runner.agent:RolloutFunction"}),
    "litagent.litagent": V03Module(("LitAgent",)),
    "llm_proxy": V03Module(("LLMProxy",), extra={"ModelConfig": f"{_C}.llm_proxy:ModelConfig"}),
    "logging": V03Module(extra={
        "setup": f"{_C}.logging:setup",
        "setup_module": f"{_C}.logging:setup_module",
        "configure_logger": f"{_C}.logging:configure_logger",
    }),
    "reward": V03Module(_REWARD),
    "runner": V03Module(("Runner", "LegacyAgentRunner", "LitAgentRunner")),
    "runner.agent": V03Module(("LitAgentRunner",)),
    "runner.base": V03Module(("Runner",)),
    "runner.legacy": V03Module(("LegacyAgentRunner",)),
    "semconv": V03Module(extra={
        name: f"{_C}.semconv:{name}"
        for name in ("AGL_ANNOTATION", "AGL_MESSAGE", "AGL_OBJECT", "AGL_EXCEPTION", "AGL_OPERATION",
                     "AGL_REWARD", "AGL_VIRTUAL", "LightningResourceAttributes", "LightningSpanAttributes",
                     "RewardAttributes", "RewardPydanticModel", "LinkAttributes", "LinkPydanticModel")
    }),
    "server": V03Module(("AgentLightningServer",)),
    "store": V03Module(_STORE),
    "store.base": V03Module(("LightningStore", "LightningStoreCapabilities", "LightningStoreStatistics"),
                            extra={"UNSET": f"{_C}.store.unset:UNSET", "Unset": f"{_C}.store.unset:Unset"}),
    "store.client_server": V03Module(("LightningStoreServer", "LightningStoreClient")),
    "store.collection": V03Module(
        ("FilterOptions", "SortOptions", "PaginatedResult"),
        unsupported={name: _COLLECTIONS for name in (
            "AtomicLabels", "AtomicMode", "Collection", "Queue", "KeyValue", "LightningCollections",
            "ListBasedCollection", "DequeBasedQueue", "DictBasedKeyValue", "InMemoryLightningCollections")},
    ),
    "store.collection.base": V03Module(
        unsupported={name: _COLLECTIONS for name in ("Collection", "Queue", "KeyValue", "LightningCollections")},
    ),
    "store.collection.memory": V03Module(
        unsupported={name: _COLLECTIONS for name in (
            "ListBasedCollection", "DequeBasedQueue", "DictBasedKeyValue", "InMemoryLightningCollections")},
    ),
    "store.collection.mongo": V03Module(reason=_MONGO),
    "store.collection_based": V03Module(("CollectionBasedLightningStore",)),
    "store.memory": V03Module(("InMemoryLightningStore",)),
    "store.mongo": V03Module(unsupported={"MongoLightningStore": _MONGO}),
    "store.sqlite": V03Module(),  # empty in v0.3.0 too; agentbolt's SQLite store is agentbolt.SqliteStore
    "store.threading": V03Module(("LightningStoreThreaded",)),
    "store.utils": V03Module(unsupported={
        name: "an internal of v0.3's stores (rollout status bookkeeping); agentbolt's Store does it itself"
        for name in ("rollout_status_from_attempt", "scan_unhealthy_rollouts")}),
    "tracer": V03Module(_TRACER),
    "tracer.agentops": V03Module(("AgentOpsTracer",)),
    "tracer.base": V03Module(("Tracer", "get_active_tracer", "set_active_tracer", "clear_active_tracer")),
    "tracer.dummy": V03Module(("DummyTracer",)),
    "tracer.otel": V03Module(("OtelTracer",)),
    "tracer.weave": V03Module(unsupported={
        "WeaveTracer": "Weave is not supported; OtelTracer records the same calls (agentbolt instruments "
                       "openai, LangChain and LiteLLM itself)"}),
    "trainer": V03Module(("Trainer", "build_component")),
    "trainer.init_utils": V03Module(("build_component",), extra={
        name: f"{_C}.components:{name}"
        for name in ("OptionalDefaults", "instantiate_component", "instantiate_from_spec", "load_class")}),
    "trainer.legacy": V03Module(unsupported={"TrainerLegacy": _LEGACY}),
    "trainer.registry": V03Module(
        extra={"ExecutionStrategyRegistry": f"{_C}.execution:ExecutionStrategyRegistry"}),
    "trainer.trainer": V03Module(("Trainer",)),
    "types": V03Module((*_TYPES_CORE, *_TYPES_RESOURCES, *_TYPES_TRACER)),
    "types.core": V03Module(_TYPES_CORE),
    "types.resources": V03Module(_TYPES_RESOURCES),
    "types.tracer": V03Module(_TYPES_TRACER),
    "utils": V03Module(),
    "utils.id": V03Module(extra={"generate_id": f"{_C}.utils.id:generate_id"}),
    "utils.metrics": V03Module(extra={
        name: f"{_C}.utils.metrics:{name}"
        for name in ("MetricsBackend", "ConsoleMetricsBackend", "PrometheusMetricsBackend", "MultiMetricsBackend")
    }),
    "utils.otel": V03Module(extra={
        name: f"{_C}.utils.otel:{name}"
        for name in ("full_qualified_name", "get_tracer_provider", "get_tracer", "make_tag_attributes",
                     "extract_tags_from_attributes", "make_link_attributes", "query_linked_spans",
                     "extract_links_from_attributes", "filter_attributes", "filter_and_unflatten_attributes",
                     "flatten_attributes", "unflatten_attributes", "sanitize_attribute_value",
                     "sanitize_attributes", "sanitize_list_attribute_sanity", "check_attributes_sanity",
                     "format_exception_attributes")
    }),
    "utils.otlp": V03Module(unsupported={
        name: "v0.3's OTLP receiver internals; agentbolt's server receives OTLP at /v1/traces itself"
        for name in ("handle_otlp_export", "spans_from_proto", "LightningStoreOTLPExporter")}),
    "utils.server_launcher": V03Module(unsupported={
        name: _LAUNCHER for name in ("PythonServerLauncher", "PythonServerLauncherArgs", "LaunchMode")}),
    "utils.system_snapshot": V03Module(unsupported={
        "system_snapshot": "v0.3's diagnostics helper; `agentbolt version` and the server's /health "
                           "describe an agentbolt install"}),
    "verl": V03Module(reason=_VERL),
    "verl.async_server": V03Module(reason=_VERL),
    "verl.daemon": V03Module(reason=_VERL),
    "verl.dataset": V03Module(reason=_VERL),
    "verl.entrypoint": V03Module(reason=_VERL),
    "verl.trainer": V03Module(reason=_VERL),
}
