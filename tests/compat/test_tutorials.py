"""Code of Agent Lightning v0.3's tutorials and how-tos ("Write agents", "Emitters",
"Write the first algorithm"), ported with ``agentlightning`` -> ``agentbolt`` in the
imports, each checked for what the tutorial says it does."""

from __future__ import annotations

import asyncio
from typing import Any, TypedDict

from openai import OpenAI

import agentbolt as agl
from agentbolt import LLM, PromptTemplate, Rollout, rollout
from tests.compat.scripted_openai import last_user


class FlightBookingTask(TypedDict):
    request: str
    expected_booking: dict[str, Any]


@rollout
def flight_assistant(task: FlightBookingTask, llm: LLM, rollout: Rollout) -> float:
    """"Write agents": the tuned LLM and the rollout are injected by name."""
    assert rollout.mode in ("train", "val", "test")
    client = OpenAI(base_url=llm.endpoint, api_key=llm.api_key or "dummy-key")
    reply = client.chat.completions.create(model=llm.model, messages=[{"role": "user", "content": task["request"]}])
    booked = (reply.choices[0].message.content or "").strip()
    return 1.0 if booked == task["expected_booking"]["flight"] else 0.0


class RoomSelectorAgent(agl.LitAgent[dict]):
    """"Write agents", the class form: resources arrive as a dict by name."""

    def rollout(self, task: dict[str, Any], resources: agl.NamedResources, rollout: agl.Rollout) -> float:
        prompt = resources["prompt_template"].format(**task)
        return 1.0 if task["room"] in prompt else 0.0


def test_write_agents_function_and_class_forms(openai_script: Any) -> None:
    server = openai_script(lambda body: "LH123" if "Munich" in last_user(body) else "BA9")
    llm = agl.LLM(endpoint=server.url, model="gpt-4.1-nano", api_key="sk-test")
    dataset: agl.Dataset[FlightBookingTask] = [
        FlightBookingTask(request="Book a flight to Munich", expected_booking={"flight": "LH123"}),
        FlightBookingTask(request="Book a flight to Rome", expected_booking={"flight": "AZ1"}),
    ]
    result = agl.Trainer(initial_resources={"main_llm": llm}).fit(agent=flight_assistant, train_dataset=dataset)
    assert [row.reward for row in result.rows] == [1.0, 0.0]

    prompt = PromptTemplate(template="Book {room} for {people}.", engine="f-string")
    result = agl.Trainer(initial_resources={"prompt_template": prompt}).fit(
        agent=RoomSelectorAgent(), train_dataset=[{"room": "Orion", "people": 3}])
    assert result.rows[0].reward == 1.0


@agl.rollout
def multi_step_agent(task: dict[str, Any], prompt_template: PromptTemplate) -> float:
    """"Emitters": messages, objects, an intermediate reward, operations; the return
    value is the final reward."""
    agl.emit_message("Starting planning phase.")
    plan = [step.strip() for step in prompt_template.format(**task).split(";")]
    agl.emit_object({"plan_steps": len(plan), "first_step": plan[0]})
    agl.emit_reward(0.1 * len(plan))
    with agl.operation(tool_name="executor") as op:
        op.set_input(plan=plan)
        op.set_output({"done": len(plan)})
    return double(len(plan)) / 10


@agl.operation(category="tool", priority="high")
def double(x: int) -> float:
    return 2.0 * x


def test_emitters_tutorial_and_the_span_readers() -> None:
    store = agl.MemoryStore()
    prompt = PromptTemplate(template="plan {goal}; act; check", engine="f-string")
    result = agl.Trainer(store=store, initial_resources={"prompt_template": prompt}).fit(
        multi_step_agent, [{"goal": "trip"}])
    spans = asyncio.run(store.get_spans(result.rows[0].rollout_id))
    assert [round(agl.get_reward_value(s), 6) for s in agl.find_reward_spans(spans)] == [0.3, 0.6]
    assert agl.find_final_reward(spans) == 0.6
    assert [agl.get_message_value(s) for s in spans if agl.get_message_value(s)] == ["Starting planning phase."]
    assert [agl.get_object_value(s) for s in spans if s.name == "agentbolt.object"] == [
        {"plan_steps": 3, "first_step": "plan trip"}]
    ops = {s.attributes.get("agentbolt.operation.name"): s.attributes for s in spans if s.name == "agentbolt.operation"}
    assert ops["double"]["category"] == "tool" and ops["double"]["priority"] == "high"
    assert ops["operation"]["tool_name"] == "executor"


def simple_agent(task: str, prompt_template: PromptTemplate) -> float:
    """"Write the first algorithm": a plain function agent scored by a (scripted) LLM."""
    client = OpenAI()
    prompt = prompt_template.format(any_question=task)
    reply = client.chat.completions.create(model="gpt-4.1-nano", messages=[{"role": "user", "content": prompt}])
    return float(reply.choices[0].message.content or 0)


async def find_best_prompt(store: Any, prompts_to_test: list[str], task_input: str) -> tuple[str, float]:
    results = []
    for prompt in prompts_to_test:
        update = await store.add_resources(resources={"prompt_template": prompt})
        rollout = await store.enqueue_rollout(input=task_input, resources_id=update.resources_id)
        await store.wait_for_rollouts([rollout.rollout_id])
        completed = await store.get_rollout_by_id(rollout.rollout_id)
        assert completed.status == "succeeded"
        spans = await store.query_spans(rollout.rollout_id)
        results.append((prompt, agl.find_final_reward(spans)))
    return max(results, key=lambda item: item[1])


async def test_write_the_first_algorithm(openai_script: Any) -> None:
    openai_script(lambda body: "0.95" if "knowledgeable" in last_user(body) else "0.4")
    store = agl.InMemoryLightningStore()
    runner = agl.LitAgentRunner[str](tracer=agl.AgentOpsTracer())
    stop = agl.ThreadingEvent()
    with runner.run_context(agent=simple_agent, store=store):
        serving = asyncio.create_task(runner.iter(event=stop))
        best = await find_best_prompt(store, [
            "You are a helpful assistant. {any_question}",
            "You are a knowledgeable AI. {any_question}",
            "You are a friendly chatbot. {any_question}",
        ], "Why is the sky blue?")
        stop.set()
        await asyncio.wait_for(serving, 10)
    assert best == ("You are a knowledgeable AI. {any_question}", 0.95)
