"""The engines: what generates the tokens of a model call. The gateway
(:mod:`agentbolt.gateway`) routes each call of a rollout to one and records it; an engine
answers OpenAI-shaped chat and completions calls, with token ids and logprobs where it
can, and takes new weights from a trainer.

* :class:`Engine` — the interface (``engine.py``); :class:`EngineError` — an answer in
  the API's own error shape.
* :class:`VLLMEngine`, :class:`OpenAIEngine` — engine servers over HTTP (``http_engines.py``);
  :class:`SGLangEngine` — SGLang on its native routes (``sglang_engine.py``, ``sglang_native.py``);
  runtime LoRAs kept in step over replicas (``served_lora.py``).
* ``TransformersEngine`` (``transformers_engine.py``, needs torch) — agentbolt's own
  in-process engine: continuous batching, prefix cache, sampling (``local/``).
* :class:`PolicyEngines` — several named policies, one engine each (``policies.py``).
* :class:`EngineSpec` — an engine described as data, built where it runs (``spec.py``).
* :func:`engine_app` — any engine served as a plain OpenAI-compatible app.
* Token-level chat (``token_chat.py``, ``chat_template.py``, ``history.py``, ``tools/``):
  chat calls rendered with the policy's template and answered on token ids, tool calls
  parsed from the text — for the local engine and for the gateway in front of vLLM and SGLang.

See ``docs/gateway.md``.
"""

from agentbolt.engines.engine import Engine, EngineError
from agentbolt.engines.engine_app import engine_app
from agentbolt.engines.http_engines import OpenAIEngine, VLLMEngine
from agentbolt.engines.policies import PolicyEngines
from agentbolt.engines.sglang_engine import SGLangEngine
from agentbolt.engines.spec import EngineSpec
from agentbolt.engines.weight_update import WeightUpdate

__all__ = [
    "Engine",
    "EngineError",
    "EngineSpec",
    "OpenAIEngine",
    "PolicyEngines",
    "SGLangEngine",
    "VLLMEngine",
    "WeightUpdate",
    "engine_app",
]
