"""Two policies, two LoRAs, one engine: each agent's calls are answered by its own
LoRA (the answers differ as the LoRAs do), an update changes only its own policy, and
every policy has its own version — in the answers and in the gateway's spans."""

from __future__ import annotations

import copy
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="the transformers engine needs torch")
peft = pytest.importorskip("peft")

from agentbolt.engines.engine import EngineError
from agentbolt.engines.policies import PolicyEngines
from agentbolt.engines.transformers_engine import TransformersEngine
from agentbolt.gateway import Gateway, GatewayConfig
from agentbolt.gateway.origin import origin_of
from agentbolt.models import tiny_model
from agentbolt.store.memory import MemoryStore

MESSAGES = [{"role": "user", "content": "Say something."}]
KW: dict[str, Any] = {"max_batch_size": 4, "default_max_tokens": 6, "num_threads": 1}


def _random_lora(model: Any, seed: int) -> Any:
    """A random LoRA (B ≠ 0, so it changes the answers) on a copy of ``model``."""
    torch.manual_seed(seed)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    lora = peft.get_peft_model(copy.deepcopy(model), config)
    with torch.no_grad():
        for name, p in lora.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    return lora


async def _ask(engine: Any, model: str) -> tuple[list[int], list[float], Any]:
    answer = await engine.chat_completions({"model": model, "messages": MESSAGES, "temperature": 0, "logprobs": True})
    choice = answer["choices"][0]
    return choice["token_ids"], [t["logprob"] for t in choice["logprobs"]["content"]], answer


async def test_each_policy_answers_with_its_own_lora_and_version() -> None:
    model, tokenizer = tiny_model(seed=0)
    engines = PolicyEngines.local(model, tokenizer, ["planner", "solver"], **KW)
    solver_lora, planner_lora = _random_lora(model, 1), _random_lora(model, 2)
    reference = TransformersEngine(copy.deepcopy(model), tokenizer, **KW)  # one LoRA at a time, for comparison
    await engines.start()
    await reference.start()
    try:
        base = await _ask(reference, "x")
        assert (await _ask(engines, "planner"))[:2] == (await _ask(engines, "solver"))[:2] == base[:2]

        assert await engines.update_weights(lora=solver_lora, policy="solver") == 1
        assert engines.versions == {"planner": 0, "solver": 1}
        await reference.update_weights(lora=solver_lora)
        with_solver = await _ask(reference, "x")
        ids, lps, answer = await _ask(engines, "solver")
        assert (ids, lps) == with_solver[:2] and (ids, lps) != base[:2]  # the solver's LoRA answers
        assert (answer["model"], answer["policy_version"]) == ("solver", 1)
        planner_ids, planner_lps, _ = await _ask(engines, "planner")
        # the planner is untouched (its logprobs up to float rounding: this engine reuses the K/V
        # of its earlier identical call, the reference computes it afresh)
        assert planner_ids == base[0] and planner_lps == pytest.approx(base[1], abs=1e-5)

        assert await engines.update_weights(lora=planner_lora, policy="planner") == 1
        await reference.update_weights(lora=planner_lora)
        planner = await _ask(engines, "planner")
        with_planner = await _ask(reference, "x")
        # the same tokens; logprobs up to float rounding (whether either engine reuses the K/V
        # of an earlier call of the same prompt depends on timing)
        assert planner[0] == with_planner[0] and planner[1] == pytest.approx(with_planner[1], abs=1e-5)
        assert planner[:2] != with_solver[:2]
        solver = await _ask(engines, "solver")  # the solver keeps its own (to rounding, as above)
        assert solver[0] == with_solver[0] and solver[1] == pytest.approx(with_solver[1], abs=1e-5)
        assert engines.versions == {"planner": 1, "solver": 1}

        with pytest.raises(EngineError, match="one of the policies"):
            await engines.chat_completions({"model": "critic", "messages": MESSAGES})
        with pytest.raises(ValueError, match="which policy"):
            await engines.update_weights(lora=planner_lora)
        assert [m["id"] for m in (await engines.models())["data"]] == ["planner", "solver"]
    finally:
        await engines.close()
        await reference.close()


async def test_the_gateway_records_each_policys_version() -> None:
    model, tokenizer = tiny_model(seed=0)
    engines = PolicyEngines.local(model, tokenizer, ["planner", "solver"], **KW)
    store = MemoryStore()
    gateway = Gateway(engines, GatewayConfig(span_flush_interval=0.01))
    gateway.bind(store)
    await gateway.start()
    try:
        await engines.update_weights(lora=_random_lora(model, 1), policy="solver", version=7)
        rollout = await store.enqueue_rollout({"q": 1})
        claim = await store.claim_rollout("w")
        assert claim is not None
        for agent in ("planner", "solver"):  # a harnessed program: the policy by model, the agent by suffix
            origin, body = origin_of({}, {"model": f"{agent}#{agent}", "messages": MESSAGES, "max_tokens": 3})
            await gateway.complete("chat", body, rollout.rollout_id, claim.attempt.attempt_id, origin)
        await gateway.flush()
        spans = [s for s in await store.get_spans(rollout.rollout_id) if "agentbolt.llm.request" in s.attributes]
        got = [(s.attributes["agentbolt.agent.name"], s.attributes["gen_ai.response.model"],
                s.attributes["agentbolt.llm.policy_version"]) for s in spans]
        assert got == [("planner", "planner", 0), ("solver", "solver", 7)]
    finally:
        await gateway.close()
