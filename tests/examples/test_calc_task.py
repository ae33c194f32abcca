"""The calc task's pure logic: problems, the safe calculator, parsing, the episode, the reward."""

from __future__ import annotations

import importlib.util
import re
import sys
from fractions import Fraction
from pathlib import Path

import pytest


def _load_task_module():
    """examples/calc/task.py under a name of its own (``task`` alone is too common)."""
    path = Path(__file__).resolve().parents[2] / "examples" / "calc" / "task.py"
    spec = importlib.util.spec_from_file_location("calc_example_task", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


calc = _load_task_module()
CALL_BONUS, MAX_MODEL_CALLS = calc.CALL_BONUS, calc.MAX_MODEL_CALLS
CalcEpisode, CalcError, parse_answer, parse_call = calc.CalcEpisode, calc.CalcError, calc.parse_answer, calc.parse_call
make_dataset, train_set, heldout_set = calc.make_dataset, calc.train_set, calc.heldout_set
reward, safe_eval = calc.reward, calc.safe_eval

DIFFICULTIES = ["mul", "word", "multi"]
TASK = {"id": "t", "question": "A box holds 37 apples. How many apples are in 48 boxes?", "answer": 1776}


# ----------------------------------------------------------------------------- dataset
@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_make_dataset_is_deterministic_and_distinct(difficulty):
    first = make_dataset(50, seed=3, difficulty=difficulty)
    assert first == make_dataset(50, seed=3, difficulty=difficulty)
    assert first != make_dataset(50, seed=4, difficulty=difficulty)
    assert len({t["question"] for t in first}) == 50
    assert len({t["id"] for t in first}) == 50


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_answers_are_what_the_question_computes(difficulty):
    for t in make_dataset(30, seed=0, difficulty=difficulty):
        numbers = [int(x) for x in re.findall(r"\d+", t["question"])]
        assert isinstance(t["answer"], int) and safe_eval(t["expression"]) == t["answer"]
        assert t["answer"] >= 100  # not a one-digit mental sum: the calculator matters
        assert numbers[0] * numbers[1] in (t["answer"], *(t["answer"] + s * c for c in numbers[2:] for s in (1, -1)))


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_train_and_heldout_sets_are_disjoint(difficulty):
    train = {t["question"] for t in train_set(400, difficulty)}
    heldout = {t["question"] for t in heldout_set(100, difficulty)}
    assert len(train) == 400 and len(heldout) == 100
    assert train.isdisjoint(heldout)


def test_unknown_difficulty_is_refused():
    with pytest.raises(ValueError, match="difficulty"):
        make_dataset(1, seed=0, difficulty="hard")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- calculator
@pytest.mark.parametrize(("expr", "value"), [
    ("37 * 48", 1776), ("(12 + 3) * 4 - 5", 55), ("-3 + +4", 1), ("7 / 2", Fraction(7, 2)),
    ("1.5 * 4", 6), ("  100  ", 100),
])
def test_safe_eval_computes_arithmetic_exactly(expr, value):
    assert safe_eval(expr) == value


@pytest.mark.parametrize(("expr", "why"), [
    ("__import__('os').system('true')", "not"),
    ("x * 2", "Name"),
    ("(1).real", "Attribute"),
    ("9 ** 9 ** 9", "BinOp"),
    ("2 ** 3", "BinOp"),
    ("5 // 2", "BinOp"),
    ("1 / 0", "division by zero"),
    ("4 / (2 - 2)", "division by zero"),
    ("99999999 * 99999999 * 99999999", "too large"),
    ("1 +", "not an arithmetic expression"),
    ("'a' * 3", "Constant"),
    ("True + 1", "Constant"),
    ("1" * 200, "longer"),
])
def test_safe_eval_refuses_everything_else(expr, why):
    with pytest.raises(CalcError, match=why):
        safe_eval(expr)


# ----------------------------------------------------------------------------- parsing
@pytest.mark.parametrize("reply", [
    "CALC(37 * 48)", "calc(37*48)", "Sure! CALC( 37 * 48 ) and then", "CALC[37 * 48]",
    "Calculate(37 x 48)", "CALC(37 × 48 =)", "CALC((30 + 7) * 48)", "CALC(37 * 48", "CALC(37 * 48\nmore",
])
def test_parse_call_is_lenient(reply):
    call = parse_call(reply)
    assert call is not None and call.ok and call.value == 1776


def test_parse_call_reports_bad_expressions_and_absent_calls():
    bad = parse_call("CALC(apples * 48)")
    assert bad is not None and not bad.ok and "Name" in (bad.error or "")
    assert parse_call("37 * 48 = 1776") is None
    assert parse_call("") is None
    thousands = parse_call("CALC(1,200 + 3)")
    assert thousands is not None and thousands.value == 1203


@pytest.mark.parametrize(("reply", "answer"), [
    ("ANSWER: 1776", 1776), ("answer: 1,776.", 1776), ("The answer is 1776", 1776),
    ("ANSWER: 12 because 3 * 4 = 12... no wait, ANSWER: 13", 13), ("ANSWER: -4.5", -4.5),
    ("37 times 48 makes 1776 apples", 1776), ("It is 1776.", 1776), ("no idea", None), ("", None),
])
def test_parse_answer_takes_the_answer_line_else_the_last_number(reply, answer):
    assert parse_answer(reply) == answer


# ----------------------------------------------------------------------------- episode + reward
def test_episode_call_then_answer_is_a_success():
    ep = CalcEpisode(TASK)
    first = ep.messages()
    assert first[0]["role"] == "system" and first[-1] == {"role": "user", "content": TASK["question"]}
    ep.consume("CALC(37 * 48)")
    assert not ep.done and ep.call_ok and ep.call_correct
    second = ep.messages()
    assert second[: len(first)] == first  # the history only grows: calls can merge in training
    assert second[-2] == {"role": "assistant", "content": "CALC(37 * 48)"}
    assert second[-1]["role"] == "user" and "Result: 1776." in second[-1]["content"]
    assert "ANSWER" in second[-1]["content"]
    ep.consume("ANSWER: 1776")
    assert ep.done and ep.correct and ep.answer == 1776
    assert reward(ep) == pytest.approx(1.0 + CALL_BONUS)


def test_episode_right_call_wrong_copy_earns_only_the_bonus():
    ep = CalcEpisode(TASK)
    ep.consume("CALC(37*48)")
    ep.consume("ANSWER: 1767")
    assert ep.done and ep.call_correct and not ep.correct
    assert reward(ep) == pytest.approx(CALL_BONUS)


def test_episode_direct_answer_is_graded_from_turn_one():
    ep = CalcEpisode(TASK)
    ep.consume("37 * 48 = 1776, so ANSWER: 1776")
    assert ep.done and ep.correct and ep.call is None and len(ep.replies) == 1
    assert reward(ep) == 1.0
    wrong = CalcEpisode(TASK)
    wrong.consume("ANSWER: 1700")
    assert wrong.done and reward(wrong) == 0.0


def test_episode_garbage_scores_zero():
    ep = CalcEpisode(TASK)
    ep.consume("I like turtles.")
    assert ep.done and ep.answer is None and reward(ep) == 0.0


def test_episode_bad_call_gets_an_error_message_and_no_bonus():
    ep = CalcEpisode(TASK)
    ep.consume("CALC(apples times boxes)")
    assert not ep.done and ep.call is not None and not ep.call_ok
    assert ep.messages()[-1]["content"].startswith("Error:")
    ep.consume("ANSWER: 1776")
    assert ep.done and ep.correct and reward(ep) == 1.0


def test_episode_stops_after_max_model_calls():
    ep = CalcEpisode(TASK)
    ep.consume("CALC(37 * 48)")
    ep.consume("CALC(1776 * 1)")  # a second call is read as the answer, not run
    assert MAX_MODEL_CALLS == 2 and ep.done and len(ep.replies) == 2
    assert ep.answer == 1  # the last number of the reply
    with pytest.raises(RuntimeError, match="over"):
        ep.consume("ANSWER: 1776")
    with pytest.raises(RuntimeError, match="over"):
        ep.messages()


def test_division_results_are_shown_as_decimals():
    ep = CalcEpisode({"id": "d", "question": "What is 7 / 2?", "answer": 3.5})
    ep.consume("CALC(7 / 2)")
    assert "Result: 3.5." in ep.messages()[-1]["content"]
    ep.consume("ANSWER: 3.5")
    assert ep.correct


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_a_model_that_calls_correctly_and_copies_the_result_always_succeeds(difficulty):
    for t in heldout_set(100, difficulty):
        ep = CalcEpisode(t)
        ep.consume(f"CALC({t['expression']})")
        result = re.search(r"Result: (-?\d+)", ep.messages()[-1]["content"])
        assert result is not None
        ep.consume(f"ANSWER: {result.group(1)}")
        assert ep.correct and reward(ep) == pytest.approx(1.0 + CALL_BONUS)


def test_defaults_are_the_chosen_task():
    assert calc.DEFAULT_DIFFICULTY == "multi" and calc.DEFAULT_PROTOCOL == calc.PROTOCOLS["fewshot2"]
    assert calc.MAX_TOKENS <= 64
    first = CalcEpisode(train_set(1)[0]).messages()
    assert [m["role"] for m in first] == ["system", "user", "assistant", "user", "assistant", "user"]
