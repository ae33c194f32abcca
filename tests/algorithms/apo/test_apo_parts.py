"""APO's parts on their own: placeholders, the editor's reply, traces, selection,
the history files, the config and the errors a user meets first."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from pydantic import ValidationError

import agentbolt
from agentbolt import LLM, Span
from agentbolt.adapters.calls import extract_model_calls
from agentbolt.algorithms import APO, APOConfig, Candidate
from agentbolt.algorithms.apo import (
    APOError,
    PlaceholderError,
    best_of,
    check_edit,
    check_formats,
    fronts,
    load_history,
    parse_template,
    placeholders,
    render_trace,
    select_beam,
    select_pareto,
)
from agentbolt.algorithms.apo.candidates import HISTORY_FILE, append_history
from agentbolt.gateway import GatewayConfig
from agentbolt.semconv import LLM_REQUEST, LLM_RESPONSE
from algorithms.apo.world import INITIAL, config, run_apo, tasks


# ----------------------------------------------------------------------------- placeholders
def test_placeholders_are_the_str_format_fields() -> None:
    assert placeholders("Pick {request} among {rooms}; {{literal}} {user.name} {xs[0]}") == {
        "request", "rooms", "user.name", "xs[0]"}


@pytest.mark.parametrize(("edited", "why"), [
    ("Pick a room for {request}.", "missing {rooms}"),
    ("Pick a room for {request} among {rooms} on {date}.", "unexpected {date}"),
    ('Pick {request} among {rooms}. Answer {"room": "A"}.', "unexpected"),
    ("Pick {request} among {rooms", "not valid str.format"),
    ("Pick {} among {rooms} for {request}", "positional"),
])
def test_an_edit_must_keep_exactly_the_placeholders(edited: str, why: str) -> None:
    with pytest.raises(PlaceholderError, match=why):
        check_edit(INITIAL, edited)


def test_a_faithful_edit_passes_even_with_literal_braces_and_repeats() -> None:
    check_edit(INITIAL, 'Pick a room for {request} among {rooms}. Reply {{"room": "A"}}. Recall {request}.')
    check_formats("no placeholders at all")


# ----------------------------------------------------------------------------- editor replies
def test_the_template_is_read_from_a_fenced_block_or_the_plain_reply() -> None:
    assert parse_template("Sure:\n```text\nPick {request}.\nBe brief.\n```\nDone.") == "Pick {request}.\nBe brief."
    assert parse_template("  Pick {request}.  \n") == "Pick {request}."
    nested = "```\nAnswer like:\n```json\n{{}}\n```\nThanks.\n```"
    assert parse_template(nested) == "Answer like:\n```json\n{{}}\n```\nThanks."


# ----------------------------------------------------------------------------- traces
def _call_span(user: str, answer: str) -> Span:
    request = {"model": "m", "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": user}]}
    response = {"choices": [{"index": 0, "message": {"role": "assistant", "content": answer}}]}
    return Span(rollout_id="ro-1", attempt_id="at-1", name="chat m",
                attributes={LLM_REQUEST: orjson.dumps(request).decode(), LLM_RESPONSE: orjson.dumps(response).decode()})


def test_a_trace_shows_input_messages_answer_and_reward() -> None:
    calls = extract_model_calls([_call_span("book room for 3", "Room A")])
    text = render_trace(2, {"request": "3 people"}, calls, 0.0, 4000)
    assert text.startswith('<trace index="2" reward="0">') and text.endswith("</trace>")
    for part in ('Task input: {"request":"3 people"}', "[system] sys", "[user] book room for 3",
                 "[answer] Room A", "Reward: 0"):
        assert part in text


def test_a_long_trace_is_cut_in_the_middle_and_a_call_free_one_still_shows_input_and_reward() -> None:
    calls = extract_model_calls([_call_span("x" * 5000, "THE END")])
    text = render_trace(1, "task", calls, 0.5, 1000)
    assert len(text) < 1100 and "characters cut" in text and "THE END" in text and "Task input: task" in text
    bare = render_trace(1, {"a": 1}, [], 0.0, 1000)
    assert "no recorded model call" in bare and "Reward: 0" in bare


# ----------------------------------------------------------------------------- selection
def cand(cid: str, scores: dict[int, float]) -> Candidate:
    return Candidate(candidate_id=cid, template=cid, val_scores=scores)


def test_beam_keeps_the_top_means_older_first_on_ties() -> None:
    a, b, c, d = cand("a", {0: 0.5}), cand("b", {0: 1.0}), cand("c", {0: 0.5}), cand("d", {})
    assert [x.candidate_id for x in select_beam([a, b, c, d], 2)] == ["b", "a"]
    assert best_of([d, a, c]).candidate_id == "a"  # an all-failed candidate ranks last


def test_pareto_keeps_a_specialist_with_a_lower_mean_that_beam_drops() -> None:
    general = cand("general", {0: 1.0, 1: 1.0, 2: 0.0, 3: 0.5})
    runner_up = cand("runner_up", {0: 1.0, 1: 0.5, 2: 0.0, 3: 0.5})  # nowhere better than general
    specialist = cand("specialist", {0: 0.0, 1: 0.0, 2: 1.0, 3: 0.0})  # the only one to solve item 2
    pool = [general, runner_up, specialist]
    assert [c.candidate_id for c in select_beam(pool, 2)] == ["general", "runner_up"]
    assert [c.candidate_id for c in select_pareto(pool, 2)] == ["general", "specialist"]
    assert [c.candidate_id for c in fronts(pool)[2]] == ["specialist"]


def test_pareto_prefers_those_winning_most_items_when_over_width() -> None:
    pool = [cand("one", {0: 1.0, 1: 0.0, 2: 0.0}), cand("two", {0: 0.0, 1: 1.0, 2: 1.0}),
            cand("three", {0: 0.0, 1: 0.0, 2: 0.0, 3: 1.0})]
    pool[0].val_scores[3] = 0.0
    pool[1].val_scores[3] = 0.0
    assert [c.candidate_id for c in select_pareto(pool, 2)] == ["two", "one"]  # 2 wins, then the better mean


# ----------------------------------------------------------------------------- history
def test_history_keeps_the_last_line_per_candidate_and_survives_a_torn_line(tmp_path: Path) -> None:
    c = Candidate(candidate_id="c0", template="T {x}")
    append_history(tmp_path, c)
    c.val_scores = {0: 1.0, 3: 0.5}
    append_history(tmp_path, c)
    with open(tmp_path / HISTORY_FILE, "a") as f:
        f.write('{"candidate_id": "c1", "templ')
    [loaded] = load_history(tmp_path)
    assert loaded.val_scores == {0: 1.0, 3: 0.5} and loaded.mean_val == 0.75


# ----------------------------------------------------------------------------- config and errors
def test_config_rejects_nonsense_with_the_field_named(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="beam_width"):
        APOConfig(beam_width=0)
    with pytest.raises(ValidationError, match="selection"):
        APOConfig(selection="greedy")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="beam_widht"):
        APOConfig(beam_widht=2)  # type: ignore[call-arg]
    path = tmp_path / "apo.yaml"
    path.write_text("beam_width: 3\nselection: pareto\nval_batch_size: null\n")
    loaded = APOConfig.from_yaml(path, rounds=5)
    assert (loaded.beam_width, loaded.selection, loaded.val_batch_size, loaded.rounds) == (3, "pareto", None, 5)
    with pytest.raises(ValidationError, match="branch_factor"):
        APO(critic=LLM(endpoint="http://x/v1", model="m"), branch_factor=0)


def test_apo_refuses_a_bad_critic_a_broken_prompt_and_a_missing_dataset(tmp_path: Path) -> None:
    llm = LLM(endpoint="http://127.0.0.1:9/v1", model="m")
    with pytest.raises(APOError, match="critic must be"):
        APO(critic=42)  # type: ignore[arg-type]
    with pytest.raises(PlaceholderError, match="str.format"):
        APO(initial_prompt="Pick {request", critic=llm)
    with pytest.raises(APOError, match="no validation set"):
        run_apo(APO(config(tmp_path), initial_prompt=INITIAL, critic=llm), tasks(), [])
    with pytest.raises(APOError, match="no prompt to start from"):
        run_apo(APO(config(tmp_path), critic=llm), tasks(), tasks())
    with pytest.raises(APOError, match="critic='gateway'.*has none"):
        run_apo(APO(config(tmp_path), initial_prompt=INITIAL, critic="gateway"), tasks(), tasks())


def test_validation_calls_are_greedy_unless_the_gateway_config_says_otherwise() -> None:
    apo = APO(critic=LLM(endpoint="http://x/v1", model="m"))
    cfg = GatewayConfig(sampling={"test": {"temperature": 0.3}})
    apo.configure_gateway(cfg)
    assert cfg.sampling == {"val": {"temperature": 0.0}, "test": {"temperature": 0.3}}


def test_the_names_are_exported_where_guides_look() -> None:
    assert agentbolt.algorithms.APO is APO and agentbolt.algorithms.Candidate is Candidate
