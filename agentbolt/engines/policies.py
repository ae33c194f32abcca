"""Several named policies of one base model behind one engine: one LoRA per agent.

::

    engine = PolicyEngines.local(model, tokenizer, ["planner", "solver"])
    gateway = Gateway(engine)
    # the planner calls with model="planner", the solver with model="solver"
    await engine.update_weights(lora=solver_lora, lora_scale=2.0, policy="solver")
    engine.versions            # {"planner": 0, "solver": 1}

A call goes to the policy named by its ``model`` (a harnessed program may add its agent,
``"solver#solver"``: the gateway strips ``#...`` first, see :mod:`agentbolt.gateway.origin`); a model name
that is no policy goes to ``default`` when one is set, else it is refused (404) with the
names served. Each policy has its own weights and its own **policy version**: the answer
carries the version of the policy that produced it, so every recorded token says which
weights, of which policy, sampled it. ``update_weights(..., policy=name)`` changes that
policy only. A trainer of one policy (GRPO with ``agent_match``) publishes to the
``default`` policy and copies its weights: set ``default`` to the policy it trains.

:meth:`PolicyEngines.local` serves each policy from its own
:class:`~agentbolt.engines.transformers_engine.TransformersEngine` on its own copy of the
base weights (the local engine merges a LoRA into the weights it serves, so LoRAs
cannot share one copy): memory grows with the number of policies — fine for small models
on CPU. vLLM serves many LoRAs on one copy of the base model (``--enable-lora``):
put one :class:`~agentbolt.engines.VLLMEngine` per LoRA name in ``PolicyEngines``.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentbolt.engines.engine import Engine, EngineError
from agentbolt.engines.sse import close_stream
from agentbolt.engines.weight_update import WeightUpdate

if TYPE_CHECKING:
    import torch

__all__ = ["PolicyEngines"]


class PolicyEngines(Engine):
    """Route each call to the engine of the policy its ``model`` names (see module doc)."""

    name = "policies"

    def __init__(self, engines: Mapping[str, Engine], *, default: str | None = None) -> None:
        if not engines:
            raise ValueError("PolicyEngines needs at least one named engine: PolicyEngines({'solver': engine, ...})")
        if default is not None and default not in engines:
            raise ValueError(f"default policy {default!r} is not one of {sorted(engines)}")
        self.engines = dict(engines)
        self.default = default
        first = next(iter(self.engines.values()))
        self.returns_token_ids = all(e.returns_token_ids for e in self.engines.values())
        self.supports_weight_updates = all(e.supports_weight_updates for e in self.engines.values())
        self.supports_rebase = all(e.supports_rebase for e in self.engines.values())
        self.weight_formats = first.weight_formats
        self.tokenizer = first.tokenizer
        self.tool_parser = first.tool_parser

    @classmethod
    def local(cls, model: Any, tokenizer: Any, names: Sequence[str], *, default: str | None = None,
              **engine_kw: Any) -> PolicyEngines:
        """One local transformers engine per name, each on a copy of ``model`` served
        under that name (``engine_kw`` go to every engine)."""
        from agentbolt.engines.transformers_engine import TransformersEngine

        if len(set(names)) != len(names) or not names:
            raise ValueError(f"policy names must be distinct and at least one, got {list(names)}")
        return cls({name: TransformersEngine(copy.deepcopy(model), tokenizer, model_name=name, **engine_kw)
                    for name in names}, default=default)

    # ---- routing ---------------------------------------------------------------------------
    def policy_of(self, body: Mapping[str, Any]) -> str:
        """The policy a call is for: its ``model`` when that is a policy, else ``default``."""
        model = body.get("model")
        if isinstance(model, str) and model in self.engines:
            return model
        if self.default is not None:
            return self.default
        raise EngineError(404, f"model {model!r} is not served here: ask for one of the policies "
                               f"{sorted(self.engines)} (\"model\": \"<policy>\")",
                          {"error": {"message": f"model {model!r} is not one of the policies {sorted(self.engines)}",
                                     "type": "invalid_request_error", "param": "model", "code": "model_not_found"}})

    def engine_of(self, policy: str | None) -> Engine:
        """The engine of ``policy`` (None: the default, or the only one)."""
        if policy is None:
            if self.default is not None:
                return self.engines[self.default]
            if len(self.engines) == 1:
                return next(iter(self.engines.values()))
            raise ValueError(f"which policy? name one of {sorted(self.engines)} (policy=...)")
        try:
            return self.engines[policy]
        except KeyError:
            raise ValueError(f"unknown policy {policy!r}: the policies are {sorted(self.engines)}") from None

    @property
    def versions(self) -> dict[str, int | None]:
        """Each policy's version."""
        return {name: e.policy_version for name, e in self.engines.items()}

    @property
    def policy_version(self) -> int | None:
        """The default policy's version (the only one's, with one policy); None otherwise
        (the answers carry each policy's own)."""
        only = (
            self.default if self.default is not None else (next(iter(self.engines)) if len(self.engines) == 1 else None)
        )
        return self.engines[only].policy_version if only is not None else None

    # ---- the default policy, for a trainer of one policy -------------------------------------
    def _default_engine(self) -> Engine | None:
        if self.default is not None:
            return self.engines[self.default]
        return next(iter(self.engines.values())) if len(self.engines) == 1 else None

    def local_model(self) -> torch.nn.Module | None:
        """The default policy's model (None without a default): GRPO trains and probes it."""
        engine = self._default_engine()
        return engine.local_model() if engine is not None else None

    @property
    def device(self) -> torch.device | None:
        engine = self._default_engine()
        return engine.device if engine is not None else None

    @property
    def dtype(self) -> torch.dtype | None:
        engine = self._default_engine()
        return engine.dtype if engine is not None else None

    def rebase_loras(self) -> None:
        """See :meth:`TransformersEngine.rebase_loras`; the default policy's."""
        engine = self._default_engine()
        if engine is None:
            raise EngineError(501, "these policies have no default: rebase one policy's engine (PolicyControl)")
        engine.rebase_loras()

    # ---- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        for engine in self.engines.values():
            await engine.start()

    async def close(self) -> None:
        await asyncio.gather(*(e.close() for e in self.engines.values()))

    async def models(self) -> dict[str, Any]:
        data = []
        for name, engine in self.engines.items():
            listed = (await engine.models()).get("data") or [{}]
            data.append({**listed[0], "id": name, "object": "model", "owned_by": "agentbolt"})
        return {"object": "list", "data": data}

    # ---- calls -----------------------------------------------------------------------------
    async def chat_completions(self, body: dict[str, Any], *, replica: int = 0) -> dict[str, Any]:
        policy = self.policy_of(body)
        return _named(await self.engines[policy].chat_completions(body, replica=replica), policy)

    def stream_chat_completions(self, body: dict[str, Any], *, replica: int = 0) -> AsyncIterator[dict[str, Any]]:
        policy = self.policy_of(body)
        return _named_stream(self.engines[policy].stream_chat_completions(body, replica=replica), policy)

    async def completions(self, body: dict[str, Any], *, replica: int = 0) -> dict[str, Any]:
        policy = self.policy_of(body)
        return _named(await self.engines[policy].completions(body, replica=replica), policy)

    def stream_completions(self, body: dict[str, Any], *, replica: int = 0) -> AsyncIterator[dict[str, Any]]:
        policy = self.policy_of(body)
        return _named_stream(self.engines[policy].stream_completions(body, replica=replica), policy)

    # ---- weights ---------------------------------------------------------------------------
    async def load_weights(self, update: WeightUpdate, *, version: int | None = None,
                           policy: str | None = None) -> int:
        """Load weights into ``policy`` only (see :meth:`Engine.load_weights`); returns
        that policy's new version."""
        return await self.engine_of(policy).load_weights(update, version=version)

    async def update_weights(self, state_dict: Mapping[str, Any] | None = None, *, lora: Any = None,
                             lora_scale: float | None = None, lora_path: str | None = None,
                             version: int | None = None, policy: str | None = None) -> int:
        """:meth:`load_weights` spelled with keywords."""
        update = WeightUpdate(state_dict, lora=lora, lora_scale=lora_scale, lora_path=lora_path)
        return await self.load_weights(update, version=version, policy=policy)


def _named(answer: dict[str, Any], policy: str) -> dict[str, Any]:
    answer["model"] = policy
    return answer


async def _named_stream(chunks: AsyncIterator[dict[str, Any]], policy: str) -> AsyncIterator[dict[str, Any]]:
    try:
        async for chunk in chunks:
            chunk["model"] = policy
            yield chunk
    finally:
        await close_stream(chunks)
