"""extract_model_calls: which spans are model calls, what is read from them, and the
agent name each call is attributed to."""

from __future__ import annotations

import json

from agentbolt.adapters import extract_model_calls

from .spans import Attempt, ids_of, user


def test_calls_are_the_spans_with_a_request_in_start_order() -> None:
    a = Attempt()
    a.chat("c1", [user("one")], "first")
    a.reward(0.5)
    a.chat("c2", [user("two")], "second")
    spans = list(reversed(a.spans))  # the order given does not matter

    calls = extract_model_calls(spans)

    assert [c.span_id for c in calls] == ["c1", "c2"]
    first = calls[0]
    assert first.messages == [user("one")]
    assert first.response_text == "first"
    assert first.response_message == {"role": "assistant", "content": "first", "refusal": None}
    assert first.prompt_token_ids == ids_of(json.dumps([user("one")]))
    assert first.response_token_ids == ids_of("first")
    assert first.response_logprobs == [-0.5] * len("first")
    assert first.token_ids_source == "engine" and first.has_token_ids
    assert first.model == "m-served" and first.operation == "chat" and first.finish_reason == "stop"
    assert (first.rollout_id, first.attempt_id) == ("ro-1", "at-1")
    assert first.start_time < first.end_time < calls[1].start_time


def test_a_framework_wrapper_is_not_counted_twice() -> None:
    a = Attempt()
    a.wrapper("w1", ["c1"])
    a.chat("c1", [user("hi")])
    assert [c.span_id for c in extract_model_calls(a.spans)] == ["c1"]


def test_tool_calls_and_tools_are_parsed() -> None:
    tool = {"type": "function", "function": {"name": "calc", "parameters": {"type": "object"}}}
    call = {"id": "call_1", "type": "function", "function": {"name": "calc", "arguments": '{"x": "1+1"}'}}
    a = Attempt()
    a.chat("c1", [user("use the calculator: 1+1")], None, tools=[tool], tool_calls=[call])
    (c,) = extract_model_calls(a.spans)
    assert c.tools == [tool]
    assert c.tool_calls == [call]
    assert c.response_text is None and c.finish_reason == "tool_calls"


def test_text_completions_have_a_prompt_and_text() -> None:
    a = Attempt()
    a.completion("c1", "2+2=", "4")
    (c,) = extract_model_calls(a.spans)
    assert c.operation == "text_completion"
    assert c.messages is None and c.prompt == "2+2=" and c.response_text == "4"
    assert c.response_message is None and c.finish_reason == "length"


def test_missing_token_ids_stay_missing() -> None:
    a = Attempt()
    a.chat("c1", [user("hi")], token_ids=False)
    (c,) = extract_model_calls(a.spans)
    assert c.prompt_token_ids is None and c.response_token_ids is None and c.response_logprobs is None
    assert c.token_ids_source == "none" and not c.has_token_ids


def test_failed_calls_are_flagged() -> None:
    a = Attempt()
    a.chat("c1", [user("hi")], failed=True)
    (c,) = extract_model_calls(a.spans)
    assert c.failed and c.response == {} and c.response_text is None


def test_spans_of_several_attempts_keep_their_own_ids() -> None:
    a, b = Attempt("ro-1", "at-1"), Attempt("ro-2", "at-2")
    a.chat("c1", [user("a")])
    b.chat("c1", [user("b")])  # the same span id in another attempt is another call
    calls = extract_model_calls([*a.spans, *b.spans])
    assert sorted((c.rollout_id, c.messages[0]["content"]) for c in calls) == [("ro-1", "a"), ("ro-2", "b")]


# ------------------------------------------------------------------------- agent names
def test_the_agent_name_on_the_call_wins() -> None:
    a = Attempt()
    node = a.chain("n1", "solver", {"metadata": json.dumps({"langgraph_node": "solver"})})
    a.chat("c1", [user("hi")], agent="team", parent=node.span_id)
    assert extract_model_calls(a.spans)[0].agent_name == "team"


def test_langgraph_node_in_the_wrappers_metadata_names_the_agent() -> None:
    """LangGraph puts the node in LangChain's metadata of the ChatOpenAI span; the
    client call is that span's sibling, found through agentbolt.llm.wrapped_span_ids."""
    a = Attempt()
    a.wrapper("w1", ["c1"], metadata={"ls_integration": "langchain_chat_model", "langgraph_node": "planner"})
    a.chat("c1", [user("plan")])
    assert extract_model_calls(a.spans)[0].agent_name == "planner"


def test_the_nearest_named_ancestor_names_the_agent() -> None:
    a = Attempt()
    outer = a.chain("o1", "invoke_agent", {"gen_ai.agent.name": "orchestrator"})
    inner = a.chain("i1", "invoke_agent", {"agent.name": "researcher"}, parent=outer.span_id)
    a.chat("c1", [user("x")], parent=inner.span_id)
    a.chat("c2", [user("y")], parent=outer.span_id)
    names = {c.span_id: c.agent_name for c in extract_model_calls(a.spans)}
    assert names == {"c1": "researcher", "c2": "orchestrator"}


def test_an_ancestor_of_the_wrapper_names_the_agent() -> None:
    a = Attempt()
    node = a.chain("n1", "solver", {"metadata": json.dumps({"langgraph_node": "solver"})})
    a.wrapper("w1", ["c1"], parent=node.span_id)
    a.chat("c1", [user("solve")])  # a sibling of the wrapper, child of the root
    assert extract_model_calls(a.spans)[0].agent_name == "solver"


def test_a_call_nobody_named_has_no_agent() -> None:
    a = Attempt()
    a.chain("n1", "LangGraph", {"metadata": json.dumps({"ls_integration": "langgraph"})})
    a.chat("c1", [user("hi")])
    assert extract_model_calls(a.spans)[0].agent_name is None


# ----------------------------------------------------------------------------- one call, two spans
GATEWAY = {"otel.scope.name": "agentbolt.gateway", "agentbolt.llm.policy_version": 3}


def test_a_call_seen_by_the_gateway_and_the_client_is_kept_once_as_the_gateways() -> None:
    a = Attempt()
    asked = [user("2+2?")]
    a.chat("client00000000001", asked, "4")  # the agent's instrumented OpenAI client
    a.chat("gateway0000000001", asked, "4", extra=GATEWAY)
    a.chat("client00000000002", [*asked, {"role": "assistant", "content": "4"}, user("sure?")], "yes")
    a.chat("gateway0000000002", [*asked, {"role": "assistant", "content": "4"}, user("sure?")], "yes", extra=GATEWAY)
    calls = extract_model_calls(a.spans)
    assert [c.span_id for c in calls] == ["gateway0000000001", "gateway0000000002"]


def test_client_spans_without_token_ids_match_the_gateway_call_by_text() -> None:
    a = Attempt()
    a.chat("client00000000001", [user("hi")], "hello", token_ids=False)
    a.chat("gateway0000000001", [user("hi")], "hello", extra=GATEWAY)
    assert [c.span_id for c in extract_model_calls(a.spans)] == ["gateway0000000001"]


def test_calls_the_gateway_did_not_see_are_kept() -> None:
    a = Attempt()
    a.chat("client00000000001", [user("to another provider")], "answer")  # e.g. a judge model called directly
    a.chat("client00000000002", [user("hi")], "hello")
    a.chat("gateway0000000001", [user("hi")], "hello", extra=GATEWAY)
    assert [c.span_id for c in extract_model_calls(a.spans)] == ["client00000000001", "gateway0000000001"]


def test_two_identical_calls_through_the_gateway_stay_two() -> None:
    a = Attempt()
    for i in (1, 2):
        a.chat(f"client0000000000{i}", [user("roll a die")], "4")
        a.chat(f"gateway000000000{i}", [user("roll a die")], "4", extra=GATEWAY)
    assert [c.span_id for c in extract_model_calls(a.spans)] == ["gateway0000000001", "gateway0000000002"]


def test_the_kept_gateway_call_takes_the_agent_name_of_its_client_twin() -> None:
    # the bug this guards: the gateway span (kept) had no name, the client span (dropped) had it,
    # so agent_match selected nothing on the path that trains
    a = Attempt()
    a.wrapper("w1", ["client00000000001"], metadata={"langgraph_node": "planner"})
    a.chat("client00000000001", [user("plan")], "a plan", extra={"client.only": "kept"})
    a.chat("gateway0000000001", [user("plan")], "a plan", extra=GATEWAY)
    a.chat("client00000000002", [user("solve")], "42", agent="solver")
    a.chat("gateway0000000002", [user("solve")], "42", extra={**GATEWAY, "agentbolt.agent.name": "from-header"})
    first, second = extract_model_calls(a.spans)
    assert (first.span_id, first.agent_name) == ("gateway0000000001", "planner")
    assert first.attributes["client.only"] == "kept"  # the twin's attributes fill the gaps
    assert first.attributes["agentbolt.llm.policy_version"] == 3  # the gateway's win
    assert (second.span_id, second.agent_name) == ("gateway0000000002", "from-header")  # the gateway's own name wins


def test_the_gateway_call_takes_token_ids_from_its_twin_when_it_has_none() -> None:
    a = Attempt()
    a.chat("client00000000001", [user("hi")], "hello")
    a.chat("gateway0000000001", [user("hi")], "hello", token_ids=False, extra=GATEWAY)
    (call,) = extract_model_calls(a.spans)
    assert call.span_id == "gateway0000000001" and call.has_token_ids and call.token_ids_source == "engine"


def test_a_gateway_span_under_the_client_span_is_its_twin_whatever_each_recorded() -> None:
    # the Responses API with previous_response_id: the client recorded the new turn only, the
    # gateway rebuilt the whole conversation; the traceparent the client sent makes it the child
    a = Attempt()
    crew = a.chain("agent00000000001", "Crew Agent", {"graph.node.id": "researcher"})
    client = a.chat("client00000000001", [user("and now?")], "done", token_ids=False, parent=crew.span_id)
    history = [user("2+3?"), {"role": "assistant", "content": "5"}, user("and now?")]
    a.chat("gateway0000000001", history, "done", extra=GATEWAY, parent=client.span_id)
    (call,) = extract_model_calls(a.spans)
    assert call.span_id == "gateway0000000001"
    assert call.messages == history and call.has_token_ids  # the gateway's record, its token ids
    assert call.agent_name == "researcher"  # the client's name


def test_a_client_span_is_twinned_with_its_last_gateway_child_that_answered() -> None:
    a = Attempt()
    client = a.chat("client00000000001", [user("hi")], "hello", token_ids=False, agent="solver")
    a.chat("gateway0000000001", [user("hi")], None, failed=True, extra=GATEWAY, parent=client.span_id)  # a 500, retried
    a.chat("gateway0000000002", [user("hi")], "hello", extra=GATEWAY, parent=client.span_id)
    calls = extract_model_calls(a.spans)
    assert [(c.span_id, c.failed, c.agent_name) for c in calls] == [
        ("gateway0000000001", True, "solver"), ("gateway0000000002", False, "solver")
    ]


def test_the_span_tree_pairs_twins_before_their_content_does() -> None:
    # two identical calls: by content the first gateway span would take the second client span
    a = Attempt()
    first = a.chat("client00000000001", [user("roll a die")], "4", agent="a")
    second = a.chat("client00000000002", [user("roll a die")], "4", agent="b")
    a.chat("gateway0000000002", [user("roll a die")], "4", extra=GATEWAY, parent=second.span_id)
    a.chat("gateway0000000001", [user("roll a die")], "4", extra=GATEWAY, parent=first.span_id)
    names = {c.span_id: c.agent_name for c in extract_model_calls(a.spans)}
    assert names == {"gateway0000000001": "a", "gateway0000000002": "b"}


def test_graph_node_id_names_the_agent_crewais_role() -> None:
    # CrewAI's OpenInference instrumentor writes the agent's role as graph.node.id
    a = Attempt()
    agent = a.chain("agent00000000001", "Agent._execute_task", {"openinference.span.kind": "AGENT",
                                                                "graph.node.id": "Senior Researcher"})
    a.chat("c1", [user("find it")], parent=agent.span_id)
    assert extract_model_calls(a.spans)[0].agent_name == "Senior Researcher"


def test_on_one_span_a_graph_nodes_name_wins_over_its_id() -> None:
    a = Attempt()
    node = a.chain("n1", "node", {"graph.node.id": "node-7", "graph.node.name": "planner"})
    a.chat("c1", [user("plan")], parent=node.span_id)
    assert extract_model_calls(a.spans)[0].agent_name == "planner"


def test_a_smolagents_run_span_names_the_agent_by_its_span_name() -> None:
    # smolagents' OpenInference instrumentor writes the agent's name only as "<name>.run"
    a = Attempt()
    run = a.chain("r1", "calc.run", {"openinference.span.kind": "AGENT",
                                     "otel.scope.name": "openinference.instrumentation.smolagents"})
    step = a.chain("s1", "Step 1", {"openinference.span.kind": "CHAIN"}, parent=run.span_id)
    a.chat("c1", [user("2+3?")], parent=step.span_id)
    other = a.chain("r2", "other.run", {"openinference.span.kind": "AGENT"})  # another scope: not a name
    a.chat("c2", [user("2+3?")], parent=other.span_id)
    assert [c.agent_name for c in extract_model_calls(a.spans)] == ["calc", None]
