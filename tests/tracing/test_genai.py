"""Normalisation of model-call spans from the shapes instrumentations write (pure
functions: the other tests cover them end to end)."""

from __future__ import annotations

import json

from agentbolt.tracing.genai import normalise_model_call


def oi_span(**attributes: object) -> dict[str, object]:
    return {"openinference.span.kind": "LLM", **attributes}


def test_spans_that_are_not_model_calls_are_left_alone() -> None:
    assert normalise_model_call({"openinference.span.kind": "CHAIN", "input.value": "{}"}) is None
    assert normalise_model_call({"agentbolt.message.content": "hi"}) is None


def test_vllm_completions_with_token_ids_inside_the_choice() -> None:
    response = {
        "object": "text_completion",
        "model": "qwen",
        "choices": [
            {
                "index": 0,
                "text": " 4",
                "token_ids": [220, 19],
                "prompt_token_ids": [17, 10, 17, 28],
                "finish_reason": "length",
            }
        ],
        "usage": {"prompt_tokens": 4, "completion_tokens": 2},
    }
    call = normalise_model_call(
        oi_span(
            **{
                "input.value": json.dumps({"model": "qwen", "prompt": "2+2=", "max_tokens": 2}),
                "output.value": json.dumps(response),
            }
        )
    )
    assert call is not None and call.raw
    a = call.attributes
    assert call.name == "text_completion qwen"
    assert a["agentbolt.llm.prompt_token_ids"] == [17, 10, 17, 28]
    assert a["agentbolt.llm.response_token_ids"] == [220, 19]
    assert a["gen_ai.request.max_tokens"] == 2
    assert a["gen_ai.response.finish_reasons"] == ["length"]
    assert "agentbolt.llm.response_logprobs" not in a


def test_incomplete_logprobs_and_malformed_token_ids_are_not_kept() -> None:
    response = {
        "object": "chat.completion",
        "prompt_token_ids": [1, "2", 3],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "ok"},
                "token_ids": [5, 6],
                "logprobs": {"content": [{"token": "o", "logprob": -0.1}, {"token": "k", "logprob": None}]},
            }
        ],
    }
    call = normalise_model_call(
        oi_span(**{"input.value": json.dumps({"model": "m", "messages": []}), "output.value": json.dumps(response)})
    )
    assert call is not None
    assert "agentbolt.llm.prompt_token_ids" not in call.attributes
    assert call.attributes["agentbolt.llm.response_token_ids"] == [5, 6]
    assert "agentbolt.llm.response_logprobs" not in call.attributes
    assert call.attributes["agentbolt.llm.token_ids_source"] == "engine"


def test_litellm_shape_merges_parameters_and_drops_secrets() -> None:
    """LiteLLM puts only the messages in input.value and the rest in the parameters."""
    call = normalise_model_call(
        oi_span(
            **{
                "input.value": json.dumps({"messages": [{"role": "user", "content": "hi"}]}),
                "llm.invocation_parameters": json.dumps({"model": "gpt-x", "temperature": 0.1, "api_key": "sk-secret"}),
                "output.value": json.dumps({"object": "chat.completion", "model": "gpt-x", "choices": []}),
            }
        )
    )
    assert call is not None
    request = json.loads(call.attributes["agentbolt.llm.request"])
    assert request == {"model": "gpt-x", "temperature": 0.1, "messages": [{"role": "user", "content": "hi"}]}
    assert "sk-secret" not in json.dumps(call.attributes)
    assert call.attributes["gen_ai.request.temperature"] == 0.1


def test_flattened_messages_with_tool_calls_become_openai_messages() -> None:
    call = normalise_model_call(
        oi_span(
            **{
                "input.value": '{"messages": [[{"lc": 1}]]}',
                "output.value": '{"generations": []}',
                "llm.model_name": "claude-x",
                "llm.provider": "anthropic",
                "llm.input_messages.0.message.role": "system",
                "llm.input_messages.0.message.content": "be brief",
                "llm.input_messages.1.message.role": "user",
                "llm.input_messages.1.message.contents.0.message_content.type": "text",
                "llm.input_messages.1.message.contents.0.message_content.text": "weather in Paris?",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_1",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "weather",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"city": "Paris"}',
                "llm.tools.0.tool.json_schema": json.dumps({"type": "function", "function": {"name": "weather"}}),
                "llm.token_count.prompt": 12,
                "llm.token_count.completion": 7,
            }
        )
    )
    assert call is not None and not call.raw
    a = call.attributes
    assert call.name == "chat claude-x"
    assert a["gen_ai.provider.name"] == "anthropic"
    assert json.loads(a["agentbolt.llm.request"]) == {
        "model": "claude-x",
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "weather in Paris?"}],
        "tools": [{"type": "function", "function": {"name": "weather"}}],
    }
    (choice,) = json.loads(a["agentbolt.llm.response"])["choices"]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}
    ]
    assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (12, 7)
    assert a["agentbolt.llm.token_ids_source"] == "none"
    assert not any(k.startswith(("llm.input_messages.", "llm.output_messages.", "input.value")) for k in a)


def test_garbage_payloads_still_give_a_model_call() -> None:
    call = normalise_model_call(
        oi_span(**{"input.value": "not json", "output.value": "{broken", "llm.model_name": "m"})
    )
    assert call is not None
    assert call.name == "chat m"
    assert json.loads(call.attributes["agentbolt.llm.request"]) == {"model": "m", "messages": []}
    assert call.attributes["agentbolt.llm.token_ids_source"] == "none"


def test_spans_already_in_genai_form_are_kept() -> None:
    call = normalise_model_call(
        {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 3}
    )
    assert call is not None
    assert call.name == "chat m"
    assert call.attributes["gen_ai.usage.input_tokens"] == 3
    assert call.attributes["agentbolt.llm.token_ids_source"] == "none"


def test_a_traced_vllm_answer_keeps_choice_zeros_token_ids_in_their_attributes_only() -> None:
    response = {
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop",
                     "prompt_token_ids": [1, 2, 3], "token_ids": [7, 8]}],
    }
    call = normalise_model_call(
        oi_span(**{"input.value": json.dumps({"model": "m", "messages": []}), "output.value": json.dumps(response)})
    )
    assert call is not None and call.raw
    a = call.attributes
    assert a["agentbolt.llm.prompt_token_ids"] == [1, 2, 3] and a["agentbolt.llm.response_token_ids"] == [7, 8]
    (choice,) = json.loads(a["agentbolt.llm.response"])["choices"]
    assert choice == {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
